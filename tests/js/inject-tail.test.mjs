// inject() and explain() read only the end of a long conversation across the boundary: the
// messages that decide the query (more user turns than `recentTurns`), not the whole history
// a chat hands over on every turn. src/wasm/convert.rs `query_messages`; the rule itself is
// proven natively (tests/inject.rs, `tail`).
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

async function open() {
  const memory = await openMemory({ agent: freshAgent("tail"), storage: "memory", llm: async () => "{}" });
  await memory.addFact({ content: "Keeps a sourdough starter", confidence: 0.6 });
  await memory.addFact({ content: "Rides a road bike to work", confidence: 0.6 });
  await memory.addFact({ content: "Plays chess on Sundays", confidence: 0.95 });
  return memory;
}

/** `message` whose property reads are counted into `reads`. */
const counted = (message, reads) =>
  new Proxy(message, {
    get(target, key) {
      reads.n++;
      return Reflect.get(target, key);
    },
  });

const turns = (n, topic) =>
  Array.from({ length: n }, (_, i) => [
    { role: "user", content: `question ${i} about ${topic(i)}` },
    { role: "assistant", content: `answer ${i}` },
  ]).flat();

test("a long conversation: the early messages are not read, the block is that of its last turns", async () => {
  const memory = await open();
  const reads = { n: 0 };
  const early = turns(40, () => "sourdough").map((m) => counted(m, reads));
  const late = turns(4, () => "my bike");
  const block = await memory.inject([...early, ...late]);
  assert.equal(reads.n, 0, "no early message was read");
  assert.equal(block, await memory.inject(late));
  assert.ok(block.indexOf("road bike") < block.indexOf("sourdough"), block);
  const { facts } = await memory.explain([...early, ...late]);
  assert.equal(reads.n, 0, "explain() reads the same end");
  assert.match(facts[0].content, /road bike/);
});

test("fewer user turns than recentTurns in the end: the reading goes back as far as they reach", async () => {
  const memory = await open();
  // The first user message is the only one with a topic, then 30 tool steps and answers.
  const steps = Array.from({ length: 30 }, (_, i) =>
    i % 2 ? { role: "tool", content: "ok" } : { role: "assistant", content: "", tool_calls: [{ id: `c${i}` }] },
  );
  const messages = [
    { role: "user", content: "tips for my sourdough starter?" },
    ...steps,
    { role: "assistant", content: "Sure." },
  ];
  const block = await memory.inject(messages);
  assert.ok(block.indexOf("sourdough") < block.indexOf("chess"), "the first message is the query: " + block);
  // An acknowledgement at the end is no turn of its own: the question before it still counts.
  const acked = await memory.inject([
    ...turns(3, () => "chess"),
    { role: "user", content: "my bike?" },
    { role: "user", content: "thanks!" },
  ]);
  assert.ok(acked.indexOf("road bike") < acked.indexOf("sourdough"), acked);
});
