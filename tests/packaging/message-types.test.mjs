// The message arrays apps already have, against their real packages, from the packed
// tarball: `tsc --strict` accepts AI SDK 6 and 7 `ModelMessage[]` / `UIMessage[]`, the OpenAI
// SDK's `ChatCompletionMessageParam[]` and LangChain's `BaseMessage[]` for observe(),
// inject() and explain() (and still rejects what is no message); and at run time LangChain
// message objects and OpenAI-shaped messages are remembered as they are.
import { test } from "node:test";
import assert from "node:assert/strict";
import { consumerProject } from "../helpers/pack.mjs";
import { NODE_TYPES, tsc as compile } from "../helpers/typescript.mjs";
import { runChild } from "../helpers/pipeline.mjs";

/** tsc --strict (skipLibCheck: false) on `source` as `file` in `dir`. */
const tsc = (dir, file, source) => compile(dir, [file], { lib: ["es2022", "dom"], ...NODE_TYPES }, { [file]: source });

/** A consumer passing `type` arrays (declared by `declarations`) to every method that takes messages. */
const consumer = (imports, declarations, names) => `${imports}
import { UserMemory } from "user-memory";
${declarations}
export async function use(memory: UserMemory): Promise<void> {
${names.map((n) => `  await memory.observe("t", ${n});\n  await memory.inject(${n});\n  await memory.explain(${n});`).join("\n")}
  // @ts-expect-error a string is no message
  await memory.observe("t", ["I live in Porto"]);
  // @ts-expect-error neither is a number
  await memory.inject([42]);
  // @ts-expect-error content is text or parts
  await memory.inject([{ role: "user", content: 42 }]);
}
`;

for (const major of [6, 7]) {
  test(`tsc --strict: AI SDK ${major} ModelMessage[] and UIMessage[] are messages`, { timeout: 180_000 }, () => {
    const dir = consumerProject(`ai-sdk-${major}`);
    tsc(
      dir,
      "messages.ts",
      consumer(
        `import type { ModelMessage, UIMessage } from "ai";`,
        `declare const model: ModelMessage[];\ndeclare const ui: UIMessage[];\nconst literal: ModelMessage[] = [{ role: "user", content: [{ type: "text", text: "hi" }] }, { role: "assistant", content: [{ type: "tool-call", toolCallId: "1", toolName: "x", input: {} }] }];`,
        ["model", "ui", "literal"],
      ),
    );
  });
}

test(
  "tsc --strict: OpenAI's ChatCompletionMessageParam[] and LangChain's BaseMessage[] are messages",
  { timeout: 180_000 },
  () => {
    const dir = consumerProject("message-types");
    tsc(
      dir,
      "messages.ts",
      consumer(
        `import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";\nimport { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";`,
        `declare const openai: ChatCompletionMessageParam[];\ndeclare const langchain: BaseMessage[];\nconst made = [new HumanMessage("I live in Porto"), new AIMessage("Nice")];`,
        ["openai", "langchain", "made"],
      ),
    );
  },
);

test(
  "LangChain message objects and OpenAI-shaped messages are remembered as they are",
  { timeout: 120_000 },
  async () => {
    const dir = consumerProject("message-types");
    const run = await runChild(
      `import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
     import { UserMemory } from "user-memory";
     const prompts = [];
     const memory = await UserMemory.open({ storage: "memory", llm: async ({ prompt }) => (prompts.push(prompt), '{"newFacts":[]}') });
     const langchain = [
       new SystemMessage("Be brief."),
       new HumanMessage("I live in Porto and cycle to work."),
       new AIMessage({ content: "", tool_calls: [{ id: "c1", name: "weather", args: { city: "Porto" } }] }),
       new ToolMessage({ content: "rain", tool_call_id: "c1" }),
       new AIMessage("Take a rain jacket."),
     ];
     const openai = [
       { role: "developer", content: "Be brief." },
       { role: "user", content: [{ type: "text", text: "I am vegetarian." }, { type: "image_url", image_url: { url: "https://example.invalid/a.png" } }] },
       { role: "assistant", content: null, tool_calls: [{ id: "c2", type: "function", function: { name: "menu", arguments: "{}" } }] },
       { role: "tool", tool_call_id: "c2", content: "[]" },
       { role: "assistant", content: [{ type: "text", text: "Try the lentil soup." }] },
     ];
     const queued = [await memory.observe("lc", langchain), await memory.observe("oa", openai)];
     await memory.flush();
     await memory.close();
     const conv = (p) => p.slice(p.search(/^User: /m)).split("</conversation>")[0].trim();
     console.log(JSON.stringify({ queued, conversations: prompts.map(conv) }));`,
      { cwd: dir },
    );
    assert.equal(run.code, 0, run.stderr.slice(-2000));
    const out = JSON.parse(run.stdout);
    assert.deepEqual(out.queued, [true, true]);
    assert.deepEqual(out.conversations, [
      "User: I live in Porto and cycle to work.\n\nAssistant: Take a rain jacket.",
      "User: I am vegetarian.\n\nAssistant: Try the lentil soup.",
    ]);
  },
);
