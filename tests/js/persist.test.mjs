// The `persist` option outside browsers: accepted and reported, nothing to ask (there is no
// browser storage), and a wrong type is INVALID_INPUT. The browser side (navigator.storage)
// is tested in every engine by tests/browser/storage.test.mjs.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory } from "../helpers/pipeline.mjs";

after(closeAll);

const llm = async () => JSON.stringify({ newFacts: [] });

test('persist: true with memory storage is reported in options() and status() as persistence "unknown"', async () => {
  const memory = await openMemory({ agent: freshAgent("persist"), storage: "memory", llm, persist: true });
  assert.equal(memory.options().persist, true);
  assert.equal(memory.options().persistence, "unknown");
  assert.equal(memory.status().persistence, "unknown");
  const plain = await openMemory({ agent: freshAgent("persist"), storage: "memory", llm });
  assert.equal(plain.options().persist, false, "off by default");
});

test("persist must be a boolean, and cannot change through configure()", async () => {
  for (const persist of ["yes", 1, {}]) {
    await assert.rejects(openMemory({ agent: freshAgent("persist"), storage: "memory", llm, persist }), {
      code: "INVALID_INPUT",
      message: /`persist` must be true or false/,
    });
  }
  const memory = await openMemory({ agent: freshAgent("persist"), storage: "memory", llm });
  assert.throws(() => memory.configure({ persist: true }), { code: "INVALID_INPUT", message: /chosen at open\(\)/ });
  assert.equal(memory.options().persist, false);
});
