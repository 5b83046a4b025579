// The `update` event tells exactly what changed, through the built package: a new fact is in
// `added` only, an edited one in `changed` only (with its new content), a removed one in
// `removed` only; an edit that changes nothing emits no event; another instance's write
// arrives with the same fields. (Mutants that dropped or misfiled `changed` passed every
// other test.)
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, eventually, freshAgent, openMemory, record, test } from "../helpers/pipeline.mjs";

after(closeAll);

const ids = (facts) => facts.map((f) => f.id);

test("added, changed and removed each name only the facts they are about", async () => {
  const memory = await openMemory({ agent: freshAgent("upd"), storage: "memory" });
  const rec = record(memory, ["update"]);
  const a = await memory.addFact({ content: "Keeps bees", category: "context" });
  const b = await memory.addFact({ content: "Lives in Ghent", category: "context" });
  const [first, second] = rec.of("update");
  assert.deepEqual([ids(first.added), first.changed, first.removed], [[a.id], [], []]);
  assert.deepEqual(ids(second.added), [b.id]);

  await memory.updateFact(a.id, { content: "Keeps two hives of bees" });
  const edit = rec.of("update")[2];
  assert.deepEqual([edit.added, edit.removed], [[], []], "an edit adds and removes nothing");
  assert.deepEqual(ids(edit.changed), [a.id], "only the edited fact is changed");
  assert.equal(edit.changed[0].content, "Keeps two hives of bees", "with its new content");
  assert.equal(edit.revision, 3);

  await memory.updateFact(b.id, { confidence: 0.5 });
  assert.deepEqual(ids(rec.of("update")[3].changed), [b.id], "a confidence change is a change too");

  await memory.updateFact(b.id, { confidence: 0.5 });
  assert.equal(rec.of("update").length, 4, "an edit to the same values emits no update");

  await memory.removeFact(a.id);
  const removal = rec.of("update")[4];
  assert.deepEqual([removal.added, removal.changed, removal.removed], [[], [], [a.id]]);
});

test("an edit made by another instance arrives as changed, not as added and removed", async () => {
  const agent = freshAgent("upd");
  const writer = await openMemory({ agent, storage: "memory" });
  const reader = await openMemory({ agent, storage: "memory" });
  const fact = await writer.addFact({ content: "Prefers tea" });
  await reader.get(); // the reader has seen the fact
  const rec = record(reader, ["update"]);
  await writer.updateFact(fact.id, { content: "Prefers green tea" });
  await reader.get(); // reads storage afresh, and finds the other instance's write
  await eventually(() => rec.of("update").length > 0, "the reader's update event");
  const ev = rec.of("update").at(-1);
  assert.ok(ev, "the other instance heard of the edit");
  assert.deepEqual([ev.added, ev.removed, ids(ev.changed)], [[], [], [fact.id]]);
  assert.equal(ev.changed[0].content, "Prefers green tea");
});
