// Deletions on a full store: removeFact() and clear() succeed when the store's quota refuses
// a record as large as the old one plus the deletion's history entry (the key swap writes
// the new record beside the old). They are written without the oldest history entries (down
// to none) and a `debug` event HISTORY_DROPPED says so; other edits still reject with
// STORAGE_QUOTA and change nothing. Through the built package, with a storage adapter that
// enforces a byte quota the way a real one fails (an error with code STORAGE_QUOTA), plain
// and encrypted.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, record, test } from "../helpers/pipeline.mjs";

after(closeAll);

/** A Map adapter refusing writes that would take it over `quota` bytes (key + value lengths). */
function quotaAdapter() {
  const map = new Map();
  const used = () => [...map].reduce((n, [k, v]) => n + k.length + v.length, 0);
  const state = { map, quota: Infinity, used };
  state.adapter = {
    name: "quota-kv",
    get: async (k) => map.get(k) ?? null,
    set: async (k, v) => {
      if (used() - (map.has(k) ? k.length + map.get(k).length : 0) + k.length + v.length > state.quota)
        throw Object.assign(new Error(`quota-kv is full (${state.quota} bytes)`), { code: "STORAGE_QUOTA" });
      map.set(k, v);
    },
    delete: async (k) => void map.delete(k),
    keys: async (p) => [...map.keys()].filter((k) => k.startsWith(p)),
  };
  return state;
}

/** The length of the stored document record (the value the doc pointer names). */
function recordLength(s, agent) {
  const pointer = JSON.parse(s.map.get(`user-memory/${agent}/doc`));
  return s.map.get(pointer.key).length;
}

for (const encrypted of [false, true]) {
  const label = encrypted ? "encrypted memory" : "plain memory";
  test(`${label}: removeFact() and clear() on a full store succeed without the oldest history, and say so`, async () => {
    const s = quotaAdapter();
    const agent = freshAgent("full");
    const memory = await openMemory({
      agent,
      storage: s.adapter,
      autoProcess: false,
      llm: async () => "{}",
      ...(encrypted ? { encryption: { passphrase: "full store passphrase" } } : {}),
    });
    const ids = [];
    for (let i = 0; i < 40; i++)
      ids.push((await memory.addFact({ content: `Fact ${i}: a long project with many details, tools and people` })).id);
    // Room for half a record more: a commit keeping the history does not fit.
    s.quota = s.used() + Math.floor(recordLength(s, agent) / 2);
    const events = record(memory, ["update", "debug", "error"]);

    await assert.rejects(memory.addFact({ content: "One more" }), { code: "STORAGE_QUOTA" });
    assert.equal((await memory.get()).facts.length, 40, "the refused addition changed nothing");

    const removed = await memory.removeFact(ids[5], { forget: true });
    assert.equal(removed.id, ids[5]);
    const dropped = events.of("debug").filter((e) => e.code === "HISTORY_DROPPED");
    assert.equal(dropped.length, 1, JSON.stringify(events.events));
    assert.equal(dropped[0].reason, "storage-full");
    assert.match(dropped[0].message, /quota-kv is full|is full: removeFact\(\)/);
    const history = await memory.history();
    assert.ok(history.length < 41 && history.length > 0, `${history.length} entries kept`);
    assert.equal(history[0].reason, "removeFact", "the deletion's own entry is the newest kept");
    assert.equal((await memory.forgotten()).length, 1, "the tombstone was stored with it");

    await memory.clear();
    assert.equal((await memory.get()).facts.length, 0);
    await memory.close();

    // Reopened: the deletions are what is stored.
    const again = await openMemory({
      agent,
      storage: s.adapter,
      autoProcess: false,
      llm: async () => "{}",
      ...(encrypted ? { encryption: { passphrase: "full store passphrase" } } : {}),
    });
    assert.equal((await again.get()).facts.length, 0);
    assert.equal((await again.forgotten()).length, 1);
    await again.close();
  });
}
