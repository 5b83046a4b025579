// Dates in the <memory> block through the built package: each fact line shows its
// happenedAt as written, else the day of its createdAt; `injectDates: false` turns them off;
// explain() and search() return the dates.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

const llm = async () => JSON.stringify({ newFacts: [] });

async function datedMemory(options = {}) {
  const memory = await openMemory({ agent: freshAgent("dates"), storage: "memory", llm, ...options });
  await memory.import({
    version: "1.0",
    lastUpdated: "",
    user: {},
    history: {},
    facts: [
      {
        id: "fact_0000000a",
        content: "Ran the Berlin marathon",
        category: "context",
        confidence: 0.9,
        createdAt: "2026-01-05T10:00:00Z",
        source: "t1",
        happenedAt: "2025-09-28T09:00:00+02:00",
      },
      {
        id: "fact_0000000b",
        content: "Trains for marathons with a running club",
        category: "behavior",
        confidence: 0.8,
        createdAt: "2026-01-05T10:00:00Z",
        source: "t1",
      },
      {
        id: "fact_0000000c",
        content: "Wants to run a marathon in Tokyo",
        category: "goal",
        confidence: 0.7,
        createdAt: "2026-01-05T10:00:00Z",
        source: "t1",
        happenedAt: "not a date",
      },
    ],
  });
  return memory;
}

// Sorted: the ranking is not what these tests are about.
const factLines = (block) =>
  block
    .split("\n")
    .filter((l) => l.startsWith("- ["))
    .sort();
const ask = [{ role: "user", content: "When did I run the marathon?" }];

test("each fact line shows its event day as written, else the day it was learned", async () => {
  const memory = await datedMemory();
  assert.equal(memory.options().injectDates, true, "on by default");
  assert.deepEqual(factLines(await memory.inject(ask)), [
    "- [behavior | 0.80 | 2026-01-05] Trains for marathons with a running club",
    "- [context | 0.90 | 2025-09-28] Ran the Berlin marathon",
    "- [goal | 0.70 | 2026-01-05] Wants to run a marathon in Tokyo",
  ]);
  memory.configure({ injectDates: false });
  assert.deepEqual(factLines(await memory.inject(ask)), [
    "- [behavior | 0.80] Trains for marathons with a running club",
    "- [context | 0.90] Ran the Berlin marathon",
    "- [goal | 0.70] Wants to run a marathon in Tokyo",
  ]);
  await assert.rejects(async () => memory.configure({ injectDates: "no" }), { code: "INVALID_INPUT" });
});

test("explain() and search() return the dates", async () => {
  const memory = await datedMemory({ injectDates: false });
  const e = await memory.explain(ask);
  const byId = Object.fromEntries(e.facts.map((f) => [f.id, f]));
  assert.deepEqual(
    [byId.fact_0000000a.date, byId.fact_0000000a.happenedAt, byId.fact_0000000a.createdAt],
    ["2025-09-28", "2025-09-28T09:00:00+02:00", "2026-01-05T10:00:00Z"],
  );
  assert.deepEqual(
    [byId.fact_0000000c.date, byId.fact_0000000c.happenedAt],
    ["2026-01-05", null],
    "a malformed event time counts as absent",
  );
  const hits = await memory.search("Berlin marathon");
  assert.equal(hits[0].fact.id, "fact_0000000a");
  assert.equal(hits[0].date, "2025-09-28");
  assert.equal(hits[0].fact.happenedAt, "2025-09-28T09:00:00+02:00");
});
