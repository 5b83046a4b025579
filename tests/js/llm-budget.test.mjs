// The reply budget through the built package against the scripted server: a default
// max_tokens sized to the delta, a reply cut off by it retried once with four times the
// budget and then reported as LLM_BAD_OUTPUT naming the cause, a cut-off reply that still
// holds a complete delta used as it is, and OpenAI's reasoning models (max_completion_tokens,
// no temperature) served after their refusals.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();

async function open(llmOptions = {}) {
  llm.reset();
  const memory = await openMemory({
    agent: freshAgent("budget"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, model: "m", maxRetries: 0, ...llmOptions },
  });
  return { memory, events: record(memory, ["update", "error", "processed"]) };
}

const cutOff = { content: '{"newFacts": [{"content": "Lives in Lis', finish: "length" };

for (const provider of ["openai", "anthropic"]) {
  for (const stream of [false, true]) {
    test(`${provider}${stream ? " streamed" : ""}: a reply cut off at the default 1024 tokens is asked again with 4096, and the usage of both calls adds up`, async () => {
      const { memory, events } = await open({ provider, stream });
      const usage = (p, c) =>
        provider === "anthropic" ? { input_tokens: p, output_tokens: c } : { prompt_tokens: p, completion_tokens: c };
      llm.script.push(
        { ...cutOff, usage: usage(800, 1024) },
        { ...factsReply("Lives in Lisbon"), usage: usage(800, 40) },
      );
      await memory.observe("t", turn("I live in Lisbon", "Nice."));
      assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
      assert.deepEqual(
        llm.requests.map((r) => r.body.max_tokens),
        [1024, 4096],
      );
      assert.deepEqual(
        (await memory.get()).facts.map((f) => f.content),
        ["Lives in Lisbon"],
      );
      assert.deepEqual(events.of("processed")[0].usage, { promptTokens: 1600, completionTokens: 1064, reported: true });
      assert.deepEqual(events.codes(), []);
      await memory.close();
    });
  }
}

test("cut off twice: LLM_BAD_OUTPUT naming finish_reason length and both budgets, after exactly two requests; memory untouched", async () => {
  const { memory, events } = await open();
  llm.script.push({ ...cutOff }, { ...cutOff });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await assert.rejects(memory.flush(), (e) => {
    assert.equal(e.code, "LLM_BAD_OUTPUT");
    assert.equal(
      e.message,
      'the reply was cut off by the token limit (finish_reason: "length") after 1024 and again after 4096 tokens, before its memory JSON was complete; raise llm.maxTokens',
    );
    return true;
  });
  assert.equal(llm.requests.length, 2);
  assert.deepEqual((await memory.get()).facts, []);
  assert.deepEqual(events.codes(), ["LLM_BAD_OUTPUT"]);
  assert.deepEqual(memory.status().pending, ["t"]);
  await memory.close();
});

test("anthropic: stop_reason max_tokens twice is named as such; a configured maxTokens is the first budget", async () => {
  const { memory } = await open({ provider: "anthropic", maxTokens: 300, stream: false });
  llm.script.push({ ...cutOff }, { ...cutOff });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await assert.rejects(
    memory.flush(),
    (e) =>
      e.code === "LLM_BAD_OUTPUT" &&
      /stop_reason: "max_tokens"\) after 300 and again after 1200 tokens/.test(e.message),
  );
  assert.deepEqual(
    llm.requests.map((r) => r.body.max_tokens),
    [300, 1200],
  );
  await memory.close();
});

test("a reply cut off after a complete delta (a model running on) is used without a second request", async () => {
  const { memory } = await open({ stream: false });
  llm.script.push({
    content: `${JSON.stringify(factsReply("Lives in Lisbon").json)}\n\nI also think that`,
    finish: "length",
  });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  assert.equal(llm.requests.length, 1);
  await memory.close();
});

test("maxTokens: null leaves the budget to the endpoint; a cut-off reply then fails at once, naming that", async () => {
  const { memory } = await open({ maxTokens: null });
  llm.script.push({ ...cutOff });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_BAD_OUTPUT" && /endpoint's own limit \(llm\.maxTokens: null\)/.test(e.message),
  );
  assert.equal(llm.requests.length, 1);
  assert.equal(llm.requests[0].body.max_tokens, undefined);
  await memory.close();
});

test("OpenAI reasoning models: max_tokens refused → max_completion_tokens; temperature refused → left out; both remembered", async () => {
  const { memory, events } = await open({ stream: false });
  llm.script.push(
    {
      status: 400,
      body: {
        error: {
          message:
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        },
      },
    },
    {
      status: 400,
      body: {
        error: {
          message:
            "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.",
        },
      },
    },
    factsReply("Lives in Lisbon"),
    factsReply("Plays the cello"),
  );
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await memory.flush();
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  const sent = llm.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens, r.body.temperature]);
  assert.deepEqual(sent, [
    [1024, undefined, 0],
    [undefined, 1024, 0],
    [undefined, 1024, undefined],
    [undefined, 1024, undefined],
  ]);
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

// A small model's loop, cut at the limit (as SmolLM2-135M wrote it in tests/fixtures/replies).
const looping = {
  content: `{"user": {"topOfMind": "I am vegetarian. ${"I am vegan. I am gluten-free. ".repeat(40)}`,
  finish: "length",
};

test("a reply cut off in a repetition loop is asked again once with the same budget and repeat_penalty, not a bigger budget", async () => {
  const { memory, events } = await open();
  llm.script.push({ ...looping }, factsReply("Is vegetarian"));
  await memory.observe("t", turn("I'm vegetarian. Any lunch ideas?", "A lentil bowl."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  assert.deepEqual(
    llm.requests.map((r) => [r.body.max_tokens, r.body.repeat_penalty]),
    [
      [1024, undefined],
      [1024, 1.1],
    ],
  );
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Is vegetarian"],
  );
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("a loop again with the penalty fails at once, naming the loop; an endpoint refusing repeat_penalty is not sent it again", async () => {
  const { memory } = await open();
  llm.script.push({ ...looping }, { ...looping });
  await memory.observe("t", turn("I'm vegetarian. Any lunch ideas?", "A lentil bowl."));
  await assert.rejects(
    memory.flush(),
    (e) => e.code === "LLM_BAD_OUTPUT" && /in a repetition loop, again with a repetition penalty/.test(e.message),
  );
  assert.equal(llm.requests.length, 2);
  // OpenAI itself refuses the field: it is dropped for the instance, and the loop fails.
  llm.reset();
  llm.script.push(
    { ...looping },
    { status: 400, body: { error: { message: "Unrecognized request argument supplied: repeat_penalty" } } },
    { ...looping },
    { ...looping },
  );
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_BAD_OUTPUT" && /repetition loop/.test(e.message));
  assert.deepEqual(
    llm.requests.map((r) => r.body.repeat_penalty),
    [undefined, 1.1, undefined],
  );
  // From then on a loop fails at once: nothing left to send.
  await assert.rejects(memory.flush(), (e) =>
    /repetition loop, and the library has no repetition penalty to add/.test(e.message),
  );
  assert.equal(llm.requests.length, 4);
  await memory.close();
});

test("llm.extraBody fields go into every request; the library's own fields cannot be overridden", async () => {
  const extraBody = { repeat_penalty: 1.15, top_k: 40, options: { num_ctx: 8192 } };
  const { memory } = await open({ extraBody });
  llm.script.push({ ...looping }, { ...looping });
  await memory.observe("t", turn("I'm vegetarian. Any lunch ideas?", "A lentil bowl."));
  // The user's own penalty stays theirs: a loop is not asked again with ours.
  await assert.rejects(memory.flush(), (e) => /no repetition penalty to add/.test(e.message));
  assert.equal(llm.requests.length, 1);
  const body = llm.requests[0].body;
  assert.deepEqual([body.repeat_penalty, body.top_k, body.options], [1.15, 40, { num_ctx: 8192 }]);
  assert.equal(body.model, "m");
  await memory.close();
  for (const key of ["model", "messages", "response_format", "max_tokens", "stream", "temperature"]) {
    await assert.rejects(
      openMemory({ storage: "memory", llm: { baseUrl: llm.baseUrl, model: "m", extraBody: { [key]: 1 } } }),
      (e) => e.code === "INVALID_INPUT" && e.message.includes(`llm.extraBody.${key}`),
      key,
    );
  }
  await assert.rejects(
    openMemory({ storage: "memory", llm: { baseUrl: llm.baseUrl, model: "m", extraBody: "repeat_penalty=1.1" } }),
    (e) => e.code === "INVALID_INPUT" && e.message.includes("llm.extraBody"),
  );
});
