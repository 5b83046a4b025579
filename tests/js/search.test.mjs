// search(query, { limit, minScore }) through the built package: the facts matching any text,
// ranked as inject() ranks them, with their numbers; bad arguments are INVALID_INPUT.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

const llm = async () => JSON.stringify({ newFacts: [] });
const invalid = { name: "UserMemoryError", code: "INVALID_INPUT" };

async function memoryWith(contents) {
  const memory = await openMemory({ agent: freshAgent("search"), storage: "memory", llm });
  const facts = [];
  for (const [content, confidence] of contents) facts.push(await memory.addFact({ content, confidence }));
  return { memory, facts };
}

test("search returns the matching facts, best first, with the scores inject() ranks by", async () => {
  const { memory, facts } = await memoryWith([
    ["Lives in Chengdu", 1.0],
    ["Has a lop-eared rabbit called 汤圆", 0.95],
    ["后端用Redis做缓存", 0.8],
    ["Feeds the rabbit hay every morning", 0.7],
  ]);
  const hits = await memory.search("what should my rabbit eat?");
  assert.deepEqual(
    hits.map((h) => h.fact.id).sort(),
    [facts[1].id, facts[3].id].sort(),
    "only the two rabbit facts match; the confident city fact is not a match",
  );
  for (const h of hits) {
    assert.deepEqual(Object.keys(h), ["fact", "lexical", "dense", "similarity", "score", "date"]);
    assert.equal(h.dense, null, "no embedding model");
    assert.equal(h.similarity, h.lexical);
    assert.ok(h.similarity > 0 && h.similarity <= 1);
    assert.ok(Math.abs(h.score - (0.6 * h.similarity + 0.4 * h.fact.confidence)) < 1e-5, JSON.stringify(h));
  }
  assert.ok(hits[0].score >= hits[1].score);
  assert.equal(hits[0].fact.content, hits[0].fact.content.trim());
  // The same ranking as explain() for the same text.
  const e = await memory.explain([{ role: "user", content: "what should my rabbit eat?" }]);
  assert.deepEqual(
    e.facts.filter((f) => f.similarity > 0).map((f) => f.id),
    hits.map((h) => h.fact.id),
  );
  // Chinese queries match Chinese facts, also glued to Latin text.
  assert.deepEqual(
    (await memory.search("缓存用什么")).map((h) => h.fact.id),
    [facts[2].id],
  );
  await memory.close();
});

test("limit and minScore cut the results; a removed fact is no longer found", async () => {
  const { memory, facts } = await memoryWith([
    ["Plays chess on Sundays", 0.9],
    ["Reads chess books", 0.8],
    ["Teaches chess to kids", 0.7],
  ]);
  assert.equal((await memory.search("chess")).length, 3);
  assert.equal((await memory.search("chess", { limit: 2 })).length, 2);
  const all = await memory.search("chess", {});
  const high = await memory.search("chess", { minScore: all[1].score });
  assert.deepEqual(
    high.map((h) => h.fact.id),
    all.slice(0, 2).map((h) => h.fact.id),
  );
  await memory.removeFact(facts[0].id);
  assert.ok(!(await memory.search("chess")).some((h) => h.fact.id === facts[0].id));
  assert.deepEqual(await memory.search("   "), [], "a blank query matches nothing");
  await memory.close();
});

test("bad queries and options reject with INVALID_INPUT naming the problem", async () => {
  const { memory } = await memoryWith([["Plays chess", 0.9]]);
  await assert.rejects(memory.search(42), invalid);
  await assert.rejects(memory.search(undefined), invalid);
  await assert.rejects(memory.search("chess", { limit: 0 }), { ...invalid, message: /limit/ });
  await assert.rejects(memory.search("chess", { limit: 1.5 }), { ...invalid, message: /limit/ });
  await assert.rejects(memory.search("chess", { minScore: NaN }), { ...invalid, message: /minScore/ });
  await assert.rejects(memory.search("chess", { top: 3 }), { ...invalid, message: /top/ });
  await assert.rejects(memory.search("chess", "3"), invalid);
  assert.equal((await memory.search("chess", null)).length, 1, "null options are the defaults");
  await memory.close();
});
