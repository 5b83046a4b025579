// The Vercel AI SDK middleware (`user-memory/ai-sdk`) under the SDK's own generateText and
// streamText, with the SDK's mock language model: memory goes into the system prompt the
// model receives, and the conversation with the model's answer is queued afterwards.
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateText, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { UserMemory } from "user-memory";
import { userMemoryMiddleware } from "user-memory/ai-sdk";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
const stop = { unified: "stop", raw: "stop" };

/** Memory in a private store, with an extraction LLM that records its prompts. */
async function openMemory() {
  const map = new Map();
  const store = {
    get: (k) => map.get(k) ?? null,
    set: (k, v) => void map.set(k, v),
    delete: (k) => void map.delete(k),
  };
  const prompts = [];
  const memory = await UserMemory.open({
    storage: store,
    debounceMs: 60_000,
    llm: async ({ prompt }) => {
      prompts.push(prompt);
      return JSON.stringify({ newFacts: [] });
    },
  });
  return { memory, prompts };
}

function textModel(text) {
  return new MockLanguageModelV3({
    doGenerate: async () => ({ content: [{ type: "text", text }], finishReason: stop, usage, warnings: [] }),
  });
}

/** The system message text the model received in its call `i`. */
const systemOf = (call) =>
  call.prompt
    .filter((m) => m.role === "system")
    .map((m) => m.content)
    .join("\n");

test("generateText: the model's system prompt carries the memory block, and the answer is observed", async () => {
  const { memory, prompts } = await openMemory();
  await memory.addFact({ content: "Prefers Go over Java for backend work", category: "preference" });
  const model = textModel("Use net/http and goroutines.");
  const wrapped = wrapLanguageModel({ model, middleware: userMemoryMiddleware({ memory }) });

  const result = await generateText({
    model: wrapped,
    system: "You are a helpful assistant.",
    messages: [{ role: "user", content: "How should I write a small web server?" }],
    providerOptions: { userMemory: { threadId: "chat-gen" } },
  });

  assert.equal(result.text, "Use net/http and goroutines.");
  const system = systemOf(model.doGenerateCalls[0]);
  assert.ok(system.startsWith("You are a helpful assistant.\n\n<memory>"), system);
  assert.match(system, /Prefers Go over Java for backend work/);
  assert.equal(
    model.doGenerateCalls[0].prompt.filter((m) => m.role === "system").length,
    1,
    "appended to the one system message",
  );

  assert.deepEqual(memory.status().pending, ["chat-gen"]);
  await memory.flush();
  assert.match(prompts[0], /User: How should I write a small web server\?/);
  assert.match(prompts[0], /Assistant: Use net\/http and goroutines\./);
  assert.doesNotMatch(prompts[0], /<memory>/, "the injected block never feeds back into extraction");
  await memory.close();
});

test("streamText: memory is injected, and the streamed answer is observed once the stream has ended", async () => {
  const { memory, prompts } = await openMemory();
  await memory.addFact({ content: "Lives in Lisbon", category: "context" });
  let source;
  const model = new MockLanguageModelV3({
    doStream: async () => ({
      stream: new ReadableStream({
        start(c) {
          source = c;
        },
      }),
    }),
  });
  const wrapped = wrapLanguageModel({ model, middleware: userMemoryMiddleware({ memory, threadId: "chat-stream" }) });

  const result = streamText({
    model: wrapped,
    messages: [{ role: "user", content: "What's the weather like where I live?" }],
  });
  const reader = result.textStream[Symbol.asyncIterator]();
  const first = reader.next();
  while (!source) await new Promise((r) => setTimeout(r, 5));
  for (const part of [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "1" },
    { type: "text-delta", id: "1", delta: "Sunny " },
  ])
    source.enqueue(part);
  assert.equal((await first).value, "Sunny ");
  assert.deepEqual(memory.status().pending, [], "nothing is observed while the answer is still streaming");

  for (const part of [
    { type: "text-delta", id: "1", delta: "in Lisbon today." },
    { type: "text-end", id: "1" },
    { type: "finish", finishReason: stop, usage },
  ])
    source.enqueue(part);
  source.close();
  let rest = "";
  for (let r = await reader.next(); !r.done; r = await reader.next()) rest += r.value;
  assert.equal(rest, "in Lisbon today.");

  assert.match(systemOf(model.doStreamCalls[0]), /<memory>[\s\S]*Lives in Lisbon[\s\S]*<\/memory>/);
  assert.deepEqual(memory.status().pending, ["chat-stream"], "queued by the time the stream has ended");
  await memory.flush();
  assert.match(prompts[0], /Assistant: Sunny in Lisbon today\./);
  await memory.close();
});

test("the thread id comes from providerOptions, else the option, else the first user message (stable as the chat grows)", async () => {
  const { memory } = await openMemory();
  const threads = [];
  memory.on("queued", (e) => threads.push(e.threadId));
  const turn1 = [{ role: "user", content: "I am learning Rust." }];
  const turn2 = [...turn1, { role: "assistant", content: "Great!" }, { role: "user", content: "Which book?" }];

  const byOption = wrapLanguageModel({
    model: textModel("ok"),
    middleware: userMemoryMiddleware({ memory, threadId: (p) => `opt-${p.prompt.length}` }),
  });
  await generateText({ model: byOption, messages: turn1, providerOptions: { userMemory: { threadId: "from-call" } } });
  await generateText({ model: byOption, messages: turn1 });

  const derived = wrapLanguageModel({ model: textModel("ok"), middleware: userMemoryMiddleware({ memory }) });
  await generateText({ model: derived, messages: turn1 });
  await generateText({ model: derived, messages: turn2 });
  await generateText({ model: derived, messages: [{ role: "user", content: "Another conversation" }] });

  assert.equal(threads[0], "from-call");
  assert.equal(threads[1], "opt-1");
  assert.match(threads[2], /^auto-[0-9a-f]+$/);
  assert.equal(threads[3], threads[2], "same conversation, same thread");
  assert.notEqual(threads[4], threads[2], "another conversation, another thread");
  await memory.close();
});

test("an answer that only calls tools is not remembered as a final answer", async () => {
  const { memory } = await openMemory();
  const model = new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [
        { type: "text", text: "Let me search for that." },
        { type: "tool-call", toolCallId: "c1", toolName: "search", input: "{}" },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage,
      warnings: [],
    }),
  });
  const wrapped = wrapLanguageModel({ model, middleware: userMemoryMiddleware({ memory, threadId: "tools" }) });
  await generateText({ model: wrapped, messages: [{ role: "user", content: "Search for flights to Oslo" }] });
  assert.deepEqual(memory.status().pending, [], "a user message without a final answer is not queued");
  await memory.close();
});

test("an answer that used a tool the provider ran itself (web search) is remembered", async () => {
  const { memory, prompts } = await openMemory();
  const model = new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [
        { type: "tool-call", toolCallId: "ws1", toolName: "web_search", input: "{}", providerExecuted: true },
        { type: "tool-result", toolCallId: "ws1", toolName: "web_search", result: { hits: 3 }, providerExecuted: true },
        { type: "text", text: "Trains from Utrecht to Oslo take a day." },
      ],
      finishReason: stop,
      usage,
      warnings: [],
    }),
  });
  const wrapped = wrapLanguageModel({ model, middleware: userMemoryMiddleware({ memory, threadId: "searched" }) });
  await generateText({
    model: wrapped,
    messages: [{ role: "user", content: "I only travel by train. How do I get to Oslo?" }],
  });
  assert.deepEqual(memory.status().pending, ["searched"]);
  await memory.flush();
  assert.match(prompts[0], /User: I only travel by train[\s\S]*Assistant: Trains from Utrecht to Oslo take a day\./);
  await memory.close();
});

test("a stream that reports an error in-band (an error part, finish reason error) observes nothing", async () => {
  const { memory } = await openMemory();
  for (const [name, parts] of [
    [
      "error part",
      [
        { type: "error", error: new Error("upstream overloaded") },
        { type: "finish", finishReason: stop, usage },
      ],
    ],
    ["finish reason", [{ type: "finish", finishReason: { unified: "error", raw: "error" }, usage }]],
  ]) {
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream({
          start(c) {
            for (const p of [
              { type: "stream-start", warnings: [] },
              { type: "text-start", id: "1" },
              { type: "text-delta", id: "1", delta: "You are a vegan fr" },
              ...parts,
            ])
              c.enqueue(p);
            c.close();
          },
        }),
      }),
    });
    const wrapped = wrapLanguageModel({
      model,
      middleware: userMemoryMiddleware({ memory, threadId: `failed-${name}` }),
    });
    const result = streamText({
      model: wrapped,
      messages: [{ role: "user", content: "I eat meat every day." }],
      onError: () => {},
    });
    for await (const _ of result.fullStream);
    assert.deepEqual(memory.status().pending, [], `${name}: the cut-off answer is not observed`);
  }
  await memory.close();
});

test("empty memory leaves the prompt exactly as it was", async () => {
  const { memory } = await openMemory();
  const plain = textModel("hi");
  const withMemory = textModel("hi");
  const call = { system: "Be brief.", messages: [{ role: "user", content: "Hello" }] };
  await generateText({ model: plain, ...call });
  await generateText({
    model: wrapLanguageModel({ model: withMemory, middleware: userMemoryMiddleware({ memory }) }),
    ...call,
  });
  assert.deepEqual(withMemory.doGenerateCalls[0].prompt, plain.doGenerateCalls[0].prompt);
  await memory.close();
});

test("a failing memory never fails the model call; the error goes to onError", async () => {
  const broken = Object.assign(new Error("storage is gone"), { code: "STORAGE_UNAVAILABLE" });
  const memory = {
    inject: async () => {
      throw broken;
    },
    observe: () => {
      throw broken;
    },
  };
  const errors = [];
  const model = textModel("still answering");
  const wrapped = wrapLanguageModel({
    model,
    middleware: userMemoryMiddleware({ memory, onError: (e) => errors.push(e) }),
  });
  const result = await generateText({ model: wrapped, messages: [{ role: "user", content: "Hi" }] });
  assert.equal(result.text, "still answering");
  assert.deepEqual(errors, [broken, broken]);
});

test("the memory may be given as the promise UserMemory.open() returns", async () => {
  const opening = UserMemory.open({ storage: { get: () => null, set() {}, delete() {} }, llm: async () => "{}" });
  const model = textModel("ok");
  const wrapped = wrapLanguageModel({ model, middleware: userMemoryMiddleware({ memory: opening, threadId: "p" }) });
  await generateText({ model: wrapped, messages: [{ role: "user", content: "I prefer tabs" }] });
  const memory = await opening;
  assert.deepEqual(memory.status().pending, ["p"]);
  await memory.close();
});
