// The LLM as a plain JS function `async ({ system, prompt, signal }) => string` (any SDK, a server
// proxy, Workers AI …), through the built package.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, record, test, turn } from "../helpers/pipeline.mjs";

after(closeAll);

const delta = (...facts) =>
  JSON.stringify({
    newFacts: facts.map((content) => ({ content, category: "knowledge", confidence: 0.9 })),
    factsToRemove: [],
  });

async function open(fn) {
  const memory = await openMemory({ agent: freshAgent("fn"), storage: "memory", debounceMs: 600_000, llm: fn });
  return { memory, events: record(memory) };
}

test("function LLM: called once with { system, prompt, signal } holding the instructions, memory and conversation; its string reply is applied", async () => {
  const calls = [];
  const { memory, events } = await open(async (req) => {
    calls.push(req);
    return delta("Keeps bees");
  });
  await memory.addFact({ content: "Has a garden" });
  memory.observe("t", turn("I keep three hives of bees", "Sweet!"));
  await memory.flush();
  assert.equal(calls.length, 1);
  assert.deepEqual(Object.keys(calls[0]).sort(), ["prompt", "signal", "system"]);
  assert.ok(calls[0].signal instanceof AbortSignal && !calls[0].signal.aborted, "a live AbortSignal");
  assert.match(calls[0].system, /newFacts/);
  assert.ok(calls[0].prompt.includes("User: I keep three hives of bees"));
  assert.ok(calls[0].prompt.includes("Has a garden"));
  assert.equal(events.of("update").find((e) => e.reason === "extraction").added[0].content, "Keeps bees");
  await memory.close();
});

test("function LLM: a synchronous function returning a string works too", async () => {
  const { memory } = await open(() => delta("Sync fact"));
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Sync fact"],
  );
  await memory.close();
});

test("function LLM: an AI-SDK-like result { text, usage, … } is read from .text", async () => {
  const { memory } = await open(async () => ({
    text: "```json\n" + delta("From the AI SDK") + "\n```",
    usage: { inputTokens: 10 },
    finishReason: "stop",
  }));
  memory.observe("t", turn("hello", "hi"));
  await memory.flush();
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["From the AI SDK"],
  );
  await memory.close();
});

test("function LLM: a function that throws (synchronously or by rejecting) is LLM_FAILED, the entry stays queued", async () => {
  for (const fn of [
    () => {
      throw new Error("provider exploded");
    },
    async () => {
      throw new Error("provider exploded");
    },
  ]) {
    const { memory, events } = await open(fn);
    memory.observe("t", turn("hello", "hi"));
    await assert.rejects(memory.flush(), (e) => {
      assert.equal(e.code, "LLM_FAILED");
      assert.match(e.message, /provider exploded/);
      return true;
    });
    assert.deepEqual(events.codes(), ["LLM_FAILED"]);
    assert.equal(events.of("error")[0].threadId, "t");
    assert.deepEqual(memory.status().pending, ["t"]);
    await memory.close();
  }
});

test("function LLM: an error carrying one of our codes keeps it (LLM_HTTP with status)", async () => {
  const { memory } = await open(async () => {
    throw Object.assign(new Error("rate limited upstream"), { code: "LLM_HTTP", status: 429 });
  });
  memory.observe("t", turn("hello", "hi"));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && e.status === 429);
  await memory.close();
});

test("function LLM: a reply that is not text (a number, null) or has no delta is LLM_BAD_OUTPUT, memory unchanged", async () => {
  for (const reply of [42, null, "no json here"]) {
    const { memory } = await open(async () => reply);
    const before = await memory.get();
    memory.observe("t", turn("hello", "hi"));
    await assert.rejects(memory.flush(), (e) => e.code === "LLM_BAD_OUTPUT", `reply ${JSON.stringify(reply)}`);
    assert.deepEqual(await memory.get(), before);
    await memory.close();
  }
});

test("function LLM: close() aborts its signal and stops waiting for a function that never settles; the entry stays queued for the next open()", async () => {
  const agent = freshAgent("fn-close");
  let seen;
  const hanging = (req) => {
    seen = req;
    return new Promise(() => {}); // ignores the signal and never settles
  };
  const first = await openMemory({ agent, storage: "memory", debounceMs: 600_000, llm: hanging });
  const errors = record(first, ["error"]);
  first.observe("t", turn("I keep three hives of bees", "Sweet!"));
  const flushed = first.flush().then(
    () => "resolved",
    (e) => e.code,
  );
  while (!seen) await new Promise((r) => setTimeout(r, 5));
  await first.close();
  assert.equal(seen.signal.aborted, true, "close() aborted the signal");
  assert.equal(await flushed, "CLOSED", "the flush waiting on the function ends with CLOSED");
  assert.equal(errors.of("error").length, 0, "a call cancelled by close() is not a failure");

  const second = await openMemory({
    agent,
    storage: "memory",
    debounceMs: 600_000,
    llm: async () => delta("Keeps bees"),
  });
  assert.deepEqual(second.status().pending, ["t"], "the entry is still queued, unclaimed");
  await second.flush();
  assert.deepEqual(
    (await second.get()).facts.map((f) => f.content),
    ["Keeps bees"],
  );
  await second.close();
});
