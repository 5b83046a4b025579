// History, revert/undo and forget tombstones through the built package, on real files
// (fileStore) and the scripted OpenAI-compatible server: the entries are in the stored
// record, survive a reopen, a revert restores the document exactly, a forgotten fact is not
// learned again, and bad arguments are INVALID_INPUT.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileStore } from "user-memory/node";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, scratchDir, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();
const scratch = () => scratchDir("um-history-");

async function open(dir, agent, options = {}) {
  const memory = await openMemory({
    agent,
    storage: fileStore(dir),
    autoProcess: false,
    llm: { baseUrl: llm.baseUrl, apiKey: "sk-h", model: "m", maxRetries: 0 },
    ...options,
  });
  return { memory, events: record(memory, ["update", "processed", "error"]) };
}

/** Every stored file's text, concatenated. */
function rawFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(readFileSync(join(d, e.name), "utf8"));
    }
  };
  walk(dir);
  return out.join("\n");
}

const without = (doc) => ({ ...doc, lastUpdated: "" });

test("history lists each commit newest first, is stored with the document and survives a reopen", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("hist");
  const { memory } = await open(dir, agent);
  const f = await memory.addFact({ content: "Writes Go", category: "knowledge" });
  await memory.updateFact(f.id, { confidence: 0.5 });
  await memory.updateSection("workContext", "Backend engineer");
  llm.script.push(factsReply("Learns Rust"));
  await memory.observe("t1", turn("I am learning Rust these days", "Nice"));
  await memory.flush();
  const entries = await memory.history();
  assert.deepEqual(
    entries.map((e) => e.reason),
    ["extraction", "updateSection", "updateFact", "addFact"],
  );
  assert.equal(entries[0].threadId, "t1");
  assert.equal(entries[0].added[0].content, "Learns Rust");
  assert.equal(entries[2].changed[0].before.confidence, 0.9, "the old value is kept");
  assert.equal(entries[1].sections[0].after.summary, "Backend engineer");
  assert.deepEqual(
    (await memory.history({ limit: 1, before: entries[1].revision })).map((e) => e.reason),
    ["updateFact"],
  );
  assert.match(rawFiles(dir), /"history":\{/, "the history is in the stored record");
  await memory.close();
  const again = await open(dir, agent);
  assert.deepEqual(await again.memory.history(), entries);
  await again.memory.close();
});

test("revert restores summaries and facts exactly (ids, timestamps, unknown fields) and undo undoes it", async () => {
  llm.reset();
  const { memory, events } = await open(scratch(), freshAgent("revert"));
  await memory.import({
    version: "1.0",
    custom: { keep: [1, 2.5] },
    user: { workContext: { summary: "Designer", updatedAt: "2025-01-01T00:00:00.000Z", note: "x" } },
    history: {},
    facts: [
      {
        id: "fact_00000001",
        content: "Uses Figma",
        category: "preference",
        confidence: 0.8,
        createdAt: "2025-01-02T00:00:00.000Z",
        source: "manual",
        mood: { deep: true },
      },
      {
        id: "fact_00000002",
        content: "Lives in Porto",
        category: "context",
        confidence: 0.9,
        createdAt: "2025-01-03T00:00:00.000Z",
        source: "t0",
      },
    ],
  });
  const imported = await memory.get();
  const at = (await memory.history({ limit: 1 }))[0].revision;
  await memory.removeFact("fact_00000001");
  await memory.updateFact("fact_00000002", { content: "Lives in Lisbon" });
  await memory.updateSection("workContext", "");
  await memory.addFact({ content: "Has a cat" });
  const changed = await memory.get();
  const back = await memory.revert(at);
  assert.deepEqual(without(back), without(imported));
  assert.deepEqual(without(await memory.get()), without(imported));
  assert.equal(events.of("update").at(-1).reason, "revert");
  const newest = (await memory.history({ limit: 1 }))[0];
  assert.equal(newest.reason, "revert");
  assert.equal(newest.revertedTo, at);
  assert.deepEqual(without(await memory.undo()), without(changed), "the revert is itself revertible");
  await assert.rejects(memory.revert(at + 999), { code: "NOT_FOUND" }, "a revision that never was");
  // undo({ revision }) names the change: a repeat is a no-op, an overtaken one is refused.
  const undone = (await memory.history({ limit: 1 }))[0].revision - 1;
  assert.equal((await memory.undo({ revision: undone })).facts.length, changed.facts.length, "already undone: no-op");
  assert.equal((await memory.history({ limit: 1 }))[0].reason, "revert");
  await memory.addFact({ content: "Has a dog" });
  await assert.rejects(memory.undo({ revision: undone + 1 }), { code: "CONFLICT" });
  await assert.rejects(memory.undo({ revision: 1e6 }), { code: "NOT_FOUND" });
  await assert.rejects(memory.undo({ revision: "3" }), { code: "INVALID_INPUT" });
  await assert.rejects(memory.undo({ rev: 3 }), { code: "INVALID_INPUT" });
  for (const bad of ["3", -1, 1.5, null])
    await assert.rejects(memory.revert(bad), { code: "INVALID_INPUT" }, String(bad));
  await assert.rejects(memory.history({ limit: "all" }), { code: "INVALID_INPUT" });
  await assert.rejects(memory.history({ nope: 1 }), { code: "INVALID_INPUT" });
  await memory.close();
});

test("a forgotten fact is not learned again, clear() keeps the tombstone, unforget() drops it", async () => {
  llm.reset();
  const dir = scratch();
  const { memory, events } = await open(dir, freshAgent("forget"));
  const f = await memory.addFact({ content: "Allergic to penicillin" });
  await memory.removeFact(f.id, { forget: true });
  assert.deepEqual(
    (await memory.forgotten()).map((t) => [t.id, t.content]),
    [[f.id, "allergic to penicillin"]],
  );
  llm.script.push(factsReply("The user is allergic to penicillin"));
  await memory.observe("t1", turn("As I said, I'm allergic to penicillin", "Noted"));
  await memory.flush();
  assert.equal((await memory.get()).facts.length, 0, "not stored again");
  const skipped = events.of("processed").at(-1).skipped[0];
  assert.equal(skipped.reason, "forgotten");
  assert.equal(skipped.factId, f.id);
  await memory.clear();
  assert.equal((await memory.forgotten()).length, 1, "clear() keeps what the user asked to forget");
  assert.equal((await memory.unforget(f.id)).id, f.id);
  await assert.rejects(memory.unforget(f.id), { code: "NOT_FOUND" });
  await memory.removeFact((await memory.addFact({ content: "Plays chess" })).id, { forget: true });
  await memory.clear({ tombstones: true });
  assert.deepEqual(await memory.forgotten(), []);
  await assert.rejects(memory.removeFact("x", { forget: "yes" }), { code: "INVALID_INPUT" });
  await assert.rejects(memory.clear({ tombstone: true }), { code: "INVALID_INPUT" }, "a misspelt option is refused");
  await memory.close();
});

test("historyLimit bounds the entries and 0 keeps none", async () => {
  llm.reset();
  const dir = scratch();
  const { memory } = await open(dir, freshAgent("limit"), { historyLimit: 2 });
  for (const c of ["a", "b", "c"]) await memory.addFact({ content: `fact ${c}` });
  assert.deepEqual(
    (await memory.history()).map((e) => e.added[0].content),
    ["fact c", "fact b"],
  );
  assert.equal(memory.options().historyLimit, 2);
  await memory.close();
  const off = await open(scratch(), freshAgent("off"), { historyLimit: 0 });
  await off.memory.addFact({ content: "x" });
  assert.deepEqual(await off.memory.history(), []);
  await assert.rejects(off.memory.undo(), { code: "NOT_FOUND" });
  await off.memory.close();
  await assert.rejects(open(scratch(), freshAgent("bad"), { historyLimit: -1 }), { code: "INVALID_INPUT" });
});
