// `deadlineMs` bounds a whole LLM or embedder call, through the built package against a
// local server that drips: `timeoutMs` counts time without data, so a server that sends a
// byte (or an SSE `: keep-alive` comment) just often enough would keep flush() pending
// forever. With the deadline, flush() settles with LLM_TIMEOUT naming `deadlineMs` (given,
// or by default 5 × timeoutMs), and an embedder's retries stop at it.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { closeAll, freshAgent, openMemory, record, test, turn } from "../helpers/pipeline.mjs";
import { until } from "../helpers/toy-embedder.mjs";

/** A server whose every answer is a 200 that never ends: `piece` every `everyMs`. */
let server;
let baseUrl;
const requests = [];
const drip = { piece: ": keep-alive\n\n", everyMs: 100, type: "text/event-stream" };
before(async () => {
  server = createServer((req, res) => {
    req.resume();
    requests.push(req.url);
    res.writeHead(200, { "content-type": drip.type });
    const timer = setInterval(() => res.write(drip.piece), drip.everyMs);
    res.on("close", () => clearInterval(timer));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}/v1`;
});
after(async () => {
  await closeAll();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function flushWith(llm) {
  const memory = await openMemory({
    agent: freshAgent("deadline"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl, model: "m", maxRetries: 0, ...llm },
  });
  await memory.observe("t", turn("I live in Lisbon"));
  const error = await memory.flush().then(
    () => assert.fail("flush() resolved"),
    (e) => e,
  );
  return { memory, error };
}

test("SSE keep-alive comments forever: flush() settles at deadlineMs with LLM_TIMEOUT", async () => {
  Object.assign(drip, { piece: ": keep-alive\n\n", everyMs: 100 });
  const { memory, error } = await flushWith({ timeoutMs: 1000, deadlineMs: 1200 });
  assert.equal(error.code, "LLM_TIMEOUT");
  assert.match(
    error.message,
    /no complete answer from http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions within 1200 ms \(llm\.deadlineMs\)/,
  );
  assert.deepEqual((await memory.get()).facts, [], "nothing half-read is stored");
});

test("a byte at a time, no deadline given: the default, 5 × timeoutMs, ends the call", async () => {
  Object.assign(drip, { piece: " ", everyMs: 100 });
  // timeoutMs 10 × the drip: on a loaded machine a 300 ms idle timeout fired between two
  // bytes 100 ms apart, before the deadline could (measured with two CPU hogs beside the suite).
  const { error } = await flushWith({ timeoutMs: 1000 });
  assert.equal(error.code, "LLM_TIMEOUT");
  assert.match(error.message, /within 5000 ms \(llm\.deadlineMs\)/);
});

test("the embedder: a dripping batch endpoint stops being retried at deadlineMs", async () => {
  Object.assign(drip, { piece: " ", everyMs: 50, type: "application/json" });
  requests.length = 0;
  const memory = await openMemory({
    agent: freshAgent("deadline-embed"),
    storage: "memory",
    llm: async () => JSON.stringify({ newFacts: [] }),
    embed: { baseUrl, model: "e", timeoutMs: 400, maxRetries: 10, deadlineMs: 1000 },
  });
  const events = record(memory, ["error"]);
  await memory.addFact({ content: "Has a dog called Rex" });
  const error = await until(() => events.of("error")[0]);
  assert.equal(error.code, "EMBED_FAILED");
  // The second try (after 400 ms and a 500 ms wait) is cut by the deadline, or not made
  // when the first one ended late.
  assert.match(error.message, /within (400 ms \(embed\.timeoutMs\)|1000 ms \(embed\.deadlineMs\))/);
  // 10 retries would be 11 requests over a minute; the deadline leaves room for 2.
  assert.ok(requests.filter((u) => u.endsWith("/embeddings")).length <= 2, JSON.stringify(requests));
});
