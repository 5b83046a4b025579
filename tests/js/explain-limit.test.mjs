// explain(messages, { limit }) through the built package: by default it reports the facts in
// the block and the next best 20, not every fact; `limit` sets that number, `Infinity` reports
// every fact; a limit that is not a whole number ≥ 1 is INVALID_INPUT. The facts kept are the
// best scored, in the order of the full report.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

const TOPICS = ["tea", "coffee", "hiking", "chess", "rust", "piano", "cycling", "sushi", "jazz", "yoga"];

async function bigMemory() {
  const memory = await openMemory({
    agent: freshAgent("explain-limit"),
    storage: "memory",
    llm: async () => JSON.stringify({ newFacts: [] }),
  });
  const facts = [];
  for (let i = 0; i < 200; i++)
    facts.push({
      id: `fact_${String(i).padStart(8, "0")}`,
      content: `Likes ${TOPICS[i % TOPICS.length]} number ${i}`,
      category: "preference",
      confidence: 0.7 + (i % 3) / 10,
      createdAt: "2026-01-05T10:00:00Z",
      source: "t1",
    });
  await memory.import({ version: "1.0", lastUpdated: "", user: {}, history: {}, facts });
  return memory;
}

const turn = [{ role: "user", content: "any tea or coffee ideas?" }];

test("explain() reports the block's facts and the next 20 by default, every fact with limit: Infinity", async () => {
  const memory = await bigMemory();
  const all = await memory.explain(turn, { limit: Infinity });
  assert.equal(all.facts.length, 200, "Infinity: every fact");
  const included = all.facts.filter((f) => f.included);
  // 40 facts match clearly (tea, coffee): the block takes topFacts + extraFacts of them.
  assert.equal(included.length, 30, `the default block holds at most 15 + 15: ${included.length}`);

  const dflt = await memory.explain(turn);
  assert.equal(dflt.block, all.block, "the same block either way");
  assert.deepEqual(
    dflt.facts.map((f) => f.id),
    all.facts.filter((f, i) => f.included || i < 35).map((f) => f.id),
    "the block's facts plus the first 15 + 20 by score, in the full report's order",
  );
  assert.ok(dflt.facts.length < 60, `far from every fact: ${dflt.facts.length}`);

  const three = await memory.explain(turn, { limit: 3 });
  assert.deepEqual(
    three.facts.map((f) => f.id),
    all.facts.filter((f, i) => f.included || i < 3).map((f) => f.id),
  );
  for (const f of included)
    assert.ok(
      three.facts.some((x) => x.id === f.id),
      "an injected fact is always reported",
    );
});

test("explain() refuses a limit that is not a whole number ≥ 1", async () => {
  const memory = await bigMemory();
  for (const limit of [0, -1, 2.5, Number.NaN, "10"])
    await assert.rejects(memory.explain(turn, { limit }), { code: "INVALID_INPUT" }, String(limit));
  await assert.rejects(memory.explain(turn, 5), { code: "INVALID_INPUT" });
  assert.equal((await memory.explain(turn, {})).facts.length, (await memory.explain(turn)).facts.length);
});
