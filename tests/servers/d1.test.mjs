// UserMemory on the D1 store inside workerd (miniflare's real D1): requests of one user that
// commit at the same time lose nothing, and users have memories of their own. The Worker is
// tests/servers/contract-worker.js (POST /memory adds a fact, GET /memory reads the document);
// a value over D1's 2 MB limit is split into rows of one batch (tests/servers/contract-worker.js
// GET /d1-limits).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startWorkerd } from "./workerd.mjs";

let worker;
before(async () => (worker = await startWorkerd()));
after(async () => worker?.dispose());

test(
  "twelve concurrent requests of one user each adding a fact through UserMemory keep all twelve",
  { timeout: 120_000 },
  async () => {
    const added = await Promise.all(
      Array.from({ length: 12 }, (_, i) => worker.call("/memory?user=alice", { add: `Fact number ${i}` })),
    );
    for (const r of added) assert.ok(!r.error, JSON.stringify(r.error));
    const doc = await worker.call("/memory?user=alice");
    assert.deepEqual(
      doc.facts.map((f) => f.content).sort(),
      Array.from({ length: 12 }, (_, i) => `Fact number ${i}`).sort(),
      "no lost update",
    );
    assert.deepEqual((await worker.call("/memory?user=bob")).facts, [], "another user's memory is separate");
  },
);

test(
  "values over D1's 2 MB limit are split into rows of one batch and read back checked; 10 000 facts fit, plain and encrypted",
  { timeout: 300_000 },
  async () => {
    const r = await worker.call("/d1-limits");
    assert.deepEqual(r.ascii, { same: true, rows: 3, keys: ["a"] }, "3 MB of ASCII: a header and two rows");
    assert.deepEqual(r.utf8, { same: true, rows: 3 }, "2.7 MB of UTF-8 (accents, CJK, surrogate pairs)");
    assert.equal(r.casStale, false, "compareAndSet against another big value");
    assert.equal(r.casBig, true, "compareAndSet over a split value");
    assert.deepEqual(r.afterCas, { same: true, rows: 3 });
    assert.equal(r.casSmall, true);
    assert.deepEqual(r.afterSmall, { value: "small", rows: 1 }, "no part left after shrinking");
    assert.equal(r.tooBig, "STORAGE_QUOTA", "over 16 rows");
    assert.equal(r.keptAfterTooBig, "small", "the refused value changed nothing");
    assert.deepEqual(r.afterDelete, { value: null, rows: 0 });
    assert.equal(r.altered, "CORRUPT_MEMORY", "an altered part is never returned");
    assert.equal(r.plain10k, 10_000, "10 000 + 1 - 1 facts, plain");
    assert.equal(r.encrypted10k, 10_000, "10 000 + 1 - 1 facts, encrypted");
    assert.ok(r.largestRowBytes <= 2_000_000, `largest row ${r.largestRowBytes} bytes`);
    console.log(`largest D1 row: ${r.largestRowBytes} bytes`);
  },
);
