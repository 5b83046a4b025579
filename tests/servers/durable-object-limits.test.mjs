// Durable Object values at and over the 128 KiB per-value limit of the key-value backend, in
// workerd (miniflare). Local workerd does not enforce the limit, so the object's storage is
// wrapped with production's checks (tests/helpers/do-limits.mjs, whose size model is checked
// here against node:v8): the adapter's split into parts of one atomic put, its checked
// read-back, the storage contract and encrypted memory with history all run on it.
import { serialize } from "node:v8";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { CASES } from "../helpers/store-contract.mjs";
import { ENCRYPTED_CASE } from "../helpers/encrypted-roundtrip.mjs";
import { LIMIT_CASES } from "../helpers/do-limit-cases.mjs";
import { serializedSize } from "../helpers/do-limits.mjs";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { startWorkerd } from "./workerd.mjs";

test("the size model of the limit check is an upper bound of V8's serializer, at most 1 byte over", () => {
  const samples = [
    "",
    "a",
    "x".repeat(127),
    "x".repeat(128),
    "x".repeat(16_384),
    "x".repeat(130_000),
    "é".repeat(70_000),
  ];
  samples.push("€".repeat(63), "€".repeat(64), "€".repeat(65_000), "🐝".repeat(40_000), "a研".repeat(1000));
  for (const s of samples) {
    const real = serialize(s).length;
    const model = serializedSize(s);
    assert.ok(model >= real && model <= real + 1, `${s.length} code units: model ${model}, V8 ${real}`);
  }
});

let worker, llm;
before(async () => {
  llm = await startLlmServer({ fallback: () => factsReply("Keeps bees") });
  worker = await startWorkerd();
});
after(async () => {
  await worker?.dispose();
  await llm?.close();
});

describe("value-size cases on a key-value-backed Durable Object with production's limits", () => {
  for (const c of LIMIT_CASES) {
    test(c.name, { timeout: 120_000 }, async () => {
      const [r] = await worker.call(`/limits?case=${encodeURIComponent(c.name)}`);
      assert.ok(r?.ok, r?.message ?? "no result");
      if (r.data) console.log(JSON.stringify(r.data));
    });
  }
});

describe("the storage contract on a key-value-backed Durable Object with production's limits", () => {
  for (const c of CASES) {
    test(c.name, { timeout: 60_000 }, async () => {
      const r = await worker.call(`/contract?backend=do-kv&case=${encodeURIComponent(c.name)}`);
      assert.equal(r.length, 1, JSON.stringify(r));
      assert.ok(r[0].ok, r[0].message);
    });
  }
  test(ENCRYPTED_CASE, { timeout: 120_000 }, async () => {
    const r = await worker.call(`/encrypted?backend=do-kv&llm=${encodeURIComponent(llm.baseUrl)}`);
    assert.equal(r.length, 1, JSON.stringify(r));
    assert.ok(r[0].ok, r[0].message);
  });
});
