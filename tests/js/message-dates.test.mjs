// The conversation's date in the extraction prompt, through the built package: a message's
// own time in each shape apps pass (a Date, an ISO string with its offset, epoch seconds or
// milliseconds, on the message or in its metadata), observe()'s `at` for a backfill, else
// the time of observe(); a bad `at` is a clear error; and a dated reply stores happenedAt.
import { after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshAgent, openMemory, test } from "../helpers/pipeline.mjs";

after(closeAll);

/** Memory whose extraction LLM records its prompts and answers with `reply`. */
async function open(reply = { newFacts: [] }) {
  const prompts = [];
  const memory = await openMemory({
    agent: freshAgent("dates"),
    storage: "memory",
    debounceMs: 60_000,
    llm: async ({ prompt }) => (prompts.push(prompt), JSON.stringify(reply)),
  });
  return { memory, prompts };
}

/** The date line of an extraction prompt, or null. */
const dateOf = (prompt) => prompt.match(/New conversation \(its date and time: ([^)]*\)[^)]*)\):/)?.[1] ?? null;

const said = "Yesterday I went to an LGBTQ support group.";
const answer = { role: "assistant", content: "That sounds meaningful. How was it?" };

test("each message shape's own time dates the conversation, in the writer's own calendar", async () => {
  const shapes = [
    [{ role: "user", content: said, createdAt: new Date("2023-05-08T11:56:00Z") }, "2023-05-08 (Monday) 11:56 UTC"],
    [{ role: "user", content: said, createdAt: "2023-05-08T13:56:00+02:00" }, "2023-05-08 (Monday) 13:56 UTC+02:00"],
    [{ role: "user", content: said, timestamp: 1683546960 }, "2023-05-08 (Monday) 11:56 UTC"],
    [
      { type: "human", content: said, additional_kwargs: { created_at: "2023-05-07T23:30:00-08:00" } },
      "2023-05-07 (Sunday) 23:30 UTC-08:00",
    ],
    [
      { id: "u1", role: "user", parts: [{ type: "text", text: said }], metadata: { createdAt: 1683546960000 } },
      "2023-05-08 (Monday) 11:56 UTC",
    ],
    [{ role: "user", content: [{ type: "text", text: said }], date: "2023-05-08" }, "2023-05-08 (Monday) 00:00 UTC"],
  ];
  for (const [message, want] of shapes) {
    const { memory, prompts } = await open();
    assert.equal(await memory.observe("t", [message, answer]), true);
    await memory.flush();
    assert.equal(dateOf(prompts[0]), want, JSON.stringify(message));
  }
});

test("observe()'s `at` dates a backfill; without any time the prompt says when observe() ran", async () => {
  const { memory, prompts } = await open();
  await memory.observe("old", [{ role: "user", content: said }, answer], { at: "2022-01-15T09:00:00Z" });
  await memory.observe("older", [{ role: "user", content: said }, answer], {
    at: new Date(Date.UTC(2021, 6, 4, 18, 5)),
  });
  const before = Date.now();
  await memory.observe("now", [{ role: "user", content: said }, answer]);
  await memory.flush();
  const dates = prompts.map(dateOf);
  assert.ok(dates.includes("2022-01-15 (Saturday) 09:00 UTC"), dates.join(" / "));
  assert.ok(dates.includes("2021-07-04 (Sunday) 18:05 UTC"), dates.join(" / "));
  const today = new Date(before).toISOString().slice(0, 10);
  assert.ok(
    dates.some((d) => d.startsWith(today)),
    `${today}: ${dates.join(" / ")}`,
  );
});

test("a bad `at` is INVALID_INPUT and queues nothing", async () => {
  const { memory } = await open();
  for (const at of ["last week", new Date("nope"), -5, { when: 1 }]) {
    assert.throws(
      () => memory.observe("t", [{ role: "user", content: said }, answer], { at }),
      (e) => e.code === "INVALID_INPUT" && /`at`/.test(e.message),
      String(at),
    );
  }
  assert.throws(() => memory.observe("t", [{ role: "user", content: said }, answer], "2023-05-08"), {
    code: "INVALID_INPUT",
  });
  assert.deepEqual(memory.status().pending, []);
});

test("a dated fact keeps happenedAt; a date the parser cannot read is skipped, the fact stored", async () => {
  const { memory } = await open({
    newFacts: [
      {
        content: "Went to an LGBTQ support group on 2023-05-07",
        category: "context",
        confidence: 0.9,
        happenedAt: "2023-05-07",
      },
      { content: "Is a transgender woman", category: "context", confidence: 0.9, happenedAt: "recently" },
    ],
  });
  const processed = [];
  memory.on("processed", (e) => processed.push(e));
  await memory.observe("t", [
    { role: "user", content: `${said} I'm a transgender woman.`, createdAt: "2023-05-08T13:56:00Z" },
    answer,
  ]);
  await memory.flush();
  const facts = (await memory.get()).facts;
  assert.equal(facts.find((f) => /support group/.test(f.content))?.happenedAt, "2023-05-07");
  const other = facts.find((f) => /transgender/.test(f.content));
  assert.ok(other && !("happenedAt" in other), JSON.stringify(other));
  const skipped = processed.flatMap((e) => e.skipped);
  assert.deepEqual(
    skipped.map((s) => [s.path, s.reason]),
    [["newFacts[1].happenedAt", "invalid"]],
  );
});
