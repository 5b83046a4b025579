// The HTTP rules of the fetch transport, through the built package against local scripted
// servers: no redirect to another origin (the other host receives nothing: no key, no
// header, no conversation), same-origin 307/308 followed, bodies read only up to
// llm.maxResponseBytes (also gzip bombs and huge error pages, with the wasm heap measured),
// and a refused response_format dropped once and remembered.
import assert from "node:assert/strict";
import { after, before } from "node:test";
import { initSync } from "user-memory";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { eventually, freshAgent, openMemory, record, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const KEY = "sk-test-redirect-0123456789";
const HEADER_KEY = "azure-header-key-0123456789";
const llm = useLlmServer();
/** The other origin a redirect points to: it must never hear from us. */
let other;
before(async () => (other = await startLlmServer({ fallback: () => factsReply("Planted by the other host") })));
after(async () => other?.close());

/** The wasm module's memory (initSync hands back the exports once initialised). */
const wasmMemory = () => initSync().memory;

async function open(llmOptions = {}) {
  llm.reset();
  other.requests.length = 0;
  const memory = await openMemory({
    agent: freshAgent("http"),
    storage: "memory",
    debounceMs: 600_000,
    llm: {
      baseUrl: llm.baseUrl,
      apiKey: KEY,
      headers: { "api-key": HEADER_KEY },
      model: "m",
      maxRetries: 2,
      ...llmOptions,
    },
  });
  return { memory, events: record(memory) };
}

for (const [status, provider] of [
  [307, "openai"],
  [302, "openai"],
  [307, "anthropic"],
  [302, "anthropic"],
]) {
  test(`${provider}: a ${status} to another origin fails with LLM_HTTP ${status} saying why, is not retried, and the other host receives nothing`, async () => {
    const { memory, events } = await open({ provider });
    const path = provider === "anthropic" ? "/v1/messages" : "/v1/chat/completions";
    llm.script.push({ status, headers: { location: `${other.origin}${path}` } });
    memory.observe("t", turn("I live in Lisbon and my key is in the config", "Noted."));
    await assert.rejects(memory.flush(), (e) => {
      assert.equal(e.code, "LLM_HTTP");
      assert.equal(e.status, status);
      assert.match(e.message, new RegExp(`another origin \\(${other.origin.replace(/\./g, "\\.")}\\)`));
      assert.match(e.message, /llm\.baseUrl/);
      assert.ok(!e.message.includes(KEY) && !e.message.includes(HEADER_KEY));
      return true;
    });
    assert.equal(llm.requests.length, 1, "a refused redirect is final: no retry");
    assert.equal(other.requests.length, 0, "the other origin received no request at all");
    assert.deepEqual((await memory.get()).facts, [], "nothing the other host could say was applied");
    assert.deepEqual(events.codes(), ["LLM_HTTP"]);
    assert.deepEqual(memory.status().pending, ["t"], "the entry stays queued");
    await memory.close();
  });
}

test("a redirect to the same host on another port is another origin too", async () => {
  const { memory } = await open();
  llm.script.push({ status: 308, headers: { location: `http://localhost:${other.port}/v1/chat/completions` } });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_HTTP" && e.status === 308 && /another origin/.test(e.message),
  );
  assert.equal(other.requests.length, 0);
  await memory.close();
});

test("a same-origin 307 (a trailing-slash redirect) is followed with the same method, headers and body", async () => {
  const { memory } = await open();
  llm.script.push({ status: 307, headers: { location: "/v1/chat/completions/" } }, factsReply("Lives in Lisbon"));
  memory.observe("t", turn("I live in Lisbon", "Nice."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  assert.equal(llm.requests.length, 2);
  const [first, second] = llm.requests;
  assert.equal(second.url, "/v1/chat/completions/");
  assert.equal(second.method, "POST");
  assert.equal(second.headers.authorization, `Bearer ${KEY}`);
  assert.equal(second.headers["api-key"], HEADER_KEY);
  assert.equal(second.raw, first.raw, "the same body");
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Lives in Lisbon"],
  );
  await memory.close();
});

test("a same-origin 302/303 is refused (it would turn the POST into a GET), and so is a fourth redirect in a row", async () => {
  for (const status of [302, 303]) {
    const { memory } = await open();
    llm.script.push({ status, headers: { location: "/v1/elsewhere" } });
    memory.observe("t", turn("hello", "hi"));
    await assert.rejects(
      memory.flush(),
      (e) => e.code === "LLM_HTTP" && e.status === status && /POST into a GET/.test(e.message),
    );
    assert.equal(llm.requests.length, 1);
    await memory.close();
  }
  const { memory } = await open();
  for (let i = 0; i < 4; i++) llm.script.push({ status: 307, headers: { location: `/v1/hop${i}` } });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && /4th redirect/.test(e.message));
  assert.equal(llm.requests.length, 4, "three hops followed, the fourth refused");
  await memory.close();
});

/** Runs one extraction against `step` and returns [the rejection, the wasm heap growth in bytes]. */
async function heapGrowth(step, llmOptions = {}) {
  const { memory } = await open({ maxRetries: 0, ...llmOptions });
  llm.script.push(step);
  memory.observe("t", turn("hello", "hi"));
  const before = wasmMemory().buffer.byteLength;
  const error = await memory.flush().then(
    () => null,
    (e) => e,
  );
  const growth = wasmMemory().buffer.byteLength - before;
  await memory.close();
  return [error, growth];
}

const MB = 1024 * 1024;

test("a 50 MB reply is refused at llm.maxResponseBytes (4 MiB) and the wasm heap grows by far less than the body", async () => {
  // (stream: false: answered as one JSON body, although the request asks for a stream.)
  const [error, growth] = await heapGrowth({ content: "a".repeat(50 * MB), stream: false });
  assert.equal(error?.code, "LLM_BAD_OUTPUT");
  assert.match(error.message, /llm\.maxResponseBytes \(4194304 bytes\)/);
  assert.ok(
    growth < 4 * MB,
    `wasm heap grew by ${(growth / MB).toFixed(1)} MB (the issue measured 250 MB before the cap)`,
  );
});

test("a streamed 50 MB reply stops at the cap too, and the server sees the client leave", async () => {
  const [error, growth] = await heapGrowth({ content: "", pieces: Array.from({ length: 50 }, () => "a".repeat(MB)) });
  assert.equal(error?.code, "LLM_BAD_OUTPUT");
  assert.match(error.message, /llm\.maxResponseBytes/);
  await eventually(() => llm.requests[0].clientClosed, "the client to hang up");
  assert.ok(llm.requests[0].clientClosed, "the client hung up");
  assert.ok(llm.requests[0].piecesSent < 20, `${llm.requests[0].piecesSent} of 50 pieces sent`);
  assert.ok(growth < 16 * MB, `wasm heap grew by ${(growth / MB).toFixed(1)} MB`);
});

test("a gzip bomb (about 50 KB on the wire, 50 MB decoded) stops at the cap too: decoded bytes are counted", async () => {
  const [error, growth] = await heapGrowth({ content: "a".repeat(50 * MB), gzip: true, stream: false });
  assert.equal(error?.code, "LLM_BAD_OUTPUT");
  assert.match(error.message, /maxResponseBytes/);
  assert.ok(growth < 4 * MB, `wasm heap grew by ${(growth / MB).toFixed(1)} MB`);
});

test("a 50 MB error page is read only as far as the error message needs (64 KiB): LLM_HTTP 500 with its start", async () => {
  const page = `<html>upstream error ${KEY} ${"x".repeat(50 * MB)}</html>`;
  const [error, growth] = await heapGrowth({ status: 500, body: page, headers: { "content-type": "text/html" } });
  assert.equal(error?.code, "LLM_HTTP");
  assert.equal(error.status, 500);
  assert.match(error.message, /<html>upstream error \*\*\* x{10}/);
  assert.ok(!error.message.includes(KEY));
  assert.ok(growth < 4 * MB, `wasm heap grew by ${(growth / MB).toFixed(1)} MB`);
});

test("llm.maxResponseBytes is configurable: a reply over it is LLM_BAD_OUTPUT, one under it applies", async () => {
  const { memory } = await open({ maxResponseBytes: 2048, stream: false });
  llm.script.push(factsReply("x".repeat(3000)), factsReply("Lives in Lisbon"));
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_BAD_OUTPUT" && /llm\.maxResponseBytes \(2048 bytes\)/.test(e.message),
  );
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  await memory.close();
  await assert.rejects(
    openMemory({ storage: "memory", llm: { baseUrl: llm.baseUrl, model: "m", maxResponseBytes: 100 } }),
    (e) => e.code === "INVALID_INPUT" && /llm\.maxResponseBytes/.test(e.message),
  );
});

test("jsonMode: a 400 that names response_format drops it for this and every later request of the instance", async () => {
  const { memory, events } = await open({ jsonMode: true, stream: false });
  llm.script.push(
    { status: 400, body: { error: "'response_format.type' must be 'json_schema' or 'text'" } },
    factsReply("Lives in Lisbon"),
    factsReply("Plays the cello"),
  );
  memory.observe("t", turn("I live in Lisbon", "Nice."));
  await memory.flush();
  memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  assert.deepEqual(
    llm.requests.map((r) => r.body.response_format?.type ?? null),
    ["json_object", null, null],
  );
  assert.deepEqual(events.codes(), [], "the refusal is not an error of the attempt");
  assert.equal((await memory.get()).facts.length, 2);
  await memory.close();
});
