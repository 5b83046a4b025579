// Streamed replies through the built package against the scripted server (server-sent
// events, OpenAI's and Anthropic's): the request asks for a stream with usage, the reply is
// read as it arrives, reading stops once the delta is complete (the server sees the client
// leave), `timeoutMs` counts time without data, usage comes from the stream, and endpoints
// that do not stream are read whole and then asked without streaming.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import { eventually, freshAgent, openMemory, record, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();

async function open(llmOptions = {}) {
  llm.reset();
  const memory = await openMemory({
    agent: freshAgent("stream"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, apiKey: "sk-stream-test-0123456789", model: "m", maxRetries: 1, ...llmOptions },
  });
  return { memory, events: record(memory, ["update", "error", "processed"]) };
}

const facts = async (memory) => (await memory.get()).facts.map((f) => f.content);

test("openai: the request streams with usage; the reply is read from the events and the stream's usage is reported", async () => {
  const { memory, events } = await open();
  llm.script.push({ ...factsReply("Lives in Lisbon"), usage: { prompt_tokens: 812, completion_tokens: 31 } });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  const req = llm.requests[0].body;
  assert.equal(req.stream, true);
  assert.deepEqual(req.stream_options, { include_usage: true });
  assert.ok(llm.requests[0].piecesSent > 5, "the reply came in several events");
  assert.deepEqual(await facts(memory), ["Lives in Lisbon"]);
  assert.deepEqual(events.of("processed")[0].usage, { promptTokens: 812, completionTokens: 31, reported: true });
  await memory.close();
});

test("anthropic: a streamed forced tool call (input_json_delta) is the delta; message_start / message_delta give the usage", async () => {
  const { memory, events } = await open({ provider: "anthropic" });
  llm.script.push({ ...factsReply("Plays the cello"), usage: { input_tokens: 700, output_tokens: 42 } });
  await memory.observe("t", turn("I play the cello", "Lovely."));
  await memory.flush();
  const req = llm.requests[0].body;
  assert.equal(req.stream, true);
  assert.deepEqual(req.tool_choice, { type: "tool", name: "memory_delta" });
  assert.deepEqual(await facts(memory), ["Plays the cello"]);
  assert.deepEqual(events.of("processed")[0].usage, { promptTokens: 700, completionTokens: 42, reported: true });
  await memory.close();
});

for (const provider of ["openai", "anthropic"]) {
  test(`${provider}: reading stops soon after the delta's object is complete; a model running on with whitespace is cut off`, async () => {
    const { memory } = await open({ provider, jsonMode: false });
    const tail = Array.from({ length: 3000 }, () => "\n ");
    llm.script.push({ ...factsReply("Lives in Lisbon"), tail, pieceDelayMs: 1 });
    await memory.observe("t", turn("I live in Lisbon", "Nice."));
    assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
    const r = llm.requests[0];
    await eventually(() => r.clientClosed, "the client to hang up");
    assert.ok(r.clientClosed, "the client hung up before the end of the stream");
    assert.ok(r.piecesSent < 100, `${r.piecesSent} of ${3000 + 11} pieces were sent`);
    assert.deepEqual(await facts(memory), ["Lives in Lisbon"]);
    await memory.close();
  });
}

test("timeoutMs counts time without data: a slow but steady stream outlasting it succeeds, a stream that goes silent is LLM_TIMEOUT", async () => {
  // No whole-call deadline (by default 5 × timeoutMs, which a slow machine could reach).
  // The gaps are a tenth of timeoutMs: with 150 ms gaps and a 400 ms timeout a loaded machine
  // can stall the scripted server's timers past the timeout (deadline.test.mjs saw a 3x margin
  // fail with two CPU hogs beside the suite).
  const { memory, events } = await open({ timeoutMs: 1000, deadlineMs: 0, maxRetries: 0 });
  const content = JSON.stringify(factsReply("Lives in Lisbon").json);
  const pieces = content.match(/[\s\S]{1,4}/g);
  // ~25 pieces 100 ms apart: about 2.5 s in all, never 1 s without data.
  llm.script.push({ content, pieces, pieceDelayMs: 100 });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  const started = Date.now();
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  assert.ok(Date.now() - started > 1000 * 2, "the whole reply took longer than twice timeoutMs");
  // Half the delta, then silence.
  llm.script.push({ content, pieces: pieces.slice(0, 4), stall: true });
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_TIMEOUT" && /no answer or new data .* for 1000 ms \(llm\.timeoutMs\)/.test(e.message),
  );
  assert.deepEqual(events.codes(), ["LLM_TIMEOUT"]);
  await memory.close();
});

test("an endpoint answering a stream request with plain JSON is read whole, and asked without streaming from then on", async () => {
  const { memory, events } = await open();
  llm.script.push({ ...factsReply("Lives in Lisbon"), stream: false }, factsReply("Plays the cello"));
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await memory.flush();
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  assert.deepEqual(
    llm.requests.map((r) => r.body.stream),
    [true, false],
  );
  assert.equal(llm.requests[1].body.stream_options, undefined);
  assert.deepEqual((await facts(memory)).sort(), ["Lives in Lisbon", "Plays the cello"]);
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("llm.stream: false sends stream: false; a 400 naming stream_options turns streaming off for the instance", async () => {
  const off = await open({ stream: false });
  off.memory.observe("t", turn("I live in Lisbon", "Nice."));
  llm.script.push(factsReply("Lives in Lisbon"));
  await off.memory.flush();
  assert.equal(llm.requests[0].body.stream, false);
  await off.memory.close();

  const { memory, events } = await open();
  llm.script.push(
    { status: 400, body: { error: { message: "Unknown parameter: 'stream_options'" } } },
    factsReply("Lives in Lisbon"),
    factsReply("Plays the cello"),
  );
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await memory.flush();
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  assert.deepEqual(
    llm.requests.map((r) => r.body.stream),
    [true, false, false],
  );
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("an error event in the stream (Anthropic's overloaded_error) is LLM_NETWORK, retried within the attempt", async () => {
  const { memory, events } = await open({ provider: "anthropic" });
  const overloaded = `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })}\n\n`;
  llm.script.push({ sse: overloaded }, factsReply("Plays the cello"));
  await memory.observe("t", turn("I play the cello", "Lovely."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  assert.equal(llm.requests.length, 2);
  assert.deepEqual(events.codes(), []);
  llm.script.push({ sse: overloaded }, { sse: overloaded });
  await memory.observe("t2", turn("I live in Lisbon", "Nice."));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_NETWORK" && /stream ended with an error: Overloaded/.test(e.message),
  );
  await memory.close();
});
