// The fetch transport, Anthropic messages protocol (`provider: "anthropic"`), through the
// built package against the local scripted server.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const KEY = "sk-ant-test-0123456789";
const llm = useLlmServer();

async function open(llmOptions = {}) {
  llm.reset();
  const memory = await openMemory({
    agent: freshAgent("anthropic"),
    storage: "memory",
    debounceMs: 600_000,
    llm: {
      provider: "anthropic",
      baseUrl: llm.baseUrl,
      apiKey: KEY,
      model: "claude-test",
      maxRetries: 2,
      ...llmOptions,
    },
  });
  return { memory, events: record(memory) };
}

test("anthropic happy path: POST /v1/messages with x-api-key, anthropic-version, max_tokens, system and the conversation", async () => {
  const { memory, events } = await open({ headers: { "anthropic-beta": "tools-2024" } });
  await memory.addFact({ content: "Lives in Lisbon" });
  llm.script.push(factsReply("Plays the cello"));
  memory.observe("t", turn("I play the cello in an orchestra", "Lovely!"));
  await memory.flush();
  assert.equal(llm.requests.length, 1);
  const req = llm.requests[0];
  assert.equal(req.url, "/v1/messages");
  assert.equal(req.headers["x-api-key"], KEY);
  assert.equal(req.headers["anthropic-version"], "2023-06-01");
  assert.equal(req.headers["anthropic-beta"], "tools-2024");
  assert.equal(req.headers.authorization, undefined, "no bearer header for Anthropic");
  assert.equal(req.body.model, "claude-test");
  assert.equal(req.body.max_tokens, 1024);
  assert.equal(typeof req.body.system, "string");
  assert.match(req.body.system, /newFacts/);
  assert.equal(req.body.messages.length, 1);
  assert.equal(req.body.messages[0].role, "user");
  assert.ok(req.body.messages[0].content.includes("User: I play the cello in an orchestra"));
  assert.ok(req.body.messages[0].content.includes("Lives in Lisbon"), "current memory in the prompt");
  const up = events.of("update").find((e) => e.reason === "extraction");
  assert.equal(up.added[0].content, "Plays the cello");
  assert.equal(up.threadId, "t");
  await memory.close();
});

test("anthropic maxTokens option is sent as max_tokens", async () => {
  const { memory } = await open({ maxTokens: 512 });
  llm.script.push(factsReply("x"));
  memory.observe("t", turn("I like jazz", "ok"));
  await memory.flush();
  assert.equal(llm.requests[0].body.max_tokens, 512);
  await memory.close();
});

test("anthropic 529 (overloaded) then 200 is retried within the attempt", async () => {
  const { memory, events } = await open();
  llm.script.push(
    { status: 529, body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } },
    factsReply("ok"),
  );
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.equal(llm.requests.length, 2);
  assert.deepEqual(events.codes(), []);
  await memory.close();
});

test("anthropic 401 is LLM_HTTP 401 with the provider's message, not retried, key masked", async () => {
  const { memory } = await open();
  llm.script.push({
    status: 401,
    body: { type: "error", error: { type: "authentication_error", message: `invalid x-api-key ${KEY}` } },
  });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => {
    assert.equal(e.code, "LLM_HTTP");
    assert.equal(e.status, 401);
    assert.match(e.message, /invalid x-api-key/);
    assert.ok(!e.message.includes(KEY));
    return true;
  });
  assert.equal(llm.requests.length, 1);
  await memory.close();
});

test("anthropic reply without a JSON delta is LLM_BAD_OUTPUT and memory is unchanged", async () => {
  const { memory, events } = await open();
  await memory.addFact({ content: "Lives in Lisbon" });
  const before = await memory.get();
  llm.script.push({ content: "I'm sorry, I can't help with that." });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_BAD_OUTPUT");
  assert.deepEqual(await memory.get(), before);
  assert.deepEqual(events.codes(), ["LLM_BAD_OUTPUT"]);
  assert.deepEqual(memory.status().pending, ["t"]);
  await memory.close();
});
