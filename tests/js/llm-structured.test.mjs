// Structured outputs through the built package against the scripted server: the delta's
// JSON schema (DELTA_SCHEMA, exported) is sent as OpenAI's strict response_format or as
// Anthropic's forced tool; a reply using the schema's nulls applies; an endpoint refusing
// the schema gets JSON mode, then nothing, each step remembered for the instance.
import assert from "node:assert/strict";
import { DELTA_SCHEMA } from "user-memory";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();

async function open(llmOptions = {}) {
  llm.reset();
  const memory = await openMemory({
    agent: freshAgent("schema"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, model: "m", maxRetries: 0, stream: false, ...llmOptions },
  });
  return { memory, events: record(memory, ["update", "error", "processed"]) };
}

/** What a strict-mode model writes: every key, empty lists for what it does not change. */
const strictDelta = {
  userSaid: [],
  newFacts: [{ content: "Works as a nurse in Porto", category: "context", confidence: 0.9, sourceError: null }],
  factsToRemove: [],
  factsToReinforce: [],
  sections: [{ section: "workContext", summary: "Nurse at a hospital in Porto." }],
};

test("DELTA_SCHEMA is exported from the main entry, and is exactly what the default request sends (OpenAI strict json_schema)", async () => {
  assert.equal(DELTA_SCHEMA.type, "object");
  assert.deepEqual(DELTA_SCHEMA.required, ["userSaid", "newFacts", "factsToRemove", "factsToReinforce", "sections"]);
  const { memory } = await open();
  llm.script.push({ json: strictDelta });
  await memory.observe("t", turn("I work as a nurse in Porto", "Great."));
  await memory.flush();
  const f = llm.requests[0].body.response_format;
  assert.deepEqual(f, {
    type: "json_schema",
    json_schema: { name: "memory_delta", strict: true, schema: DELTA_SCHEMA },
  });
  await memory.close();
});

test("a strict-mode reply (every key, nulls for no update) applies: the fact and the one section, nothing skipped", async () => {
  const { memory, events } = await open();
  llm.script.push({ json: strictDelta });
  await memory.observe("t", turn("I work as a nurse in Porto", "Great."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  const doc = await memory.get();
  assert.deepEqual(
    doc.facts.map((f) => f.content),
    ["Works as a nurse in Porto"],
  );
  assert.equal(doc.user.workContext.summary, "Nurse at a hospital in Porto.");
  assert.equal(doc.user.personalContext.summary, "");
  assert.deepEqual(events.of("processed")[0].skipped, []);
  await memory.close();
});

test("an endpoint without structured outputs: schema refused → JSON mode → refused → no mode; three requests once, then remembered", async () => {
  const { memory, events } = await open();
  llm.script.push(
    {
      status: 400,
      body: {
        error: {
          message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        },
      },
    },
    { status: 400, body: { error: "'response_format.type' must be 'json_schema' or 'text'" } },
    factsReply("Lives in Lisbon"),
    factsReply("Plays the cello"),
  );
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  assert.deepEqual(
    llm.requests.map((r) => r.body.response_format?.type ?? null),
    ["json_schema", "json_object", null, null],
  );
  assert.deepEqual(events.codes(), [], "a refused mode is no failure");
  assert.equal((await memory.get()).facts.length, 2);
  await memory.close();
});

test("a 400 that names nothing we can leave out stands: LLM_HTTP 400 after one request", async () => {
  const { memory } = await open();
  llm.script.push({ status: 400, body: { error: { message: "model 'm' not found" } } });
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && e.status === 400);
  assert.equal(llm.requests.length, 1);
  await memory.close();
});

test("jsonMode: true sends json_object, jsonMode: false nothing", async () => {
  for (const [jsonMode, expected] of [
    [true, { type: "json_object" }],
    [false, undefined],
  ]) {
    const { memory } = await open({ jsonMode });
    llm.script.push(factsReply("x"));
    await memory.observe("t", turn("I live in Lisbon", "Nice."));
    await memory.flush();
    assert.deepEqual(llm.requests[0].body.response_format, expected);
    await memory.close();
  }
});

for (const stream of [false, true]) {
  test(`anthropic${stream ? " (streamed)" : ""}: the schema goes as a forced tool call and the tool's input is the delta`, async () => {
    const { memory, events } = await open({ provider: "anthropic", stream });
    llm.script.push({ json: strictDelta });
    await memory.observe("t", turn("I work as a nurse in Porto", "Great."));
    assert.deepEqual(await memory.flush(), { processed: ["t"], failed: [] });
    const body = llm.requests[0].body;
    assert.deepEqual(body.tools, [
      { name: "memory_delta", description: "Record what to change in the user's memory.", input_schema: DELTA_SCHEMA },
    ]);
    assert.deepEqual(body.tool_choice, { type: "tool", name: "memory_delta" });
    assert.deepEqual(
      (await memory.get()).facts.map((f) => f.content),
      ["Works as a nurse in Porto"],
    );
    assert.deepEqual(events.of("processed")[0].skipped, []);
    await memory.close();
  });
}

test("anthropic through a proxy without tools: the 400 naming them drops the tool for the instance", async () => {
  const { memory, events } = await open({ provider: "anthropic" });
  llm.script.push(
    {
      status: 400,
      body: {
        type: "error",
        error: { type: "invalid_request_error", message: "tools: Extra inputs are not permitted" },
      },
    },
    factsReply("Lives in Lisbon"),
    factsReply("Plays the cello"),
  );
  await memory.observe("t", turn("I live in Lisbon", "Nice."));
  await memory.flush();
  await memory.observe("t2", turn("I play the cello", "Lovely."));
  await memory.flush();
  assert.deepEqual(
    llm.requests.map((r) => Boolean(r.body.tools)),
    [true, false, false],
  );
  assert.deepEqual(events.codes(), []);
  await memory.close();
});
