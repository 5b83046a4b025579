// memoryPool({ open, max }) from `user-memory/node`, with real instances: the least recently
// used idle instance is closed beyond `max`, one in use never is, what an evicted instance
// had queued is found by the next open of its key, a failed open is not kept, close() ends all.
import assert from "node:assert/strict";
import { after } from "node:test";
import { initSync, UserMemory } from "user-memory";
import { memoryPool } from "user-memory/node";
import { eventually, freshAgent, test, turn } from "../helpers/pipeline.mjs";

const pools = [];
after(() => Promise.all(pools.map((p) => p.close())));

/** A pool over one private storage whose open() and close() calls are recorded. */
function recordedPool(max, { fail = () => false, writeMs = 0 } = {}) {
  const map = new Map();
  // fixed wait: slow storage writes (the scenario), not a wait of the test
  const later = (fn) => (writeMs ? new Promise((r) => setTimeout(r, writeMs)).then(fn) : fn());
  const storage = {
    get: (k) => map.get(k) ?? null,
    set: (k, v) => later(() => void map.set(k, v)),
    delete: (k) => later(() => void map.delete(k)),
  };
  const prefix = freshAgent("pool");
  const log = [];
  const pool = memoryPool({
    max,
    open: async (user) => {
      log.push(`open ${user}`);
      if (fail(user)) throw Object.assign(new Error(`cannot open ${user}`), { code: "STORAGE_UNAVAILABLE" });
      const memory = await UserMemory.open({
        agent: `${prefix}-${user}`,
        storage,
        autoProcess: false,
        llm: async () => '{"newFacts":[]}',
      });
      const close = memory.close.bind(memory);
      memory.close = () => (log.push(`close ${user}`), close());
      return memory;
    },
  });
  pools.push(pool);
  return { pool, log };
}

test("beyond max the least recently used instance is closed; using a key again reopens it", async () => {
  const { pool, log } = recordedPool(2);
  await pool.use("ann", (m) => m.addFact({ content: "Ann keeps bees" }));
  await pool.use("bob", () => {});
  await pool.use("ann", () => {}); // ann is now the most recently used
  await pool.use("cat", () => {});
  assert.equal(pool.size, 2);
  await pool.use("bob", () => {});
  const facts = await pool.use("ann", async (m) => (await m.get()).facts.map((f) => f.content));
  assert.deepEqual(facts, ["Ann keeps bees"], "ann's memory survived its instance being closed (storage keeps it)");
  assert.deepEqual(log, [
    "open ann",
    "open bob",
    "open cat",
    "close bob",
    "open bob",
    "close ann",
    "open ann",
    "close cat",
  ]);
});

test("an instance in use is never closed to make room (the pool goes over max meanwhile); once released it can be", async () => {
  const { pool, log } = recordedPool(1);
  const held = await pool.acquire("ann");
  await pool.use("bob", () => {});
  await pool.use("cat", () => {});
  assert.ok(!log.includes("close ann"), log.join(", "));
  await held.memory.addFact({ content: "still open" }); // would throw CLOSED if it had been closed
  assert.deepEqual(
    log.filter((l) => l.startsWith("close")),
    ["close bob", "close cat"],
    "the idle ones went",
  );
  held.release();
  held.release(); // twice is harmless
  await pool.use("dan", () => {});
  await eventually(() => log.includes("close ann"), "ann's instance to be closed");
  assert.equal(pool.size, 1);
});

test("what an evicted instance had queued is there for the next open of its key (the reopen waits for the close)", async () => {
  // Writes take 50 ms, so the evicted instance's close() is still writing the queue when
  // the key is used again at once.
  const { pool } = recordedPool(1, { writeMs: 50 });
  await pool.use("ann", () => {});
  await pool.use("ann", (m) => void m.observe("t1", turn("I keep bees", "Sweet"))); // not awaited: the close must write it
  const bob = pool.use("bob", () => {}); // evicts ann
  const pending = await pool.use("ann", (m) => m.status().pending);
  await bob;
  assert.deepEqual(pending, ["t1"]);
});

test("a failed open is not kept: the next use of the key tries again", async () => {
  let failures = 1;
  const { pool, log } = recordedPool(5, { fail: () => failures-- > 0 });
  await assert.rejects(
    pool.use("ann", () => {}),
    { code: "STORAGE_UNAVAILABLE" },
  );
  assert.equal(pool.size, 0);
  assert.equal(await pool.use("ann", () => "ok"), "ok");
  assert.deepEqual(log, ["open ann", "open ann"]);
});

test("concurrent uses of one key share one instance; close() closes all and refuses new uses", async () => {
  const { pool, log } = recordedPool(5);
  const [a, b] = await Promise.all([pool.use("ann", (m) => m), pool.use("ann", (m) => m)]);
  assert.equal(a, b);
  await pool.use("bob", () => {});
  await pool.close();
  assert.deepEqual(log.filter((l) => l.startsWith("close")).sort(), ["close ann", "close bob"]);
  await assert.rejects(pool.acquire("ann"), { code: "CLOSED" });
  assert.throws(() => memoryPool({ max: 0, open: () => null }), { code: "INVALID_INPUT", message: /max/ });
  assert.throws(() => memoryPool({}), { code: "INVALID_INPUT", message: /open/ });
  await assert.rejects(memoryPool({ open: () => null }).acquire(""), { code: "INVALID_INPUT" });
});

test("evicted instances are freed, so cycling many users through a small pool reuses the wasm heap", async () => {
  const { pool } = recordedPool(5);
  const section = { summary: "", updatedAt: "" };
  const doc = (u) => ({
    version: "1.0",
    lastUpdated: "",
    user: { workContext: section, personalContext: section, topOfMind: section },
    history: { recentMonths: section, earlierContext: section, longTermBackground: section },
    facts: Array.from({ length: 50 }, (_, i) => ({
      content: `Fact ${i} of user ${u}: likes tea, chess and long walks on weekends`,
      confidence: 0.8,
    })),
  });
  const heap = () => initSync().memory.buffer.byteLength;
  const cycle = async (from, to) => {
    for (let u = from; u < to; u++) await pool.use(`user-${u}`, (m) => m.import(doc(u)));
  };
  await cycle(0, 20); // warm-up: the heap grows to what 5 open instances and churn need
  const before = heap();
  await cycle(20, 120);
  const grown = heap() - before;
  // 100 more users of ~38 KB each would need ~3.7 MB if evicted instances kept their heap.
  assert.ok(
    grown < 1024 * 1024,
    `the wasm heap grew by ${(grown / 1024).toFixed(0)} KB for 100 more users through a pool of 5`,
  );
});
