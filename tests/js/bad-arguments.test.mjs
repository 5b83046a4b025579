// Bad arguments across the JS boundary are INVALID_INPUT errors (rejections for methods
// that return promises), never a crash of the wasm module or of the process, and never a
// silently changed value. Each case runs in the test process: a wasm trap here would fail
// every later test too.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { closeAll, freshAgent, openMemory } from "../helpers/pipeline.mjs";

after(closeAll);

const llm = async () => JSON.stringify({ newFacts: [] });
const open = () => openMemory({ agent: freshAgent("bad-args"), storage: "memory", llm });
const invalid = { name: "UserMemoryError", code: "INVALID_INPUT" };

test("a cyclic object as an option (an SDK client passed as `llm`) is INVALID_INPUT, and the module still works", async () => {
  class Client {
    constructor() {
      this.chat = { _client: this };
      this.baseUrl = "http://127.0.0.1:1/v1";
    }
  }
  await assert.rejects(UserMemory.open({ storage: "memory", llm: new Client() }), invalid);
  const cyclic = { a: {} };
  cyclic.a.self = cyclic;
  await assert.rejects(UserMemory.open({ storage: "memory", llm, extra: cyclic }), invalid);
  const memory = await open();
  assert.equal((await memory.addFact({ content: "Still works" })).content, "Still works");
  await memory.close();
});

test("values JSON has no form for (a symbol, a function, toJSON giving undefined) are INVALID_INPUT", async () => {
  await assert.rejects(UserMemory.open({ storage: "memory", llm, agent: Symbol("a") }), invalid);
  const memory = await open();
  await assert.rejects(
    memory.addFact(() => 1),
    invalid,
  );
  await assert.rejects(memory.addFact({ toJSON: () => undefined }), invalid);
  assert.throws(() => memory.configure(() => 1), invalid);
  await memory.close();
});

test("ids, section names and summaries of the wrong type reject with INVALID_INPUT; on() needs a function", async () => {
  const memory = await open();
  await assert.rejects(memory.removeFact(undefined), invalid);
  await assert.rejects(memory.updateFact(5, { content: "x" }), invalid);
  await assert.rejects(memory.updateSection(undefined, "x"), invalid);
  await assert.rejects(memory.updateSection("workContext", 42), invalid);
  assert.throws(() => memory.on("update", "not a function"), invalid);
  assert.throws(() => memory.on(5, () => {}), invalid);
  await memory.close();
});

test("a non-finite confidence is INVALID_INPUT, not silently replaced by a default", async () => {
  const memory = await open();
  for (const confidence of [NaN, Infinity, -Infinity]) {
    await assert.rejects(memory.addFact({ content: "Likes tea", confidence }), invalid, String(confidence));
  }
  const fact = await memory.addFact({ content: "Likes tea", confidence: 0.8 });
  await assert.rejects(memory.updateFact(fact.id, { confidence: NaN }), invalid);
  assert.equal((await memory.get()).facts[0].confidence, 0.8, "unchanged");
  await memory.close();
});
