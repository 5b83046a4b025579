// memoryTools({ memory }) from `user-memory/ai-sdk` under the SDK's own generateText, driven
// by the SDK's mock model: the model calls searchMemory, remember and forget, the tools run
// against a real memory, and their results come back to the model in the next step.
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { UserMemory } from "user-memory";
import { memoryTools } from "user-memory/ai-sdk";
import { toolCallingModel, toolResultsOf } from "../helpers/ai-mock.mjs";

async function openMemory() {
  const map = new Map();
  const storage = {
    get: (k) => map.get(k) ?? null,
    set: (k, v) => void map.set(k, v),
    delete: (k) => void map.delete(k),
  };
  return UserMemory.open({ storage, llm: async () => "{}" });
}

const run = (model, memory, prompt, options) =>
  generateText({
    model,
    tools: memoryTools({ memory, ...options }),
    stopWhen: stepCountIs(4),
    messages: [{ role: "user", content: prompt }],
  });

test("searchMemory: the model's query gets the matching facts, best first, and they reach its next step", async () => {
  const memory = await openMemory();
  const rabbit = await memory.addFact({ content: "Has a rabbit called Tangyuan", category: "context" });
  await memory.addFact({ content: "Feeds the rabbit hay every morning", category: "behavior", confidence: 0.7 });
  await memory.addFact({ content: "Lives in Chengdu", category: "context", confidence: 1 });
  const model = toolCallingModel(MockLanguageModelV3, [
    () => ({ tool: "searchMemory", input: { query: "what is my rabbit called", limit: 1 } }),
    () => ({ text: "Tangyuan." }),
  ]);

  const result = await run(model, memory, "What is my rabbit called?");

  assert.equal(result.text, "Tangyuan.");
  const [output] = toolResultsOf(model.doGenerateCalls[1]);
  assert.deepEqual(
    output.facts.map((f) => f.id),
    [rabbit.id],
    "limit 1: the best match only",
  );
  assert.deepEqual(Object.keys(output.facts[0]).sort(), ["category", "confidence", "content", "id", "score"]);
  assert.equal(output.facts[0].content, "Has a rabbit called Tangyuan");
  await memory.close();
});

test("remember: the model's fact is added with its category; the same content again returns the existing fact", async () => {
  const memory = await openMemory();
  const updates = [];
  memory.on("update", (e) => updates.push(e.reason));
  const model = toolCallingModel(MockLanguageModelV3, [
    () => ({ tool: "remember", input: { content: "Prefers Go for backend services", category: "preference" } }),
    () => ({ tool: "remember", input: { content: "  prefers go for backend SERVICES " } }),
    () => ({ text: "Noted." }),
  ]);

  await run(model, memory, "Remember that I prefer Go for backend services.");

  const facts = (await memory.get()).facts;
  assert.equal(facts.length, 1);
  assert.deepEqual([facts[0].content, facts[0].category], ["Prefers Go for backend services", "preference"]);
  const [first] = toolResultsOf(model.doGenerateCalls[1]);
  const [second] = toolResultsOf(model.doGenerateCalls[2]);
  assert.deepEqual(first, {
    remembered: { id: facts[0].id, content: "Prefers Go for backend services", category: "preference" },
  });
  assert.equal(second.remembered.id, facts[0].id, "a duplicate is the existing fact");
  assert.deepEqual(updates, ["addFact"]);
  await memory.close();
});

test("forget: the model removes the fact it found by search; an unknown id is an error result and removes nothing", async () => {
  const memory = await openMemory();
  await memory.addFact({ content: "Works at Acme as a frontend developer" });
  const keep = await memory.addFact({ content: "Lives in Lisbon" });
  const model = toolCallingModel(MockLanguageModelV3, [
    () => ({ tool: "searchMemory", input: { query: "where do I work" } }),
    (call) => ({ tool: "forget", input: { id: toolResultsOf(call)[0].facts[0].id } }),
    () => ({ tool: "forget", input: { id: "fact_00000000" } }),
    () => ({ text: "Forgotten." }),
  ]);

  await run(model, memory, "I no longer work at Acme, forget that.");

  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.id),
    [keep.id],
  );
  assert.equal(toolResultsOf(model.doGenerateCalls[2])[0].forgotten.content, "Works at Acme as a frontend developer");
  assert.match(toolResultsOf(model.doGenerateCalls[3])[0].error, /no fact has the id fact_00000000/);
  await memory.close();
});

test("the tools reach the model as plain JSON Schema (no schema library), with descriptions", async () => {
  const memory = await openMemory();
  const model = toolCallingModel(MockLanguageModelV3, [() => ({ text: "hi" })]);
  await run(model, memory, "Hello");
  const tools = Object.fromEntries(model.doGenerateCalls[0].tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(tools).sort(), ["forget", "remember", "searchMemory"]);
  assert.deepEqual(tools.searchMemory.inputSchema.required, ["query"]);
  assert.deepEqual(tools.remember.inputSchema.properties.category.enum, [
    "preference",
    "knowledge",
    "context",
    "behavior",
    "goal",
    "correction",
  ]);
  assert.deepEqual(tools.forget.inputSchema.required, ["id"]);
  for (const t of Object.values(tools)) {
    assert.equal(t.type, "function");
    assert.ok(t.description.length > 40, t.name);
  }
  await memory.close();
});

test("input a model gets wrong is an error result it can correct, not a failed call", async () => {
  const memory = await openMemory();
  const model = toolCallingModel(MockLanguageModelV3, [
    () => ({ tool: "searchMemory", input: { query: "   " } }),
    () => ({ tool: "remember", input: { content: "" } }),
    () => ({ text: "ok" }),
  ]);
  const result = await run(model, memory, "Hi");
  assert.equal(result.text, "ok");
  assert.match(toolResultsOf(model.doGenerateCalls[1])[0].error, /query/);
  assert.match(toolResultsOf(model.doGenerateCalls[2])[0].error, /content/);
  assert.equal((await memory.get()).facts.length, 0);
  await memory.close();
});

test("memoryTools checks its options; the memory may be the promise open() returns", async () => {
  assert.throws(() => memoryTools({}), { code: "INVALID_INPUT" });
  assert.throws(() => memoryTools({ memory: {}, limit: 0 }), { code: "INVALID_INPUT", message: /limit/ });
  const opening = openMemory();
  const model = toolCallingModel(MockLanguageModelV3, [
    () => ({ tool: "remember", input: { content: "Drinks oolong tea" } }),
    () => ({ text: "ok" }),
  ]);
  await run(model, opening, "I drink oolong tea.");
  const memory = await opening;
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Drinks oolong tea"],
  );
  await memory.close();
});
