// The Durable Object value-size cases, run inside workerd on a key-value-backed object whose
// storage has production's limits (tests/helpers/do-limits.mjs): the adapter splits a value
// over the limit into parts written in one atomic put, reads them back checked, and encrypted
// memory with history stays within the limit. Plain JavaScript; the worker passes in what it
// needs. `runLimitCases(...)` → [{ name, ok, message, data }]; see
// tests/servers/durable-object-limits.test.mjs.
import { limitedStorage, serializedSize, VALUE_LIMIT } from "./do-limits.mjs";

function check(ok, what) {
  if (!ok) throw new Error(what);
}
const PART = "\u0000part:";

/** Resolves to the code (or name) `promise` rejects with; throws if it resolves. */
async function failure(promise, what) {
  try {
    await promise;
  } catch (e) {
    return { code: e.code ?? e.name, message: e.message };
  }
  throw new Error(`${what} succeeded`);
}

/** A value of `n` code units cycling through `alphabet` (so parts differ). */
const text = (n, alphabet) => {
  let out = "";
  while (out.length < n) out += alphabet;
  return out.slice(0, n);
};

export const LIMIT_CASES = [
  {
    name: "the limited storage refuses what production refuses (a 131 200-byte value, 129 keys), accepts 130 000 bytes",
    async run({ raw }) {
      const big = await failure(raw.put("k", "x".repeat(131_200)), "a 131 200-byte put");
      check(big.code === "RangeError" && /128|131072/.test(big.message), `over the limit: ${JSON.stringify(big)}`);
      const many = Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`k${i}`, "v"]));
      check((await failure(raw.put(many), "a 129-key put")).code === "RangeError", "129 keys");
      await raw.put("k", "x".repeat(130_000));
      check((await raw.get("k")).length === 130_000, "130 000 bytes stored");
    },
  },
  {
    name: "values at and over the limit round-trip exactly: ASCII, UTF-16 and surrogate pairs across part boundaries, up to 16 MB",
    async run({ store, raw }) {
      const cases = [
        ["ascii at the split", text(130_000, "abcdefghij"), 0],
        ["ascii one over", text(130_001, "abcdefghij"), 2],
        ["utf-16 at the split", text(65_000, "ключ"), 0],
        ["utf-16 one over", text(65_001, "ключ"), 2],
        ["emoji across boundaries", text(200_001, "a🐝b研"), 4],
        ["1.1 MB base64-like", text(1_100_000, "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="), 9],
        ["16 MB ASCII", text(127 * 130_000, "0123456789"), 127],
      ];
      for (const [what, value, parts] of cases) {
        await store.set(what, value);
        check((await store.get(what)) === value, `${what}: read back differs`);
        const keys = [...(await raw.list({ prefix: what })).keys()];
        check(keys.length === 1 + parts, `${what}: ${keys.length} stored keys, expected ${1 + parts}`);
        check(JSON.stringify(await store.keys(what)) === JSON.stringify([what]), `${what}: keys() shows a part`);
        await store.delete(what);
        check((await raw.list({ prefix: what })).size === 0, `${what}: delete left keys behind`);
      }
    },
  },
  {
    name: "overwrites with fewer parts and deletes leave no part behind; compareAndSet compares the whole split value",
    async run({ store, raw }) {
      const a = text(600_000, "a1"),
        b = text(300_000, "b2"),
        c = text(300_000, "c3");
      await store.set("v", a);
      await store.set("v", b);
      check((await raw.list({ prefix: "v" })).size === 4, "three parts and the header after the smaller overwrite");
      check((await store.compareAndSet("v", a, c)) === false, "compareAndSet against a stale big value");
      check((await store.get("v")) === b, "a refused compareAndSet changed the value");
      check((await store.compareAndSet("v", b, c)) === true, "compareAndSet against the current big value");
      check((await store.get("v")) === c, "after compareAndSet");
      check((await store.compareAndSet("v", c, "small")) === true, "compareAndSet to a small value");
      check((await raw.list({ prefix: "v" })).size === 1, "parts left after shrinking to one value");
      check((await store.compareAndSet("w", null, a)) === true, "compareAndSet of a big value over absent");
      check((await store.get("w")) === a, "big value written by compareAndSet");
    },
  },
  {
    name: "a value over 127 parts is STORAGE_QUOTA naming the limit, and the old value stays",
    async run({ store, raw }) {
      await store.set("q", "kept");
      const f = await failure(store.set("q", text(127 * 130_000 + 1, "z")), "a 127-part+1 value");
      check(f.code === "STORAGE_QUOTA" && /127/.test(f.message), `error: ${JSON.stringify(f)}`);
      check((await store.get("q")) === "kept", "the old value was lost");
      check((await raw.list({ prefix: "q" })).size === 1, "parts were written");
    },
  },
  {
    name: "a missing or altered part is CORRUPT_MEMORY, never a wrong value",
    async run({ store, raw }) {
      await store.set("m", text(400_000, "mn"));
      await raw.delete(`m${PART}1`);
      const missing = await failure(store.get("m"), "reading with a part missing");
      check(missing.code === "CORRUPT_MEMORY", `missing: ${JSON.stringify(missing)}`);
      await store.set("m", text(400_000, "mn"));
      await raw.put(`m${PART}2`, text(130_000, "nm"));
      const altered = await failure(store.get("m"), "reading with an altered part");
      check(altered.code === "CORRUPT_MEMORY", `altered: ${JSON.stringify(altered)}`);
    },
  },
  {
    name: "encrypted memory with 300 facts and the default history: every stored value within 128 KiB, all read back",
    async run({ store, raw, stats, UserMemory }) {
      const open = () =>
        UserMemory.open({
          agent: "big",
          storage: store,
          autoProcess: false,
          maxFacts: 10_000,
          encryption: { passphrase: "a passphrase for the limits test" },
          llm: async () => "{}",
        });
      let memory = await open();
      const facts = Array.from({ length: 300 }, (_, i) => ({
        id: `f${i}`,
        content: `Fact ${i}: the user mentioned project ${i * 7} and a preference for tool ${i % 13}`,
        category: "context",
        confidence: 0.9,
      }));
      const doc = await memory.export();
      await memory.import({ ...doc, facts });
      for (let i = 0; i < 20; i++) await memory.addFact({ content: `Added fact ${i} with some more words in it` });
      for (let i = 0; i < 20; i++) await memory.removeFact(`f${i}`);
      await memory.undo();
      const before = JSON.stringify(await memory.get());
      await memory.close();
      memory = await open();
      const after = await memory.get();
      const got = after.facts.length;
      const history = (await memory.history()).length;
      await memory.close();
      check(got === 301, `${got} facts after reopening, expected 300 + 20 - 20 + 1 undone`);
      check(JSON.stringify(after) === before, "the reopened document differs");
      let longest = 0;
      const rawKeys = [...(await raw.list()).keys()];
      for (const k of rawKeys) if (!k.includes(PART)) longest = Math.max(longest, (await store.get(k))?.length ?? 0);
      check(stats.largest <= VALUE_LIMIT, `a stored value of ${stats.largest} bytes`);
      check(longest > VALUE_LIMIT, `the longest value is ${longest} characters: the test did not pass the limit`);
      return {
        facts: got,
        history,
        longestValueChars: longest,
        largestStoredBytes: stats.largest,
        mostKeysInOnePut: stats.mostKeys,
        storedKeys: rawKeys.length,
      };
    },
  },
  {
    name: "10 000 facts, plain and encrypted, on a key-value-backed object: every value within 128 KiB, all read back",
    async run({ store, raw, stats, UserMemory }) {
      const out = {};
      for (const encrypted of [false, true]) {
        const open = () =>
          UserMemory.open({
            agent: encrypted ? "ten-thousand-encrypted" : "ten-thousand",
            storage: store,
            autoProcess: false,
            maxFacts: 20_000,
            llm: async () => "{}",
            ...(encrypted ? { encryption: { passphrase: "ten thousand facts" } } : {}),
          });
        let memory = await open();
        const doc = await memory.export();
        doc.facts = Array.from({ length: 10_000 }, (_, i) => ({
          id: `f${i}`,
          content: `Fact ${i}: the user mentioned project ${i * 7} and a preference for tool ${i % 13}`,
          category: "context",
          confidence: 0.9,
        }));
        await memory.import(doc);
        await memory.addFact({ content: "One more after ten thousand" });
        await memory.removeFact("f1");
        await memory.close();
        memory = await open();
        const facts = (await memory.get()).facts.length;
        await memory.close();
        check(facts === 10_000, `${facts} facts after reopening (${encrypted ? "encrypted" : "plain"})`);
        const doc2 = [
          ...(
            await raw.list({ prefix: `user-memory/${encrypted ? "ten-thousand-encrypted" : "ten-thousand"}/doc/v` })
          ).keys(),
        ];
        out[encrypted ? "encryptedDocKeys" : "plainDocKeys"] = doc2.length;
      }
      check(stats.largest <= VALUE_LIMIT, `a stored value of ${stats.largest} bytes`);
      return { ...out, largestStoredBytes: stats.largest, mostKeysInOnePut: stats.mostKeys };
    },
  },
];

/** Runs the cases (or the one named `only`) on fresh storage each; never throws. */
export async function runLimitCases({ storage, durableObjectStore, UserMemory, only }) {
  const results = [];
  for (const c of LIMIT_CASES) {
    if (only && c.name !== only) continue;
    await storage.deleteAll();
    const stats = { largest: 0, mostKeys: 0, puts: 0 };
    const raw = limitedStorage(storage, stats);
    const store = durableObjectStore(raw);
    try {
      const data = await c.run({ store, raw, stats, UserMemory });
      results.push({ name: c.name, ok: true, data });
    } catch (e) {
      results.push({ name: c.name, ok: false, message: e.stack ?? String(e) });
    }
  }
  await storage.deleteAll();
  return results;
}

export { serializedSize };
