// UserMemory on the D1 store inside workerd (miniflare's real D1): requests of one user that
// commit at the same time lose nothing, and users have memories of their own. The Worker is
// tests/servers/contract-worker.js (POST /memory adds a fact, GET /memory reads the document);
// a value over D1's size limit is STORAGE_QUOTA.
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
  "a value over D1's 2 MB limit is STORAGE_QUOTA, from the store and from UserMemory, and the previous document stays",
  { timeout: 120_000 },
  async () => {
    assert.deepEqual(await worker.call("/too-big"), {
      direct: "STORAGE_QUOTA",
      viaLibrary: "STORAGE_QUOTA",
      kept: ["Kept before the big import"],
    });
  },
);
