// DeerFlow HEAD's four memory behaviours of issue 24, from the packed tarball installed into a
// fresh project (what a user gets from npm), not the build folder: a `hide_from_ui` message
// never reaches the extraction prompt; a duplicate addition does not block an unpaired
// removal; a thread-scoped removal cannot delete a user fact; explicit corrections and
// confirmations (English and Chinese) add their one-line hint to the prompt, and a correction
// keeps its `sourceError`. The extraction model is an `llm` function in the child process that
// records each prompt and answers the scripted reply. The same behaviours are tested in depth
// against the built package in tests/js/message-shapes, careful-memory and signal-hints.
import { test } from "node:test";
import assert from "node:assert/strict";
import { freshProject } from "../helpers/pack.mjs";
import { runChild } from "../helpers/pipeline.mjs";

const SNIPPET = `
import { UserMemory } from "user-memory";
const prompts = [];
const replies = [];
const llm = async ({ prompt }) => (prompts.push(prompt), JSON.stringify(replies.shift() ?? { newFacts: [] }));
const memory = await UserMemory.open({ storage: "memory", llm, debounceMs: 600000 });
const turn = (user, assistant) => [{ role: "user", content: user }, { role: "assistant", content: assistant }];
const out = {};

// 1. hide_from_ui, in the LangChain shape and the plain one.
for (const hidden of [
  { type: "human", content: "<system_reminder>todo: HIDDEN-TODO</system_reminder>", additional_kwargs: { hide_from_ui: true } },
  { role: "user", content: "<system_reminder>todo: HIDDEN-TODO</system_reminder>", additional_kwargs: { hide_from_ui: true } },
]) {
  await memory.observe("hidden-" + prompts.length, [hidden, ...turn("I moved to Porto last spring.", "Porto is lovely.")]);
  await memory.flush();
  const p = prompts.at(-1);
  (out.hidden ??= []).push({ leaked: /HIDDEN-TODO|system_reminder/.test(p), said: p.includes("I moved to Porto last spring.") });
}

// 2. A duplicate addition and an unpaired removal: the removal applies.
await memory.addFact({ content: "User likes Python", category: "preference" });
const old = await memory.addFact({ content: "Old context to remove", category: "context" });
const kept = await memory.addFact({ content: "Uses Neovim as the editor", category: "preference" });
replies.push({ newFacts: [{ content: "User likes Python", category: "preference", confidence: 0.9 }], factsToRemove: [old.id] });
await memory.observe("dup", turn("I like Python a lot.", "Great choice."));
await memory.flush();
out.afterDuplicate = (await memory.get()).facts.map((f) => f.content).sort();

// 3. A thread-scoped removal of a user fact is refused.
replies.push({
  newFacts: [{ content: "Uses VS Code on a borrowed laptop", category: "context", confidence: 0.9 }],
  factsToRemove: [{ id: kept.id, scope: "thread", reason: "this thread only" }],
});
await memory.observe("scoped", turn("In this thread use VS Code, I'm on a borrowed laptop.", "OK."));
await memory.flush();
out.afterScoped = (await memory.get()).facts.map((f) => f.content);

// 4. Signal hints: a correction (with its sourceError kept), a Chinese correction, a confirmation, nothing.
const hints = (p) => ({
  correction: /^Hint: the user corrects something in the new messages/m.test(p),
  confirmation: /^Hint: the user confirms something in the new messages/m.test(p),
});
replies.push({ newFacts: [{ content: "Starts the dev server with make dev", category: "correction", confidence: 0.95, sourceError: "npm start" }] });
await memory.observe("fix", [...turn("How do I start the dev server?", "Run npm start."), ...turn("That's wrong, use make dev instead.", "Right: make dev.")]);
await memory.flush();
out.fix = hints(prompts.at(-1));
out.correction = (await memory.get()).facts.filter((f) => f.category === "correction").map((f) => [f.content, f.sourceError]);
for (const [id, said] of [["zh-fix", "不对，改用 make dev"], ["yes", "Yes, exactly! That's what I needed."], ["plain", "What is a good name for a cat?"]]) {
  await memory.observe(id, turn(said, "OK."));
  await memory.flush();
  out[id] = hints(prompts.at(-1));
}
await memory.close();
console.log("RESULT " + JSON.stringify(out));
`;

test(
  "from the packed tarball: hide_from_ui, the removal rules and the signal hints behave as DeerFlow HEAD's",
  { timeout: 240_000 },
  async () => {
    const project = freshProject();
    const r = await runChild(SNIPPET, { cwd: project });
    const line = r.stdout.split("\n").find((l) => l.startsWith("RESULT "));
    assert.ok(line, `the snippet failed:\n${r.stderr}\n${r.stdout}`);
    const out = JSON.parse(line.slice("RESULT ".length));
    assert.deepEqual(
      out.hidden,
      [
        { leaked: false, said: true },
        { leaked: false, said: true },
      ],
      "the hidden message is left out, the user's own words are sent",
    );
    assert.deepEqual(
      out.afterDuplicate,
      ["User likes Python", "Uses Neovim as the editor"],
      "the duplicate did not block the removal",
    );
    assert.ok(
      out.afterScoped.includes("Uses Neovim as the editor"),
      `a thread-scoped removal deleted a user fact: ${out.afterScoped}`,
    );
    assert.deepEqual(out.fix, { correction: true, confirmation: false });
    assert.deepEqual(out.correction, [["Starts the dev server with make dev", "npm start"]]);
    assert.deepEqual(out["zh-fix"], { correction: true, confirmation: false });
    assert.deepEqual(out.yes, { correction: false, confirmation: true });
    assert.deepEqual(out.plain, { correction: false, confirmation: false });
  },
);
