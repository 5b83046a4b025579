// The message shapes apps pass, through the built package: AI SDK UI messages from useChat
// ({ role, parts }), AI SDK model messages with tool-call and file parts, and the `debug`
// event that says why observe() queued nothing.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

/** Memory whose extraction LLM records the conversations it is sent. */
async function open(options = {}) {
  const prompts = [];
  const memory = await openMemory({
    agent: freshAgent("shapes"),
    storage: "memory",
    debounceMs: 60_000,
    llm: async ({ prompt }) => (prompts.push(prompt), JSON.stringify({ newFacts: [] })),
    ...options,
  });
  const debug = [];
  memory.on("debug", (e) => debug.push(e));
  return { memory, prompts, debug };
}

/** The conversation part of an extraction prompt (after the memory JSON). */
const conversation = (prompt) => prompt.slice(prompt.search(/^User: /m)).split("</conversation>")[0];

test("useChat UI messages: text parts are remembered, the tool step before the answer and reasoning are not", async () => {
  const { memory, prompts } = await open();
  const ui = [
    { id: "u1", role: "user", parts: [{ type: "text", text: "What's the weather where I live? I live in Lisbon." }] },
    {
      id: "a1",
      role: "assistant",
      parts: [
        { type: "step-start" },
        { type: "text", text: "Let me check the forecast." },
        {
          type: "tool-weather",
          toolCallId: "c1",
          state: "output-available",
          input: { city: "Lisbon" },
          output: { sky: "clear", secret: "TOOL-OUTPUT" },
        },
        { type: "step-start" },
        { type: "reasoning", text: "clear means sunny" },
        { type: "text", text: "Sunny, 24 °C." },
      ],
    },
  ];
  assert.equal(await memory.observe("ui", ui), true);
  await memory.flush();
  assert.equal(
    conversation(prompts[0]).trim(),
    "User: What's the weather where I live? I live in Lisbon.\n\nAssistant: Sunny, 24 °C.",
  );
  assert.doesNotMatch(prompts[0], /TOOL-OUTPUT|Let me check|clear means sunny/);
});

test("UI messages: a turn of nothing but a file is forgotten with its answer; text next to a file stays", async () => {
  const { memory, prompts } = await open();
  const file = {
    type: "file",
    mediaType: "application/pdf",
    filename: "tax.pdf",
    url: "data:application/pdf;base64,JVBERi0xLjQK",
  };
  const ui = [
    { id: "1", role: "user", parts: [file] },
    { id: "2", role: "assistant", parts: [{ type: "text", text: "This is a 2024 tax form." }] },
    { id: "3", role: "user", parts: [file, { type: "text", text: "I am self-employed, does this apply?" }] },
    { id: "4", role: "assistant", parts: [{ type: "text", text: "Yes, section C." }] },
  ];
  assert.equal(await memory.observe("files", ui), true);
  await memory.flush();
  assert.equal(
    conversation(prompts[0]).trim(),
    "User: I am self-employed, does this apply?\n\nAssistant: Yes, section C.",
  );
  assert.doesNotMatch(prompts[0], /tax form|JVBERi/);
});

test("AI SDK model messages: an assistant message ending with a tool-call part is an intermediate step", async () => {
  const { memory, prompts } = await open();
  const model = [
    { role: "user", content: [{ type: "text", text: "Book me a train to Oslo, I never fly." }] },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Searching trains." },
        { type: "tool-call", toolCallId: "t1", toolName: "trains", input: {} },
      ],
    },
    {
      role: "tool",
      content: [{ type: "tool-result", toolCallId: "t1", toolName: "trains", output: { type: "json", value: [] } }],
    },
    { role: "assistant", content: [{ type: "text", text: "The night train leaves at 22:10." }] },
  ];
  assert.equal(await memory.observe("model", model), true);
  await memory.flush();
  assert.equal(
    conversation(prompts[0]).trim(),
    "User: Book me a train to Oslo, I never fly.\n\nAssistant: The night train leaves at 22:10.",
  );
});

test("observe() resolving false comes with a debug event saying why", async () => {
  const { memory, debug } = await open();
  const cases = [
    [
      "only-user",
      [{ role: "user", content: "I live in Porto" }],
      "no-answer",
      /no final assistant answer survived filtering \(1 message: 1 user\)/,
    ],
    [
      "no-role",
      [{ content: "I live in Porto" }, { role: "assistant", content: "Nice" }],
      "no-user-message",
      /1 without a known `role` or `type`/,
    ],
    ["empty", [], "empty", /no messages/],
    [
      "tool-step",
      [
        { role: "user", parts: [{ type: "text", text: "Search" }] },
        { role: "assistant", parts: [{ type: "tool-search", state: "input-available" }] },
      ],
      "no-answer",
      /1 assistant tool step/,
    ],
  ];
  for (const [thread, messages, reason, message] of cases) {
    assert.equal(await memory.observe(thread, messages), false, thread);
    const e = debug.at(-1);
    assert.deepEqual([e.type, e.code, e.threadId, e.reason], ["debug", "NOT_QUEUED", thread, reason], thread);
    assert.match(e.message, message, thread);
    assert.ok(e.message.startsWith(`observe("${thread}") queued nothing: `), e.message);
  }
  memory.configure({ enabled: false });
  assert.equal(
    await memory.observe("paused", [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]),
    false,
  );
  assert.deepEqual(
    [debug.at(-1).reason, debug.at(-1).message],
    ["paused", 'observe("paused") queued nothing: learning is paused (`enabled: false`)'],
  );
  assert.equal(debug.length, cases.length + 1, "one event per observe() that queued nothing");
  memory.configure({ enabled: true });
  assert.equal(
    await memory.observe("ok", [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]),
    true,
  );
  assert.equal(debug.length, cases.length + 1, "nothing for a queued conversation");
});

test("inject() reads UI messages too: the query is the text of their parts", async () => {
  const { memory } = await open();
  await memory.addFact({ content: "Keeps a rabbit called Tangyuan", confidence: 0.5 });
  await memory.addFact({ content: "Works as a tax advisor", confidence: 0.95 });
  const e = await memory.explain([
    { id: "u", role: "user", parts: [{ type: "text", text: "what should my rabbit eat?" }] },
  ]);
  assert.equal(
    e.facts[0].content,
    "Keeps a rabbit called Tangyuan",
    "the rabbit fact ranks first for a rabbit question",
  );
  assert.ok(e.facts[0].similarity > 0);
});

test("a message marked hide_from_ui never reaches the extraction prompt, in every message shape", async () => {
  const reminder = "<system_reminder>todo list: HIDDEN-TODO-1, HIDDEN-TODO-2</system_reminder>";
  const hide = { hide_from_ui: true };
  const shapes = {
    plain: { role: "user", content: reminder, additional_kwargs: hide },
    langchain: { type: "human", content: reminder, additional_kwargs: hide },
    openai: { role: "user", content: [{ type: "text", text: reminder }], additional_kwargs: hide },
    "ai-sdk model": { role: "user", content: [{ type: "text", text: reminder }], additional_kwargs: hide },
    "ai-sdk ui": { id: "h1", role: "user", parts: [{ type: "text", text: reminder }], metadata: hide },
  };
  for (const [shape, hidden] of Object.entries(shapes)) {
    const { memory, prompts } = await open();
    const said = { role: "user", content: `I moved to Porto last spring (${shape}).` };
    const answer = { role: "assistant", content: "Porto is lovely." };
    assert.equal(await memory.observe(`hidden-${shape}`, [hidden, said, answer]), true, shape);
    await memory.flush();
    assert.equal(prompts.length, 1, shape);
    assert.doesNotMatch(prompts[0], /HIDDEN-TODO|system_reminder/, shape);
    assert.match(conversation(prompts[0]), new RegExp(`I moved to Porto last spring \\(${shape}\\)`), shape);
    // The same message without the flag is the user's words and is sent.
    const { memory: plain, prompts: sent } = await open();
    const own = { role: "user", content: "HIDDEN-TODO-1 is my project's name." };
    assert.equal(await plain.observe(`shown-${shape}`, [own, said, answer]), true, shape);
    await plain.flush();
    assert.match(sent[0], /HIDDEN-TODO-1 is my project's name/, shape);
  }
});
