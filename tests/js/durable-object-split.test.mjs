// The Durable Object store's split, property-tested in Node on a Map with Durable Object
// storage's shape and production's limits (tests/helpers/do-limits.mjs): 400 random values
// around every part boundary (Latin-1, UTF-16, surrogate pairs and lone surrogates, cut at
// random places) round-trip exactly, every stored value stays within 128 KiB, and keys()
// never shows a part. The same store in workerd: tests/servers/durable-object-limits.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { durableObjectStore } from "user-memory/workers";
import { limitedStorage, VALUE_LIMIT } from "../helpers/do-limits.mjs";

/** A Map with the get/put/delete/list/transaction shapes of Durable Object storage. */
function mapStorage() {
  const map = new Map();
  const one = (k) => (map.has(k) ? structuredClone(map.get(k)) : undefined);
  const storage = {
    map,
    async get(keys) {
      if (!Array.isArray(keys)) return one(keys);
      return new Map(keys.filter((k) => map.has(k)).map((k) => [k, one(k)]));
    },
    async put(keyOrEntries, value) {
      const entries = typeof keyOrEntries === "string" ? { [keyOrEntries]: value } : keyOrEntries;
      for (const [k, v] of Object.entries(entries)) map.set(k, structuredClone(v));
    },
    async delete(keys) {
      if (!Array.isArray(keys)) return map.delete(keys);
      return keys.filter((k) => map.delete(k)).length;
    },
    async list({ prefix = "" } = {}) {
      return new Map([...map].filter(([k]) => k.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : 1)));
    },
    transaction: (closure) => closure(storage),
  };
  return storage;
}

/** A seeded pseudo-random generator (xorshift32). */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const ALPHABETS = [
  "abcdefghij0123456789",
  "é\u00ff\u0080x",
  "ключ研究",
  "a🐝b",
  "\ud800x\udfff\udbff\udc00", // lone surrogates and a pair
];
const BOUNDARIES = [65_000, 130_000, 195_000, 260_000];

test("400 random values around the part boundaries round-trip exactly, each stored value within 128 KiB", async () => {
  const random = rng(20261202);
  const stats = { largest: 0, mostKeys: 0, puts: 0 };
  const raw = mapStorage();
  const store = durableObjectStore(limitedStorage(raw, stats));
  for (let i = 0; i < 400; i++) {
    const around = BOUNDARIES[Math.floor(random() * BOUNDARIES.length)];
    const length = Math.max(0, around + Math.floor(random() * 9) - 4);
    // Mixed runs: a value that is Latin-1 in one part and UTF-16 in the next.
    let value = "";
    while (value.length < length) {
      const alphabet = ALPHABETS[Math.floor(random() * ALPHABETS.length)];
      const run = 1 + Math.floor(random() * 40_000);
      for (let j = 0; j < run && value.length < length; j++) value += alphabet[j % alphabet.length];
    }
    const key = `k${i % 7}`;
    await store.set(key, value);
    assert.equal(await store.get(key), value, `value ${i} (${value.length} code units)`);
    assert.deepEqual(await store.keys(key), [key], `keys() of value ${i}`);
    if (i % 3 === 0) assert.equal(await store.compareAndSet(key, value, "small"), true);
  }
  assert.ok(stats.largest <= VALUE_LIMIT, `largest stored value ${stats.largest} bytes`);
  assert.ok(stats.mostKeys >= 4, "some values were split into several parts");
  // Only the seven keys and their current parts are left.
  for (let k = 0; k < 7; k++) await store.delete(`k${k}`);
  assert.deepEqual([...raw.map.keys()], [], "delete left parts behind");
});
