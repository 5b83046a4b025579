// The update queue through the built package: debounce, per-thread dedupe, the timer firing
// by itself, resuming after a restart, failures (bad output, backoff, abandon), flush(),
// processDue()/nextDueAt() for schedulers. Real timers with small delays; every timing
// assertion is a lower bound or an ordering.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import {
  freshAgent,
  openMemory,
  record,
  recordingAdapter,
  sleep,
  test,
  turn,
  useLlmServer,
} from "../helpers/pipeline.mjs";

const llm = useLlmServer();

const endpoint = (extra = {}) => ({ baseUrl: llm.baseUrl, apiKey: "sk-q", model: "m", maxRetries: 0, ...extra });

async function open(options = {}) {
  const memory = await openMemory({ agent: freshAgent("queue"), storage: "memory", llm: endpoint(), ...options });
  return { memory, events: record(memory) };
}

test("three observe() of one thread inside the debounce window make one call, with the newest messages, after the quiet time", async () => {
  llm.reset();
  // 3 s: the two 60 ms gaps must stay inside the window even when a loaded machine stalls us.
  const { memory, events } = await open({ debounceMs: 3000 });
  llm.script.push(factsReply("Learns Rust"));
  const history = [];
  let lastObserve = 0;
  for (let i = 1; i <= 3; i++) {
    history.push(...turn(`message ${i} about Rust`, `answer ${i}`));
    lastObserve = Date.now();
    memory.observe("t1", [...history]);
    // fixed wait: turns 60 ms apart inside a 3 s debounce (the time the debounce measures)
    if (i < 3) await sleep(60);
  }
  const update = await events.next("update", (e) => e.reason === "extraction");
  assert.equal(update.threadId, "t1");
  assert.equal(llm.requests.length, 1, "one LLM call for the burst");
  const prompt = llm.prompt(0);
  for (let i = 1; i <= 3; i++)
    assert.ok(prompt.includes(`User: message ${i} about Rust`), `message ${i} in the prompt`);
  assert.ok(llm.requests[0].at - lastObserve >= 3000 - 20, "each observe() restarted the timer");
  assert.equal(events.of("queued").length, 3);
  assert.equal(events.of("queued").at(-1).threadId, "t1");
  assert.equal(events.of("queued").at(-1).pending, 1, "one entry per thread");
  await memory.close();
});

test("two threads in one window make two calls, one per thread", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 150 });
  llm.script.push(factsReply("Fact A"), factsReply("Fact B"));
  memory.observe("thread-a", turn("I am thread A", "ok"));
  memory.observe("thread-b", turn("I am thread B", "ok"));
  await events.next("update", (e) => e.reason === "extraction" && e.threadId === "thread-b");
  assert.equal(llm.requests.length, 2);
  assert.ok(llm.prompt(0).includes("I am thread A") && !llm.prompt(0).includes("I am thread B"));
  assert.ok(llm.prompt(1).includes("I am thread B") && !llm.prompt(1).includes("I am thread A"));
  const doc = await memory.get();
  assert.deepEqual(
    doc.facts.map((f) => [f.content, f.source]),
    [
      ["Fact A", "thread-a"],
      ["Fact B", "thread-b"],
    ],
  );
  await memory.close();
});

test("the timer processes the queue by itself (no flush) once debounceMs has passed", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 120 });
  llm.script.push(factsReply("Timer fact"));
  const observed = Date.now();
  memory.observe("t", turn("remember this", "ok"));
  const queued = events.of("queued")[0];
  assert.ok(queued.dueAt >= observed + 120, "queued event carries the due time");
  assert.ok(Math.abs(memory.nextDueAt() - queued.dueAt) < 1, "nextDueAt() is that time");
  await events.next("update", (e) => e.reason === "extraction");
  assert.ok(llm.requests[0].at >= observed + 120 - 20, "not before the debounce");
  assert.equal(memory.nextDueAt(), null, "nothing is due any more");
  assert.deepEqual(memory.status().pending, []);
  await memory.close();
});

test("a second instance on the same storage adapter resumes the entry the first one left queued at close()", async () => {
  llm.reset();
  const adapter = recordingAdapter();
  const agent = freshAgent("resume");
  const first = await openMemory({ agent, storage: adapter, debounceMs: 600_000, llm: endpoint() });
  assert.equal(await first.observe("t", turn("I moved to Chengdu", "Nice city")), true, "persisted");
  await first.close();
  assert.equal(llm.requests.length, 0, "the first instance never called the LLM");
  assert.ok(
    [...adapter.map.values()].some((v) => v.includes("I moved to Chengdu")),
    "the entry is in storage",
  );

  llm.script.push(factsReply("Lives in Chengdu"));
  const second = await openMemory({ agent, storage: adapter, debounceMs: 600_000, llm: endpoint() });
  assert.deepEqual(second.status().pending, ["t"], "resumed on open");
  assert.ok(second.nextDueAt() > Date.now(), "due by its own debounce, not lost");
  await second.flush();
  assert.ok(llm.prompt(0).includes("I moved to Chengdu"));
  assert.deepEqual(
    (await second.get()).facts.map((f) => f.content),
    ["Lives in Chengdu"],
  );
  await second.close();
});

test('storage: "memory" — a reopened instance\'s timer picks up the overdue entry by itself', async () => {
  llm.reset();
  const agent = freshAgent("resume-mem");
  const first = await openMemory({ agent, storage: "memory", debounceMs: 600_000, llm: endpoint() });
  await first.observe("t", turn("I play chess", "Nice"));
  await first.close();
  llm.script.push(factsReply("Plays chess"));
  // The entry was observed more than 50 ms ago by the time the second instance opens.
  // fixed wait: the entry must be older than the next instance's 50 ms debounce: a slow machine only adds age
  await sleep(60);
  const second = await openMemory({ agent, storage: "memory", debounceMs: 50, llm: endpoint() });
  const events = record(second);
  assert.ok(second.nextDueAt() <= Date.now(), "already due");
  await events.next("update", (e) => e.reason === "extraction");
  assert.deepEqual(
    (await second.get()).facts.map((f) => f.content),
    ["Plays chess"],
  );
  await second.close();
});

test("malformed model output: error event LLM_BAD_OUTPUT, memory unchanged, entry still queued with a 30 s backoff", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 600_000 });
  await memory.addFact({ content: "Likes tea" });
  const before = await memory.get();
  llm.script.push({ content: "Sure! The user seems nice. {not json" });
  memory.observe("t", turn("I use Rust", "ok"));
  const failedAt = Date.now();
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_BAD_OUTPUT");
  const ev = events.of("error")[0];
  assert.deepEqual([ev.code, ev.threadId, ev.attempt], ["LLM_BAD_OUTPUT", "t", 1]);
  assert.equal(ev.error.name, "UserMemoryError");
  assert.deepEqual(await memory.get(), before, "memory untouched");
  assert.deepEqual(memory.status().pending, ["t"], "still queued");
  assert.ok(memory.nextDueAt() >= failedAt + 30_000, "retried after the backoff");
  assert.ok(memory.nextDueAt() <= Date.now() + 30_000);
  // The retry (here forced by flush) applies the fixed reply.
  llm.script.push(factsReply("Uses Rust"));
  await memory.flush();
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Likes tea", "Uses Rust"],
  );
  assert.deepEqual(memory.status().pending, []);
  await memory.close();
});

test("failed attempts back off 30 s then 60 s, and after maxAttempts the entry is dropped with ABANDONED", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 600_000, maxAttempts: 3 });
  memory.observe("t", turn("hello", "hi"));
  for (const [attempt, backoff] of [
    [1, 30_000],
    [2, 60_000],
  ]) {
    llm.script.push({ status: 500 });
    const t = Date.now();
    await assert.rejects(memory.flush());
    assert.ok(memory.nextDueAt() >= t + backoff, `after attempt ${attempt}: due ≥ ${backoff} ms later`);
    assert.ok(memory.nextDueAt() <= Date.now() + backoff);
    assert.equal(events.of("error").at(-1).attempt, attempt);
  }
  llm.script.push({ status: 500 });
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP");
  assert.deepEqual(events.codes(), ["LLM_HTTP", "LLM_HTTP", "LLM_HTTP", "ABANDONED"]);
  const abandoned = events.of("error").at(-1);
  assert.deepEqual([abandoned.threadId, abandoned.attempt], ["t", 3]);
  assert.match(abandoned.message, /3 times/);
  assert.deepEqual(memory.status().pending, []);
  assert.equal(memory.nextDueAt(), null);
  await memory.close();
});

test("flush() tries every entry and rejects with the first failure; the others are applied", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 600_000 });
  llm.script.push({ status: 401 }, { content: "not a delta" }, factsReply("From t3"));
  memory.observe("t1", turn("one", "1"));
  memory.observe("t2", turn("two", "2"));
  memory.observe("t3", turn("three", "3"));
  await assert.rejects(memory.flush(), (e) => e.code === "LLM_HTTP" && e.status === 401);
  assert.equal(llm.requests.length, 3, "all three were tried");
  assert.deepEqual(events.codes(), ["LLM_HTTP", "LLM_BAD_OUTPUT"]);
  assert.deepEqual(
    events.of("error").map((e) => e.threadId),
    ["t1", "t2"],
  );
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["From t3"],
  );
  assert.deepEqual(memory.status().pending.sort(), ["t1", "t2"]);
  await memory.close();
});

test("flush() with nothing queued resolves with an empty report and makes no call", async () => {
  llm.reset();
  const { memory } = await open();
  assert.deepEqual(await memory.flush(), { processed: [], failed: [] });
  assert.equal(llm.requests.length, 0);
  await memory.close();
});

test("autoProcess: false — nothing runs by itself; processDue() processes only what nextDueAt() says is due", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 150, autoProcess: false });
  llm.script.push(factsReply("Due fact"));
  assert.equal(memory.nextDueAt(), null);
  const observed = Date.now();
  memory.observe("t", turn("hello", "hi"));
  const due = memory.nextDueAt();
  assert.ok(due >= observed + 150);
  assert.deepEqual(await memory.processDue(), { processed: [], failed: [] }, "not due yet");
  // fixed wait: an absence check past the due time (no timer may run it): a slow machine can only make it pass
  await sleep(due - Date.now() + 150);
  assert.equal(llm.requests.length, 0, "no timer ran it");
  assert.deepEqual(await memory.processDue(), { processed: ["t"], failed: [] });
  assert.equal(events.of("update").filter((e) => e.reason === "extraction").length, 1);
  assert.equal(memory.nextDueAt(), null);
  await memory.close();
});

test("processDue() reports failures in its result and as error events, without rejecting", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 0, autoProcess: false });
  llm.script.push({ status: 500 });
  memory.observe("t", turn("hello", "hi"));
  const report = await memory.processDue();
  assert.deepEqual(report, { processed: [], failed: ["t"] });
  assert.deepEqual(events.codes(), ["LLM_HTTP"]);
  await memory.close();
});

test("an observe() during processing is kept for the next round (its newer messages are not lost)", async () => {
  llm.reset();
  const { memory, events } = await open({ debounceMs: 600_000 });
  llm.script.push({ ...factsReply("First"), delayMs: 150 }, factsReply("Second"));
  memory.observe("t", turn("first turn", "ok"));
  const flushing = memory.flush();
  await llm.waitForRequests(1);
  memory.observe("t", [...turn("first turn", "ok"), ...turn("second turn", "ok")]);
  await flushing;
  assert.deepEqual(memory.status().pending, ["t"], "the newer history is still queued");
  await memory.flush();
  assert.equal(llm.requests.length, 2);
  assert.ok(llm.prompt(1).includes("second turn"));
  assert.equal(events.of("update").filter((e) => e.reason === "extraction").length, 2);
  await memory.close();
});

test("storage failing when the timer fires: one error event (STORAGE_FAILED) and a backoff, not a busy loop", async () => {
  llm.reset();
  const adapter = recordingAdapter();
  let broken = false;
  let failedWrites = 0;
  const set = adapter.set;
  adapter.set = async (k, v) => {
    if (broken) {
      failedWrites++;
      throw new Error("disk gone");
    }
    return set(k, v);
  };
  const memory = await openMemory({ agent: freshAgent("flaky"), storage: adapter, debounceMs: 50, llm: endpoint() });
  const events = record(memory);
  await memory.observe("t", turn("hello", "hi"));
  broken = true;
  const ev = await events.next("error");
  assert.equal(ev.code, "STORAGE_FAILED");
  assert.match(ev.message, /disk gone/);
  // fixed wait: an absence check (no retry before the backoff): a slow machine can only make it pass
  await sleep(500);
  assert.equal(failedWrites, 1, "the timer did not retry at once");
  assert.deepEqual(events.codes(), ["STORAGE_FAILED"]);
  assert.ok(memory.nextDueAt() <= Date.now(), "the entry is still due (and will be retried after the backoff)");
  assert.equal(llm.requests.length, 0);
  broken = false;
  await memory.close();
});
