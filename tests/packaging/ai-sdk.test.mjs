// The AI SDK middleware from the packed tarball, in a project that already has AI SDK 6 and
// in one that has AI SDK 7 (each with @ai-sdk/openai-compatible at the matching major): the
// tarball installs next to either (its optional peer accepts both), and generateText and
// streamText through the real provider, against the scripted OpenAI-compatible server, get
// the memory block in their system prompt and have their conversation observed and extracted;
// and the memory tools run under each SDK's own mock model (V3 in AI SDK 6, V4 in AI SDK 7).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { consumerProject, ROOT } from "../helpers/pack.mjs";
import { startLlmServer } from "../helpers/llm-server.mjs";
import { runChild } from "../helpers/pipeline.mjs";

let llm;
before(async () => {
  // The chat model ("chat") answers from the prompt; the extraction model ("extractor")
  // turns the conversation it is sent into one fact naming the answer it saw.
  llm = await startLlmServer({
    fallback: ({ body }) => {
      if (body?.model === "chat")
        return { content: `Try the tasca near you. (${body.stream ? "streamed" : "generated"})` };
      const prompt = body?.messages?.at(-1)?.content ?? "";
      // Named by the kind of answer, not by copying it (a copy of the assistant's words is
      // dropped as one).
      const answer = /Assistant: .*\((\w+)\)/.exec(prompt)?.[1] ?? "no";
      return { json: { newFacts: [{ content: `Heard the ${answer} answer`, category: "context", confidence: 0.9 }] } };
    },
  });
});
after(() => llm?.close());

const APP = `
import { generateText, streamText, wrapLanguageModel } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { UserMemory } from "user-memory";
import { userMemoryMiddleware } from "user-memory/ai-sdk";

const baseURL = process.env.LLM_BASE_URL;
const memory = await UserMemory.open({ storage: "memory", debounceMs: 60_000, llm: { baseUrl: baseURL, model: "extractor" } });
await memory.addFact({ content: "Lives in Lisbon", category: "context" });
const provider = createOpenAICompatible({ name: "scripted", baseURL });
const model = wrapLanguageModel({ model: provider.chatModel("chat"), middleware: userMemoryMiddleware({ memory }) });
const messages = [{ role: "user", content: "Where should I eat tonight?" }];

const generated = await generateText({ model, system: "Be brief.", messages, providerOptions: { userMemory: { threadId: "gen" } } });
const result = streamText({ model, messages, providerOptions: { userMemory: { threadId: "stream" } } });
let streamed = "";
for await (const text of result.textStream) streamed += text;
await result.text;
const pending = memory.status().pending;
await memory.flush();
const facts = (await memory.get()).facts.map((f) => f.content).sort();
await memory.close();
console.log(JSON.stringify({ generated: generated.text, streamed, pending, facts }));
`;

for (const major of [6, 7]) {
  test(
    `AI SDK ${major}: the tarball installs next to ai@${major}; generateText and streamText inject and observe`,
    { timeout: 180_000 },
    async () => {
      const dir = consumerProject(`ai-sdk-${major}`);
      const installed = (name) =>
        JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")).version;
      assert.equal(installed("ai").split(".")[0], String(major));
      assert.equal(installed("@ai-sdk/openai-compatible").split(".")[0], String(major - 4));
      const from = llm.requests.length;
      const run = await runChild(APP, { cwd: dir, env: { LLM_BASE_URL: llm.baseUrl } });
      assert.equal(run.code, 0, run.stderr);
      const out = JSON.parse(run.stdout);

      assert.equal(out.generated, "Try the tasca near you. (generated)");
      assert.equal(out.streamed, "Try the tasca near you. (streamed)");
      assert.deepEqual(out.pending.sort(), ["gen", "stream"], "both calls were observed once they had answered");
      assert.deepEqual(out.facts, ["Heard the generated answer", "Heard the streamed answer", "Lives in Lisbon"]);

      const chats = llm.requests.slice(from).filter((r) => r.body?.model === "chat");
      assert.deepEqual(
        chats.map((r) => r.body.stream === true),
        [false, true],
      );
      for (const chat of chats) {
        const system = chat.body.messages
          .filter((m) => m.role === "system")
          .map((m) => m.content)
          .join("\n");
        assert.match(
          system,
          /<memory>[\s\S]*Lives in Lisbon[\s\S]*<\/memory>/,
          "the model's system prompt carries the memory block",
        );
      }
      assert.ok(
        chats[0].body.messages[0].content.startsWith("Be brief.\n\n<memory>"),
        "appended to the caller's system prompt",
      );
      const extractions = llm.requests.slice(from).filter((r) => r.body?.model === "extractor");
      assert.equal(extractions.length, 2);
      for (const e of extractions) assert.match(e.body.messages.at(-1).content, /User: Where should I eat tonight\?/);
    },
  );
}

const TOOLS_APP = `
import { generateText, stepCountIs } from "ai";
import * as mocks from "ai/test";
import { UserMemory } from "user-memory";
import { memoryTools } from "user-memory/ai-sdk";
import { toolCallingModel, toolResultsOf } from ${JSON.stringify(pathToFileURL(join(ROOT, "tests/helpers/ai-mock.mjs")).href)};

const Mock = mocks.MockLanguageModelV4 ?? mocks.MockLanguageModelV3;
const memory = await UserMemory.open({ storage: "memory", llm: async () => "{}" });
await memory.addFact({ content: "Works at Acme as a frontend developer" });
const model = toolCallingModel(Mock, [
  () => ({ tool: "searchMemory", input: { query: "where do I work" } }),
  (call) => ({ tool: "forget", input: { id: toolResultsOf(call)[0].facts[0].id } }),
  () => ({ tool: "remember", input: { content: "Works at Globex as a backend developer", category: "context" } }),
  () => ({ text: "Updated." }),
]);
const result = await generateText({ model, tools: memoryTools({ memory }), stopWhen: stepCountIs(5), messages: [{ role: "user", content: "I moved from Acme to Globex, backend now." }] });
const results = model.doGenerateCalls.slice(1).map((c) => toolResultsOf(c)[0]);
console.log(JSON.stringify({ mock: Mock.name, text: result.text, results, facts: (await memory.get()).facts.map((f) => [f.content, f.category]) }));
await memory.close();
`;

for (const major of [6, 7]) {
  test(
    `AI SDK ${major}: the SDK's mock model calls searchMemory, forget and remember`,
    { timeout: 180_000 },
    async () => {
      const dir = consumerProject(`ai-sdk-${major}`);
      const run = await runChild(TOOLS_APP, { cwd: dir });
      assert.equal(run.code, 0, run.stderr);
      const out = JSON.parse(run.stdout);
      assert.equal(out.mock, major === 7 ? "MockLanguageModelV4" : "MockLanguageModelV3");
      assert.equal(out.text, "Updated.");
      assert.equal(out.results[0].facts[0].content, "Works at Acme as a frontend developer");
      assert.equal(out.results[1].forgotten.content, "Works at Acme as a frontend developer");
      assert.equal(out.results[2].remembered.content, "Works at Globex as a backend developer");
      assert.deepEqual(out.facts, [["Works at Globex as a backend developer", "context"]]);
    },
  );
}
