// close() on storage that never answers (an adapter whose promises never settle: a dead
// network connection, a bug) gives up after `closeTimeoutMs` and says which store; it used
// to wait forever, and a process exiting on close() hung with it.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, record, test, turn } from "../helpers/pipeline.mjs";

after(closeAll);

/** A Map adapter that stops answering (its promises stay pending) once `silent` is set. */
function silencing() {
  const map = new Map();
  const state = { silent: false, map };
  const answer =
    (f) =>
    (...args) =>
      state.silent ? new Promise(() => {}) : Promise.resolve(f(...args));
  state.adapter = {
    name: "silent-kv",
    get: answer((k) => map.get(k) ?? null),
    set: answer((k, v) => void map.set(k, v)),
    delete: answer((k) => void map.delete(k)),
    keys: answer((p) => [...map.keys()].filter((k) => k.startsWith(p))),
  };
  return state;
}

test("close() on a storage adapter that stops answering rejects after closeTimeoutMs, naming it; the stored queue stays as it was", async () => {
  const s = silencing();
  const memory = await openMemory({
    agent: freshAgent("close"),
    storage: s.adapter,
    autoProcess: false,
    closeTimeoutMs: 300,
    llm: async () => "{}",
  });
  assert.equal(memory.options().closeTimeoutMs, 300);
  const events = record(memory, ["error"]);
  assert.equal(await memory.observe("t1", turn("I keep bees")), true);
  const stored = new Map(s.map);
  s.silent = true;
  memory.observe("t2", turn("I keep goats")); // its write never completes
  const started = Date.now();
  await assert.rejects(
    memory.close(),
    (e) =>
      e.code === "STORAGE_UNAVAILABLE" &&
      /storage adapter silent-kv did not answer/.test(e.message) &&
      /300 ms/.test(e.message),
  );
  console.log(`# close() gave up after ${Date.now() - started} ms`);
  assert.deepEqual(events.codes(), ["STORAGE_UNAVAILABLE"], "also an error event");
  await assert.rejects(memory.close(), { code: "STORAGE_UNAVAILABLE" }, "a second close() gives up the same way");
  assert.deepEqual(s.map, stored, "nothing more was written");
});

test("closeTimeoutMs defaults to 10 s and must be a positive whole number", async () => {
  const memory = await openMemory({ agent: freshAgent("close"), storage: "memory", llm: async () => "{}" });
  assert.equal(memory.options().closeTimeoutMs, 10_000);
  for (const bad of [0, -1, 1.5, "10"])
    assert.throws(() => memory.configure({ closeTimeoutMs: bad }), { code: "INVALID_INPUT" }, String(bad));
  memory.configure({ closeTimeoutMs: 2_000 });
  assert.equal(memory.options().closeTimeoutMs, 2_000);
});
