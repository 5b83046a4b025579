// The storage adapter contract: the same cases for every adapter (files, Postgres, Redis,
// SQLite, Durable Objects, D1). Plain JavaScript with no imports, so the same file runs in
// Node 20 (node:test), in child processes of other runtimes (Node 22/24 and Bun for SQLite)
// and inside workerd (the Cloudflare stores): see tests/servers/contract.test.mjs.
//
// A backend is `{ fresh() }`: fresh() makes an empty namespace (a table, a key prefix, a file,
// a folder, a Durable Object) and resolves to `{ client(), close() }`, where each client() is
// one more adapter on that namespace with its own connection, as another process would have.
//
//   for (const c of CASES) test(c.name, () => runCase(backend, c));
//   const results = await runContract(backend);   // [{ name, ok, message }]

/** A failed check. */
class ContractError extends Error {}

const show = (v) =>
  typeof v === "string" && v.length > 60 ? `${JSON.stringify(v.slice(0, 40))}… (${v.length} chars)` : JSON.stringify(v);

function equal(actual, expected, what) {
  if (actual !== expected) throw new ContractError(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

function sameKeys(actual, expected, what) {
  if (!Array.isArray(actual)) throw new ContractError(`${what}: keys() returned ${show(actual)}, not an array`);
  const a = JSON.stringify([...actual].sort());
  const e = JSON.stringify([...expected].sort());
  if (a !== e) throw new ContractError(`${what}: expected ${e}, got ${a}`);
}

/** Runs `n` CAS increment loops on "counter", one per client, all at once; returns conflicts seen. */
async function incrementLoops(clients, rounds) {
  let conflicts = 0;
  await Promise.all(
    clients.map(async (s) => {
      for (let i = 0; i < rounds; i++) {
        for (;;) {
          const cur = await s.get("counter");
          if (await s.compareAndSet("counter", cur, String(Number(cur) + 1))) break;
          conflicts++;
        }
      }
    }),
  );
  return conflicts;
}

/** A value of about 1.1 MB in UTF-8 with one-, three- and four-byte characters and line breaks. */
function bigValue(seed) {
  return `${seed}\n` + "0123456789abcdef".repeat(40_000) + "记忆".repeat(50_000) + "🐝\n".repeat(50_000) + seed;
}

/** The cases: `{ name, run(ns) }` where `ns` is what a backend's fresh() resolved to. */
export const CASES = [
  {
    name: "get of a missing key is null; set then get returns the value; set replaces it",
    async run(ns) {
      const s = await ns.client();
      equal(await s.get("missing"), null, "get(missing)");
      await s.set("k", "one");
      equal(await s.get("k"), "one", "after set");
      await s.set("k", "two");
      equal(await s.get("k"), "two", "after a second set");
      const other = await ns.client();
      equal(await other.get("k"), "two", "another client reads it");
    },
  },
  {
    name: "delete removes a key and is idempotent; a deleted key reads as null and is gone from keys()",
    async run(ns) {
      const s = await ns.client();
      await s.set("gone", "x");
      await s.set("kept", "y");
      await s.delete("gone");
      await s.delete("gone");
      await s.delete("never-there");
      equal(await s.get("gone"), null, "get after delete");
      equal(await s.get("kept"), "y", "the other key");
      sameKeys(await s.keys(""), ["kept"], "keys after delete");
    },
  },
  {
    name: "an empty string is a value, distinct from absent",
    async run(ns) {
      const s = await ns.client();
      await s.set("e", "");
      equal(await s.get("e"), "", "get of an empty value");
      equal(await s.compareAndSet("e", null, "x"), false, "compareAndSet(null) over an empty value");
      equal(await s.compareAndSet("e", "", "x"), true, "compareAndSet('') over an empty value");
      equal(await s.get("e"), "x", "after compareAndSet");
    },
  },
  {
    name: "keys(prefix) lists exactly the keys with that prefix, also when it holds SQL or glob metacharacters",
    async run(ns) {
      const s = await ns.client();
      const keys = [
        "a/1",
        "a/2",
        "a%",
        "a%b",
        "a_b",
        "ab",
        "a*",
        "a?",
        "a[x]",
        "a\\z",
        "A/1",
        "b/1",
        "user-memory/x/doc/v1-00000001",
      ];
      for (const k of keys) await s.set(k, `v ${k}`);
      sameKeys(await s.keys(""), keys, 'keys("")');
      sameKeys(
        await s.keys("a"),
        keys.filter((k) => k.startsWith("a")),
        'keys("a")',
      );
      sameKeys(await s.keys("a/"), ["a/1", "a/2"], 'keys("a/")');
      sameKeys(await s.keys("a%"), ["a%", "a%b"], 'keys("a%")');
      sameKeys(await s.keys("a_"), ["a_b"], 'keys("a_")');
      sameKeys(await s.keys("a*"), ["a*"], 'keys("a*")');
      sameKeys(await s.keys("a?"), ["a?"], 'keys("a?")');
      sameKeys(await s.keys("a["), ["a[x]"], 'keys("a[")');
      sameKeys(await s.keys("a\\"), ["a\\z"], 'keys("a\\\\")');
      sameKeys(await s.keys("user-memory/x/doc/v"), ["user-memory/x/doc/v1-00000001"], "a library prefix");
      sameKeys(await s.keys("zzz"), [], 'keys("zzz")');
      sameKeys(await s.keys("a/1/"), [], "a key is not its own prefix's child");
    },
  },
  {
    name: "compareAndSet with expected null writes only when the key is absent",
    async run(ns) {
      const s = await ns.client();
      equal(await s.compareAndSet("p", null, "1"), true, "absent → written");
      equal(await s.get("p"), "1", "value");
      equal(await s.compareAndSet("p", null, "2"), false, "present is not absent");
      equal(await s.get("p"), "1", "unchanged");
      await s.delete("p");
      equal(await s.compareAndSet("p", null, "3"), true, "absent again after delete");
      equal(await s.get("p"), "3", "value after re-create");
    },
  },
  {
    name: "compareAndSet writes only over exactly the expected value",
    async run(ns) {
      const s = await ns.client();
      equal(await s.compareAndSet("q", "x", "1"), false, "absent is not 'x'");
      equal(await s.get("q"), null, "nothing was created");
      await s.set("q", "12");
      for (const wrong of ["1", "12 ", "123", " 12", "１２"])
        equal(await s.compareAndSet("q", wrong, "no"), false, `expected ${JSON.stringify(wrong)}`);
      equal(await s.get("q"), "12", "unchanged by the wrong expectations");
      equal(await s.compareAndSet("q", "12", "13"), true, "the exact value");
      equal(await s.compareAndSet("q", "12", "14"), false, "the old value no longer matches");
      equal(await s.get("q"), "13", "final value");
    },
  },
  {
    name: "concurrent compareAndSet from many clients over one value: exactly one wins",
    async run(ns) {
      const clients = await Promise.all(Array.from({ length: 8 }, () => ns.client()));
      await clients[0].set("race", "base");
      const won = await Promise.all(clients.map((c, i) => c.compareAndSet("race", "base", `client ${i}`)));
      equal(won.filter(Boolean).length, 1, `winners over "base" (${JSON.stringify(won)})`);
      equal(await clients[1].get("race"), `client ${won.indexOf(true)}`, "the winner's value");
      const created = await Promise.all(clients.map((c, i) => c.compareAndSet("fresh", null, `client ${i}`)));
      equal(created.filter(Boolean).length, 1, `winners over absent (${JSON.stringify(created)})`);
      equal(await clients[2].get("fresh"), `client ${created.indexOf(true)}`, "the creator's value");
    },
  },
  {
    name: "concurrent increment loops of several clients lose no update",
    async run(ns) {
      const clients = await Promise.all(Array.from({ length: 4 }, () => ns.client()));
      await clients[0].set("counter", "0");
      await incrementLoops(clients, 10);
      equal(await clients[3].get("counter"), "40", "4 clients × 10 increments");
    },
  },
  {
    name: "big values (1.1 MB, multi-byte) round-trip exactly and compare exactly",
    async run(ns) {
      const s = await ns.client();
      const a = bigValue("a");
      const b = bigValue("b");
      await s.set("big", a);
      equal(await s.get("big"), a, "get of a big value");
      equal(await s.compareAndSet("big", bigValue("c"), "no"), false, "a big value differing only at both ends");
      equal(await s.compareAndSet("big", a, b), true, "compareAndSet over a big value");
      equal(await (await ns.client()).get("big"), b, "another client reads the new big value");
    },
  },
  {
    name: "unicode keys and values round-trip; keys differing only in case are distinct",
    async run(ns) {
      const s = await ns.client();
      const pairs = [
        ["研究/記憶", "値 ✓"],
        ["emoji 🐝 key", "🐝🐝"],
        ["Key", "upper"],
        ["key", "lower"],
        ["ключ", "значение"],
        ["with space and: colon", "quotes \" ' and \\ backslash"],
        ["x".repeat(300), "a long key"],
        ["json", '{"rev":7,"key":"user-memory/a/doc/v7-1a2b3c4d"}'],
        ["number-like", "0012"],
        ["lines", "one\ntwo\r\nthree\u2028four"],
      ];
      for (const [k, v] of pairs) await s.set(k, v);
      for (const [k, v] of pairs) equal(await s.get(k), v, `get(${show(k)})`);
      sameKeys(
        await s.keys(""),
        pairs.map(([k]) => k),
        'keys("")',
      );
      sameKeys(await s.keys("研"), ["研究/記憶"], 'keys("研")');
      sameKeys(await s.keys("emoji 🐝"), ["emoji 🐝 key"], 'keys("emoji 🐝")');
      equal(await s.compareAndSet("ключ", "значение", "новое"), true, "compareAndSet on a Cyrillic key");
      equal(await s.get("ключ"), "новое", "after compareAndSet");
    },
  },
];

/** Runs one case on a fresh namespace of `backend`, closing it afterwards. */
export async function runCase(backend, c) {
  const ns = await backend.fresh();
  try {
    await c.run(ns);
  } finally {
    await ns.close();
  }
}

/** Runs every case (or those named in `only`); never throws: `[{ name, ok, message }]`. */
export async function runContract(backend, only) {
  const results = [];
  for (const c of CASES) {
    if (only && !only.includes(c.name)) continue;
    try {
      await runCase(backend, c);
      results.push({ name: c.name, ok: true });
    } catch (e) {
      results.push({
        name: c.name,
        ok: false,
        message: e instanceof ContractError ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e} ${e?.stack ?? ""}`,
      });
    }
  }
  return results;
}
