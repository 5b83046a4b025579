// The `embed` option with a JS function embedder, through the built package: fact vectors
// filled in the background into their own storage slot, hybrid ranking in explain(),
// inject() and search(), and every failure (a throw, a hang past the timeout, a wrong
// answer) ranking lexically with an EMBED_FAILED event and no commit lost or blocked.
import { after } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { closeAll, freshAgent, openMemory, record, sleep, test } from "../helpers/pipeline.mjs";
import { storedVectorCount as storedVectors, toyEmbedder, toyVector, until } from "../helpers/toy-embedder.mjs";

after(closeAll);

const llm = async () => JSON.stringify({ newFacts: [] });
const invalid = { name: "UserMemoryError", code: "INVALID_INPUT" };
const ask = (text) => [{ role: "user", content: text }];

async function openWith(embed, extra = {}) {
  const agent = freshAgent("embed-fn");
  const memory = await openMemory({ agent, storage: "memory", llm, embed, ...extra });
  return { agent, memory };
}

test("facts are embedded in the background and a paraphrase outranks a confident non-match", async () => {
  const model = toyEmbedder();
  const { agent, memory } = await openWith(model.embed);
  const dog = await memory.addFact({ content: "Has a dog called Rex", confidence: 0.7 });
  await memory.addFact({ content: "Writes Go microservices", confidence: 0.95 });
  await memory.addFact({ content: "Prefers short answers", confidence: 0.95 });
  await until(async () => (await storedVectors(agent)) === 3);
  assert.ok(model.calls.every((c) => c.purpose === "facts" && c.signal instanceof AbortSignal));
  assert.equal(model.calls.flatMap((c) => c.texts).length, 3, "each content embedded once");

  const e = await memory.explain(ask("what should I feed my pet"));
  assert.equal(e.facts[0].id, dog.id);
  const f = e.facts[0];
  assert.deepEqual([f.lexical, f.dense, f.similarity], [0, 1, 0.5]);
  for (const x of e.facts) assert.ok(typeof x.dense === "number" && x.dense >= 0 && x.dense <= 1);
  assert.match(await memory.inject(ask("what should I feed my pet")), /Has a dog called Rex/);
  const hits = await memory.search("pet food");
  assert.equal(hits[0].fact.id, dog.id);
  assert.equal(hits[0].dense, 1);
  const queries = model.calls.filter((c) => c.purpose === "query").map((c) => c.texts);
  assert.deepEqual(
    queries,
    [["what should I feed my pet"], ["pet food"]],
    "explain + inject of one text embed it once",
  );
  // The document is still DeerFlow's memory.json; the vectors are in their own slot.
  const stored = await UserMemory.inspect({ agent, storage: "memory" });
  assert.ok(!stored.document.includes("vectors") && JSON.parse(stored.vectors).model === "function");
  assert.ok(!JSON.stringify(await memory.export()).includes("vectors"));
  await UserMemory.reset({ agent, storage: "memory" });
  assert.equal((await UserMemory.inspect({ agent, storage: "memory" })).vectors, null, "reset removes the vectors");
});

test("Float32Array, Float64Array and plain arrays are accepted; options() shows the settings", async () => {
  let kind = 0;
  const kinds = [(v) => Float32Array.from(v), (v) => Float64Array.from(v), (v) => [...v]];
  const embed = async (texts) => texts.map((t) => kinds[kind++ % 3](toyVector(t)));
  const { agent, memory } = await openWith({ function: embed, model: "toy-v1", batchSize: 1, queryTimeoutMs: 500 });
  for (const c of ["Has a dog", "Plays the cello", "Drinks tea"]) await memory.addFact({ content: c });
  await until(async () => (await storedVectors(agent)) === 3);
  assert.deepEqual(memory.options().embed, {
    baseUrl: null,
    model: "toy-v1",
    dimensions: null,
    batchSize: 1,
    timeoutMs: 60000,
    queryTimeoutMs: 500,
  });
  memory.configure({ embed: false });
  assert.equal(memory.options().embed, null);
  const e = await memory.explain(ask("my dog"));
  assert.ok(
    e.facts.every((f) => f.dense === null),
    "turned off: lexical",
  );
});

test("a throwing embedder is an EMBED_FAILED event, the commit stands, and inject() is lexical", async () => {
  let fail = true;
  const model = toyEmbedder();
  const embed = async (texts, opts) => {
    if (fail) throw new Error("model not loaded");
    return model.embed(texts, opts);
  };
  const { agent, memory } = await openWith(embed);
  const events = record(memory, ["error"]);
  const fact = await memory.addFact({ content: "Has a dog called Rex", confidence: 0.7 });
  await memory.addFact({ content: "Writes Go microservices", confidence: 0.95 });
  const err = await until(() => events.of("error")[0]);
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /model not loaded/);
  assert.equal(err.error.name, "UserMemoryError");
  assert.equal((await memory.get()).facts[0].id, fact.id, "the commit stands");
  assert.equal(await storedVectors(agent), 0);
  const lexical = await memory.inject(ask("what should I feed my pet"));
  assert.ok(lexical.indexOf("Writes Go") < lexical.indexOf("Has a dog"), "confidence order: lexical ranking");
  // Within the backoff it is not retried, however often inject() runs.
  fail = false;
  for (let i = 0; i < 5; i++) await memory.inject(ask("x"));
  // fixed wait: an absence check (no retry within the backoff): a slow machine can only make it pass
  await sleep(50);
  assert.equal(model.calls.length, 0, "no busy loop");
  assert.deepEqual(events.codes(), ["EMBED_FAILED"]);
});

test("a query embedding slower than queryTimeoutMs is aborted: lexical ranking and an event", async () => {
  const model = toyEmbedder();
  let signal;
  const embed = (texts, opts) => {
    if (opts.purpose === "facts") return model.embed(texts, opts);
    signal = opts.signal;
    return new Promise(() => {}); // never answers, ignores the signal
  };
  const { agent, memory } = await openWith({ function: embed, queryTimeoutMs: 150 });
  const events = record(memory, ["error"]);
  await memory.addFact({ content: "Has a dog called Rex", confidence: 0.7 });
  await memory.addFact({ content: "Writes Go microservices", confidence: 0.95 });
  await until(async () => (await storedVectors(agent)) === 2);
  const t0 = Date.now();
  const e = await memory.explain(ask("what should I feed my pet"));
  const took = Date.now() - t0;
  assert.ok(took >= 140 && took < 2_000, `waited ${took} ms`);
  assert.ok(e.facts.every((f) => f.dense === null));
  assert.equal(signal.aborted, true, "the function's signal was aborted");
  const err = events.of("error")[0];
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /150 ms \(embed\.queryTimeoutMs\)/);
  assert.match(err.message, /ranked lexically/);
  // Paused after the failure: the next inject() does not wait again.
  const t1 = Date.now();
  await memory.inject(ask("what should I feed my pet"));
  assert.ok(Date.now() - t1 < 100);
});

test("wrong counts, wrong dimensions and NaN from the function are refused with EMBED_FAILED", async () => {
  for (const [bad, why] of [
    [() => [[1, 2, 3]], /1 vectors for 2 texts/],
    [(texts) => texts.map((_, i) => (i ? [1, 2] : [1, 2, 3])), /of 3 and of 2 dimensions/],
    [(texts) => texts.map(() => [NaN, 1, 2]), /NaN/],
    [(texts) => texts.map(() => ["a", 1, 2]), /NaN/],
    [() => "nope", /must be an array of vectors/],
  ]) {
    const { agent, memory } = await openWith(async (texts) => bad(texts));
    const events = record(memory, ["error"]);
    // Both facts in one commit, so that they are embedded in one call.
    await memory.import({
      version: "1.0",
      user: {},
      history: {},
      facts: [{ content: "Has a dog called Rex" }, { content: "Plays the cello" }],
    });
    const err = await until(() => events.of("error")[0]);
    assert.equal(err.code, "EMBED_FAILED");
    assert.match(err.message, why);
    assert.equal(await storedVectors(agent), 0, "nothing half-stored");
    assert.equal((await memory.get()).facts.length, 2);
  }
});

test("embed options are validated at open() and configure(); bad ones change nothing", async () => {
  for (const [embed, name] of [
    [42, /embed/],
    ["http://x", /embed/],
    [{ function: 5 }, /embed\.function/],
    [{ function: async () => [], batchSize: 0 }, /embed\.batchSize/],
    [{ function: async () => [], baseUrl: "http://x" }, /embed\.baseUrl/],
    [{ baseUrl: "http://127.0.0.1:1/v1" }, /embed\.model/],
    [{ baseUrl: "ftp://x", model: "m" }, /embed\.baseUrl/],
    [{ baseUrl: "http://127.0.0.1:1/v1", model: "m", timeout: 5 }, /embed\.timeout/],
    [{ baseUrl: "http://127.0.0.1:1/v1", model: "m", queryTimeoutMs: NaN }, /queryTimeoutMs/],
  ]) {
    await assert.rejects(
      UserMemory.open({ storage: "memory", llm, embed }),
      { ...invalid, message: name },
      String(embed),
    );
  }
  const model = toyEmbedder();
  const { memory } = await openWith(model.embed);
  assert.throws(() => memory.configure({ embed: { function: 5 } }), invalid);
  assert.throws(() => memory.configure({ embed: model.embed, topFacts: -1 }), invalid);
  assert.equal(memory.options().embed.model, "function", "unchanged");
  memory.configure({ embed: null });
  assert.equal(memory.options().embed, null);
});

test("close() aborts a call in flight and the process can exit", async () => {
  let signal;
  const { memory } = await openWith(async (texts, opts) => {
    signal = opts.signal;
    return new Promise(() => {});
  });
  await memory.addFact({ content: "Has a dog called Rex" });
  await until(() => signal);
  await memory.close();
  assert.equal(signal.aborted, true);
});
