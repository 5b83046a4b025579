// Signal hints through the built package: an explicit correction or confirmation in the
// user's new messages adds its one-line hint to the extraction prompt (English and
// Chinese), the model's correction is stored with its sourceError, and a conversation
// without one is sent without a hint.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

const CORRECTION = /^Hint: the user corrects something in the new messages/m;
const REINFORCEMENT = /^Hint: the user confirms something in the new messages/m;

/** Memory whose extraction LLM records the prompts it is sent and answers `reply`. */
async function open(reply = { newFacts: [] }) {
  const prompts = [];
  const memory = await openMemory({
    agent: freshAgent("signals"),
    storage: "memory",
    debounceMs: 60_000,
    llm: async ({ prompt }) => (prompts.push(prompt), JSON.stringify(reply)),
  });
  return { memory, prompts };
}

const turn = (user, assistant) => [
  { role: "user", content: user },
  { role: "assistant", content: assistant },
];

test("a correction adds the correction hint, and the corrected fact keeps its sourceError", async () => {
  const fact = {
    content: "Starts the dev server with make dev",
    category: "correction",
    confidence: 0.95,
    sourceError: "npm start",
  };
  const { memory, prompts } = await open({ newFacts: [fact] });
  const said = [
    ...turn("How do I start the dev server?", "Run npm start."),
    ...turn("That's wrong, use make dev instead.", "Right: make dev."),
  ];
  assert.equal(await memory.observe("en", said), true);
  await memory.flush();
  assert.match(prompts[0], CORRECTION);
  assert.doesNotMatch(prompts[0], REINFORCEMENT);
  const stored = (await memory.get()).facts;
  assert.deepEqual(
    stored.map((f) => [f.content, f.category, f.sourceError]),
    [["Starts the dev server with make dev", "correction", "npm start"]],
  );
});

test("Chinese: 不对，改用 … is a correction and 对，就是这样 a confirmation", async () => {
  const { memory, prompts } = await open();
  await memory.observe("zh-fix", turn("不对，改用 make dev", "好的，改用 make dev。"));
  await memory.observe("zh-yes", turn("对，就是这样", "好的，记住了。"));
  await memory.flush();
  assert.equal(prompts.length, 2);
  const [fix, yes] = [prompts.find((p) => p.includes("改用")), prompts.find((p) => p.includes("就是这样"))];
  assert.match(fix, CORRECTION);
  assert.doesNotMatch(fix, REINFORCEMENT);
  assert.match(yes, REINFORCEMENT);
  assert.doesNotMatch(yes, CORRECTION);
});

test("a confirmation adds the reinforcement hint; a plain conversation and a question get none", async () => {
  const { memory, prompts } = await open();
  await memory.observe("yes", turn("Yes, exactly! That's what I needed.", "Glad it helped."));
  await memory.observe("plain", turn("I'd like to redo my kitchen. Is that wrong?", "Not at all."));
  await memory.flush();
  const [yes, plain] = [prompts.find((p) => p.includes("exactly")), prompts.find((p) => p.includes("kitchen"))];
  assert.match(yes, REINFORCEMENT);
  assert.doesNotMatch(plain, /^Hint:/m);
  assert.match(plain, /<\/conversation>\n\nAnswer with the JSON delta only\.$/);
});
