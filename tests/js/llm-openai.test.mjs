// The fetch transport, OpenAI-compatible protocol, through the built package against the
// local scripted server (tests/helpers/llm-server.mjs): the request, retries within one
// attempt (5xx, 429 + Retry-After, timeouts, network errors, maxRetries), what is never
// retried (4xx), and where the API key must never show up.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import {
  deadPort,
  freshAgent,
  openMemory,
  record,
  recordingAdapter,
  test,
  turn,
  useLlmServer,
} from "../helpers/pipeline.mjs";

const KEY = "sk-test-0123456789abcdef";
const llm = useLlmServer();

/** Opens an instance on the local server; the queue is only driven by flush(). */
async function open(llmOptions = {}, options = {}) {
  const memory = await openMemory({
    agent: freshAgent("openai"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, apiKey: KEY, model: "gpt-test", maxRetries: 2, ...llmOptions },
    ...options,
  });
  return { memory, events: record(memory) };
}

test("happy path: POST /v1/chat/completions with bearer key, model, extra headers, memory and conversation in the prompt; update event with the fact", async () => {
  llm.reset();
  const { memory, events } = await open({ headers: { "X-Trace": "abc", "HTTP-Referer": "https://example.test" } });
  const tea = await memory.addFact({ content: "Prefers green tea", category: "preference", confidence: 0.95 });
  llm.script.push(factsReply("Writes Go microservices"));
  await memory.observe("thread-42", turn("I write Go microservices at work", "Great, Go is a solid choice."));
  const report = await memory.flush();
  assert.deepEqual(report, { processed: ["thread-42"], failed: [] });

  assert.equal(llm.requests.length, 1);
  const req = llm.requests[0];
  assert.equal(req.method, "POST");
  assert.equal(req.url, "/v1/chat/completions");
  assert.equal(req.headers.authorization, `Bearer ${KEY}`);
  assert.equal(req.headers["content-type"], "application/json");
  assert.equal(req.headers["x-trace"], "abc");
  assert.equal(req.headers["http-referer"], "https://example.test");
  assert.equal(req.body.model, "gpt-test");
  assert.equal(req.body.stream, true, "streamed by default");
  assert.equal(req.body.max_tokens, 1024, "the default budget");
  assert.equal(req.body.response_format.type, "json_schema", "structured output by default");
  assert.equal(req.body.messages.length, 2);
  assert.equal(req.body.messages[0].role, "system");
  assert.match(req.body.messages[0].content, /newFacts/, "the instructions describe the delta");
  assert.equal(req.body.messages[1].role, "user");
  const prompt = req.body.messages[1].content;
  assert.ok(prompt.includes("User: I write Go microservices at work"), prompt);
  assert.ok(prompt.includes("Assistant: Great, Go is a solid choice."), prompt);
  assert.ok(
    prompt.includes("Prefers green tea") && prompt.includes(tea.id),
    "the current memory, with fact ids, is in the prompt",
  );

  const updates = events.of("update").filter((e) => e.reason === "extraction");
  assert.equal(updates.length, 1);
  assert.equal(updates[0].threadId, "thread-42");
  assert.equal(updates[0].added.length, 1);
  assert.deepEqual(
    {
      content: updates[0].added[0].content,
      category: updates[0].added[0].category,
      confidence: updates[0].added[0].confidence,
      source: updates[0].added[0].source,
    },
    { content: "Writes Go microservices", category: "knowledge", confidence: 0.9, source: "thread-42" },
  );
  assert.match(updates[0].added[0].id, /^fact_[0-9a-f]{8}$/);
  const doc = await memory.get();
  assert.deepEqual(
    doc.facts.map((f) => f.content),
    ["Prefers green tea", "Writes Go microservices"],
  );
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("a baseUrl ending with / gives the same URL (no double slash)", async () => {
  llm.reset();
  const { memory } = await open({ baseUrl: `${llm.baseUrl}/` });
  llm.script.push(factsReply("x"));
  memory.observe("t", turn("I like maps", "ok"));
  await memory.flush();
  assert.equal(llm.requests[0].url, "/v1/chat/completions");
  await memory.close();
});

test("500 then 200 succeeds within one attempt: two requests, no error event, attempt not counted", async () => {
  llm.reset();
  const { memory, events } = await open();
  llm.script.push({ status: 500 }, factsReply("Runs marathons"));
  memory.observe("t", turn("I run marathons", "Impressive"));
  const report = await memory.flush();
  assert.deepEqual(report.processed, ["t"]);
  assert.equal(llm.requests.length, 2);
  assert.deepEqual(events.codes(), []);
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Runs marathons"],
  );
  assert.deepEqual(memory.status().pending, []);
  await memory.close();
});

test("429 with Retry-After: the retry waits at least that long (measured on the server)", async () => {
  llm.reset();
  const { memory, events } = await open();
  llm.script.push(
    { status: 429, headers: { "retry-after": "1" }, body: { error: { message: "slow down" } } },
    factsReply("ok"),
  );
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.equal(llm.requests.length, 2);
  const gap = llm.requests[1].at - llm.requests[0].at;
  assert.ok(gap >= 1000 - 50, `the retry came ${gap} ms after the 429 (Retry-After: 1)`);
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("without Retry-After the backoff starts at 500 ms and doubles", async () => {
  llm.reset();
  const { memory } = await open({ maxRetries: 2 });
  llm.script.push({ status: 503 }, { status: 502 }, factsReply("ok"));
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.equal(llm.requests.length, 3);
  const [a, b, c] = llm.requests.map((r) => r.at);
  assert.ok(b - a >= 500 - 50, `first wait ${b - a} ms`);
  assert.ok(c - b >= 1000 - 50, `second wait ${c - b} ms`);
  await memory.close();
});

test("maxRetries is honoured: 1 + maxRetries requests, then LLM_HTTP with the last status", async () => {
  for (const maxRetries of [0, 3]) {
    llm.reset();
    const { memory, events } = await open({ maxRetries });
    // Retry-After: 0 keeps the test fast; it still counts as a retry.
    for (let i = 0; i < 6; i++) llm.script.push({ status: 503, headers: { "retry-after": "0" } });
    memory.observe("t", turn("hello", "hi"));
    await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && e.status === 503);
    assert.equal(llm.requests.length, 1 + maxRetries, `maxRetries ${maxRetries}`);
    assert.deepEqual(events.codes(), ["LLM_HTTP"], "one error event per failed attempt, not per try");
    assert.equal(events.of("error")[0].attempt, 1);
    await memory.close();
  }
});

test("a server that never answers: LLM_TIMEOUT after timeoutMs, and the timeout is retried", async () => {
  llm.reset();
  const { memory, events } = await open({ timeoutMs: 200, deadlineMs: 0, maxRetries: 1 });
  llm.script.push({ hang: true }, { hang: true });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => {
    assert.equal(e.code, "LLM_TIMEOUT");
    assert.equal(e.name, "UserMemoryError");
    assert.match(e.message, /200 ms/);
    return true;
  });
  assert.equal(llm.requests.length, 2);
  const gap = llm.requests[1].at - llm.requests[0].at;
  // The client waits timeout (200 ms) + backoff (500 ms) after sending the first request, but
  // the server stamps a request when it arrives, and on a loaded machine the first one can
  // arrive late; the backoff alone is a bound that arrival delays cannot break.
  assert.ok(gap >= 500, `timeout (200 ms) + backoff (500 ms) before the retry; got ${gap} ms`);
  assert.deepEqual(events.codes(), ["LLM_TIMEOUT"]);
  assert.deepEqual(memory.status().pending, ["t"], "the entry stays queued");
  await memory.close();
});

test("connection refused: LLM_NETWORK, retried, entry stays queued", async () => {
  const port = await deadPort();
  const memory = await openMemory({
    agent: freshAgent("refused"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: KEY, model: "m", maxRetries: 1 },
  });
  const events = record(memory);
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => {
    assert.equal(e.code, "LLM_NETWORK");
    assert.ok(e.message.includes(`127.0.0.1:${port}`), e.message);
    assert.ok(!e.message.includes(KEY));
    return true;
  });
  assert.deepEqual(events.codes(), ["LLM_NETWORK"]);
  assert.deepEqual(memory.status().pending, ["t"]);
  await memory.close();
});

test("a dropped connection is a network error and is retried", async () => {
  llm.reset();
  const { memory, events } = await open({ maxRetries: 1 });
  llm.script.push({ destroy: true }, factsReply("ok"));
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.equal(llm.requests.length, 2);
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("401 is LLM_HTTP with status 401, not retried (exactly one request), and the message does not contain the key", async () => {
  llm.reset();
  const { memory, events } = await open({ maxRetries: 3 });
  llm.script.push({ status: 401, body: { error: { message: `Incorrect API key provided: ${KEY}` } } });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => {
    assert.equal(e.code, "LLM_HTTP");
    assert.equal(e.status, 401);
    assert.ok(!e.message.includes(KEY), e.message);
    assert.match(e.message, /401/);
    return true;
  });
  assert.equal(llm.requests.length, 1);
  const ev = events.of("error")[0];
  assert.equal(ev.code, "LLM_HTTP");
  assert.equal(ev.error.status, 401);
  assert.equal(ev.threadId, "t");
  assert.equal(ev.attempt, 1);
  assert.ok(!JSON.stringify(ev).includes(KEY) && !ev.error.message.includes(KEY));
  await memory.close();
});

test("other 4xx (400, 404, 408, 422) are not retried either", async () => {
  for (const status of [400, 404, 408, 422]) {
    llm.reset();
    const { memory } = await open({ maxRetries: 2 });
    llm.script.push({ status, headers: { "retry-after": "0" } });
    memory.observe("t", turn("hello", "hi"));
    await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && e.status === status);
    assert.equal(llm.requests.length, 1, `HTTP ${status}`);
    await memory.close();
  }
});

test("a 200 whose body is not a chat completion is LLM_BAD_OUTPUT, not retried", async () => {
  llm.reset();
  const { memory } = await open();
  llm.script.push({ status: 200, body: "<html>gateway</html>", headers: { "content-type": "text/html" } });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_BAD_OUTPUT");
  assert.equal(llm.requests.length, 1);
  await memory.close();
});

test("the API key never appears in storage or in any event, even when the server echoes it", async () => {
  llm.reset();
  const adapter = recordingAdapter();
  const memory = await openMemory({
    agent: freshAgent("secret"),
    storage: adapter,
    debounceMs: 600_000,
    maxAttempts: 2,
    llm: { baseUrl: llm.baseUrl, apiKey: KEY, model: "m", maxRetries: 0 },
  });
  const events = record(memory);
  llm.script.push(
    { status: 401, body: { error: { message: `bad key ${KEY}` } } },
    { status: 500, body: `internal error for key ${KEY}`, headers: { "content-type": "text/plain" } },
  );
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush());
  await assert.rejects(memory.flush());
  llm.script.push(factsReply("Speaks French"));
  memory.observe("t", turn("Je parle français", "Très bien"));
  await memory.flush();
  assert.deepEqual(events.codes(), ["LLM_HTTP", "LLM_HTTP", "ABANDONED"]);
  assert.ok(adapter.written.length > 0);
  for (const [k, v] of adapter.written) assert.ok(!v.includes(KEY) && !k.includes(KEY), `stored ${k}`);
  for (const e of events.events) {
    assert.ok(!JSON.stringify(e).includes(KEY), `${e.type} event`);
    if (e.error)
      assert.ok(!e.error.message.includes(KEY) && !String(e.error.stack).includes(KEY), `${e.type} event error`);
  }
  assert.ok(!JSON.stringify(memory.options()).includes(KEY), "options() does not expose the key");
  await memory.close();
});

test("a key sent in a header (Azure's api-key) is masked like apiKey, also deep inside a long plain-text body", async () => {
  llm.reset();
  const headerKey = "azure-key-0123456789abcdef0123456789";
  const { memory, events } = await open({ apiKey: undefined, headers: { "api-key": headerKey }, maxRetries: 0 });
  llm.script.push(
    { status: 401, body: { error: { message: `bad api-key ${headerKey}` } } },
    { status: 502, body: `${"x".repeat(160)}${headerKey} upstream`, headers: { "content-type": "text/plain" } },
  );
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_HTTP" && !e.message.includes("azure-key") && e.message.includes("***"),
  );
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && !e.message.includes("azure-key-0123"));
  assert.equal(llm.requests[0].headers["api-key"], headerKey, "the header was sent");
  for (const e of events.events) assert.ok(!JSON.stringify(e).includes("azure-key-0123"), `${e.type} event`);
  await memory.close();
});

test("processed carries the provider's token usage when the reply has one, else the estimate", async () => {
  llm.reset();
  const { memory } = await open();
  const events = record(memory, ["processed"]);
  llm.script.push({
    ...factsReply("Writes Go microservices"),
    usage: { prompt_tokens: 812, completion_tokens: 95, total_tokens: 907 },
  });
  await memory.observe("t-usage", turn("I write Go microservices at work", "Nice."));
  await memory.flush();
  assert.deepEqual(events.of("processed")[0].usage, { promptTokens: 812, completionTokens: 95, reported: true });
  llm.script.push(factsReply("Lives in Berlin"));
  await memory.observe("t-usage-2", turn("I live in Berlin", "Nice city."));
  await memory.flush();
  const estimated = events.of("processed")[1].usage;
  assert.equal(estimated.reported, false);
  assert.ok(estimated.promptTokens > 100 && estimated.completionTokens > 5, JSON.stringify(estimated));
  await memory.close();
});

test("a 200 reply that is no delta but quotes the key and a header value: LLM_BAD_OUTPUT, its error event and the flush() rejection are masked", async () => {
  llm.reset();
  const headerKey = "azure-key-in-reply-0123456789";
  const { memory, events } = await open({ headers: { "api-key": headerKey }, maxRetries: 0 });
  // The key starts where a 200-character excerpt of the unmasked reply would cut it.
  const reply = `${"Sorry, ".repeat(27)} ${KEY} and ${headerKey} are not valid, so I cannot help.`;
  llm.script.push({ content: reply });
  memory.observe("t", turn("hello", "hi"));
  const rejection = await memory.flush().then(
    () => null,
    (e) => e,
  );
  assert.equal(rejection?.code, "LLM_BAD_OUTPUT");
  const leaks = (text) => text.includes(KEY.slice(0, 10)) || text.includes(headerKey.slice(0, 10));
  assert.ok(!leaks(rejection.message) && rejection.message.includes("***"), rejection.message);
  assert.ok(!leaks(String(rejection.stack)));
  const [ev] = events.of("error");
  assert.equal(ev.code, "LLM_BAD_OUTPUT");
  assert.ok(!leaks(JSON.stringify(ev)) && !leaks(ev.error.message), ev.message);
  await memory.close();
});

test("a valid delta echoing the key: that fact and summary are neither stored nor injected, and processed.skipped says why", async () => {
  llm.reset();
  const adapter = recordingAdapter();
  const memory = await openMemory({
    agent: freshAgent("secret-delta"),
    storage: adapter,
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, apiKey: KEY, model: "m", maxRetries: 0 },
  });
  const events = record(memory, ["processed", "error"]);
  llm.script.push({
    json: {
      newFacts: [
        { content: "Lives in Lisbon", category: "context", confidence: 0.9 },
        { content: `Their API key is ${KEY}`, category: "context", confidence: 0.95 },
      ],
      user: { workContext: { summary: `Deploys with the key ${KEY}`, shouldUpdate: true } },
    },
  });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  const doc = await memory.get();
  assert.deepEqual(
    doc.facts.map((f) => f.content),
    ["Lives in Lisbon"],
  );
  assert.equal(doc.user.workContext.summary, "");
  for (const [k, v] of adapter.written) assert.ok(!v.includes(KEY), `stored ${k}`);
  assert.ok(!(await memory.inject(turn("where do I live?", ""))).includes(KEY));
  const skipped = events.of("processed")[0].skipped.map((s) => [s.path, s.reason]);
  assert.deepEqual(
    skipped.filter(([, r]) => r === "secret"),
    [
      ["newFacts[1]", "secret"],
      ["user.workContext", "secret"],
    ],
  );
  assert.ok(!JSON.stringify(events.events).includes(KEY));
  await memory.close();
});
