// Lifecycle of the queue in real Node processes: errors nobody listens to never become
// unhandled rejections; close() lets the process exit by itself (entry still queued, a call
// in flight, a Retry-After wait); observe()/flush() after close() fail with CLOSED.
//
// The children run against the scripted server of this (parent) process, so nothing but the
// library itself can keep them alive. "Exits by itself" is checked against the timer that
// would have kept it alive: the child must be gone before that timer could have fired.
import assert from "node:assert/strict";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, runChild, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();

const conv = JSON.stringify(turn("I keep bees", "Sweet"));

test("errors with no listener never become unhandled rejections (--unhandled-rejections=strict exits 0)", async () => {
  llm.reset();
  // Every call fails: 500 for the transport, then a storage adapter that throws.
  const code = `
    import { UserMemory } from "user-memory";
    const llm = { baseUrl: process.env.LLM, model: "m", maxRetries: 0 };
    const conv = ${conv};
    // 1. Background (timer) failures, observe() promises never awaited, no error listener.
    const a = await UserMemory.open({ agent: "a", storage: "memory", debounceMs: 20, llm });
    a.observe("t1", conv);
    a.observe("t2", conv);
    // Until both attempts have failed (the entries wait out their 30 s backoff).
    while (!(a.nextDueAt() - Date.now() > 10000 && !a.status().processing)) await new Promise((r) => setTimeout(r, 10));
    // 2. flush() rejects (that rejection is the caller's, and is handled here).
    a.observe("t3", conv);
    await a.flush().then(() => console.log("flush resolved?!"), (e) => console.log("flush rejected " + e.code));
    // 3. A storage adapter that fails on write: the un-awaited observe() promise rejects.
    let writes = 0;
    const broken = { get: async () => null, set: async () => { writes++; throw new Error("disk on fire"); }, delete: async () => {} };
    const b = await UserMemory.open({ agent: "b", storage: broken, debounceMs: 20, llm });
    b.observe("t", conv);
    while (writes === 0) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setImmediate(r)); // the rejected observe() promise is settled by now
    await a.close();
    // close() writes what is pending: with this adapter that fails, and close() says so.
    await b.close().then(() => console.log("close resolved?!"), (e) => console.log("close rejected " + e.code));
    console.log("done");
  `;
  const r = await runChild(code, { args: ["--unhandled-rejections=strict"], env: { LLM: llm.baseUrl } });
  assert.equal(r.stderr.includes("Unhandled") || r.stderr.includes("unhandled"), false, r.stderr);
  assert.equal(r.code, 0, `exit code ${r.code} ${r.signal ?? ""}\n${r.stderr}`);
  assert.match(r.stdout, /flush rejected LLM_HTTP/);
  assert.match(r.stdout, /close rejected STORAGE_FAILED/);
  assert.match(r.stdout, /done/);
  assert.ok(llm.requests.length >= 3, `the failing server was called (${llm.requests.length})`);
});

test("close() lets a Node process exit by itself while an entry is still queued (30 s debounce)", async () => {
  llm.reset();
  const code = `
    import { UserMemory } from "user-memory";
    const m = await UserMemory.open({ storage: "memory", debounceMs: 30000, llm: { baseUrl: process.env.LLM, model: "m" } });
    console.log("observed " + Date.now());
    await m.observe("t", ${conv});
    console.log("pending " + JSON.stringify(m.status().pending));
    await m.close();
    console.log("closed");
  `;
  const r = await runChild(code, { env: { LLM: llm.baseUrl } });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /pending \["t"\]/);
  const observedAt = Number(/observed (\d+)/.exec(r.stdout)[1]);
  assert.ok(
    r.exitedAt < observedAt + 30_000,
    `exited ${r.exitedAt - observedAt} ms after observe(): the 30 s timer did not hold it`,
  );
  assert.equal(llm.requests.length, 0, "close() does not process the queue");
});

test("close() aborts an LLM call in flight: the process exits before the request's timeout", async () => {
  llm.reset();
  llm.script.push({ hang: true });
  const code = `
    import { UserMemory } from "user-memory";
    const m = await UserMemory.open({ storage: "memory", debounceMs: 0, llm: { baseUrl: process.env.LLM, model: "m", timeoutMs: 30000 } });
    const errors = [];
    m.on("error", (e) => errors.push(e.code));
    m.observe("t", ${conv});
    // The parent says "go" once its server has the request (which it never answers).
    await new Promise((r) => process.once("message", r));
    process.disconnect();
    await m.close();
    console.log("closed errors=" + JSON.stringify(errors));
  `;
  const r = await runChild(code, { env: { LLM: llm.baseUrl }, go: llm.waitForRequests(1) });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(llm.requests.length, 1, "the call was in flight");
  const started = llm.requests[0].at;
  assert.ok(
    r.exitedAt < started + 30_000,
    `exited ${r.exitedAt - started} ms after the request: its 30 s timeout did not hold it`,
  );
  assert.match(r.stdout, /closed errors=\[\]/, "a call cancelled by close() is not reported as a failure");
});

test("close() during a Retry-After wait: the process exits before the wait would have ended", async () => {
  llm.reset();
  llm.script.push({ status: 429, headers: { "retry-after": "30" } });
  const code = `
    import { UserMemory } from "user-memory";
    const m = await UserMemory.open({ storage: "memory", debounceMs: 0, llm: { baseUrl: process.env.LLM, model: "m", maxRetries: 2 } });
    // Notes when the 429 has arrived here: the library fetches through globalThis.
    let answered = false;
    const realFetch = globalThis.fetch;
    globalThis.fetch = (...args) => realFetch(...args).then((res) => ((answered = true), res));
    m.observe("t", ${conv});
    await new Promise((r) => process.once("message", r));
    process.disconnect();
    // The 429 is in: the client reads its Retry-After and starts the 30 s wait.
    while (!answered) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setImmediate(r));
    await m.close();
    console.log("closed");
  `;
  const r = await runChild(code, { env: { LLM: llm.baseUrl }, go: llm.waitForRequests(1) });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(llm.requests.length, 1, "the 429 was answered and no retry was sent");
  const rateLimited = llm.requests[0].at;
  assert.ok(
    r.exitedAt < rateLimited + 30_000,
    `exited ${r.exitedAt - rateLimited} ms after the 429: the 30 s Retry-After wait did not hold it`,
  );
});

test("a timed-out request leaves no timer behind: the process exits right after the failure", async () => {
  llm.reset();
  llm.script.push({ hang: true });
  const code = `
    import { UserMemory } from "user-memory";
    const m = await UserMemory.open({ storage: "memory", debounceMs: 600000, llm: { baseUrl: process.env.LLM, model: "m", timeoutMs: 150, maxRetries: 0 } });
    m.observe("t", ${conv});
    await m.flush().catch((e) => console.log("flush " + e.code + " " + Date.now()));
    await m.close();
  `;
  const r = await runChild(code, { env: { LLM: llm.baseUrl } });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /flush LLM_TIMEOUT/);
  const failedAt = Number(/flush LLM_TIMEOUT (\d+)/.exec(r.stdout)[1]);
  assert.ok(
    r.exitedAt < failedAt + 30_000,
    `exited ${r.exitedAt - failedAt} ms after the failure: neither the request's timer nor the 30 s retry backoff held it`,
  );
});

test("a succeeded request leaves no timeout timer behind (timeoutMs 30 s): the process exits right away", async () => {
  llm.reset();
  llm.script.push(factsReply("ok"));
  const code = `
    import { UserMemory } from "user-memory";
    const m = await UserMemory.open({ storage: "memory", debounceMs: 600000, llm: { baseUrl: process.env.LLM, model: "m", timeoutMs: 30000 } });
    m.observe("t", ${conv});
    console.log("flushing " + Date.now());
    await m.flush();
    await m.close();
    console.log("closed");
  `;
  const r = await runChild(code, { env: { LLM: llm.baseUrl } });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /closed/);
  const started = Number(/flushing (\d+)/.exec(r.stdout)[1]);
  assert.ok(
    r.exitedAt < started + 30_000,
    `exited ${r.exitedAt - started} ms after flush(): the request's timeout timer was cleared`,
  );
});

test("observe() after close() throws CLOSED synchronously; flush() and processDue() reject with CLOSED; nextDueAt() is null", async () => {
  llm.reset();
  const memory = await openMemory({
    agent: freshAgent("closed"),
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, model: "m" },
  });
  memory.observe("t", turn("hello", "hi"));
  await memory.close();
  assert.throws(
    () => memory.observe("t", turn("again", "hi")),
    (e) => e.code === "CLOSED" && e.name === "UserMemoryError",
  );
  await assert.rejects(memory.flush(), (e) => e.code === "CLOSED");
  await assert.rejects(memory.processDue(), (e) => e.code === "CLOSED");
  assert.equal(memory.nextDueAt(), null);
  await memory.close(); // idempotent
  assert.equal(llm.requests.length, 0);
});

test("close() keeps the entry a cancelled call was working on: the next instance processes it", async () => {
  llm.reset();
  const agent = freshAgent("cancelled");
  llm.script.push({ hang: true });
  const a = await openMemory({
    agent,
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, model: "m", timeoutMs: 60_000 },
  });
  const aEvents = record(a);
  a.observe("t", turn("I keep bees", "Sweet"));
  const flushing = a.flush();
  await llm.waitForRequests(1);
  await a.close();
  await assert.rejects(flushing, (e) => e.code === "CLOSED", "the flush in progress ends with CLOSED");
  assert.deepEqual(aEvents.codes(), []);
  llm.script.push(factsReply("Keeps bees"));
  const b = await openMemory({
    agent,
    storage: "memory",
    debounceMs: 600_000,
    llm: { baseUrl: llm.baseUrl, model: "m" },
  });
  assert.deepEqual(b.status().pending, ["t"]);
  await b.flush();
  assert.deepEqual(
    (await b.get()).facts.map((f) => f.content),
    ["Keeps bees"],
  );
  await b.close();
});

test("a processed event comes once the queue has let go of the entry: status() in the listener shows it done", async () => {
  llm.reset();
  // The second reply proposes nothing (re-stating the fact would confirm it: a change).
  llm.script.push(factsReply("Keeps bees"), factsReply());
  const memory = await openMemory({
    agent: freshAgent("processed"),
    storage: "memory",
    debounceMs: 60_000,
    llm: { baseUrl: llm.baseUrl, model: "m" },
  });
  const seen = [];
  memory.on("processed", (e) => seen.push([e.threadId, e.changed, memory.status().pending]));
  memory.observe("a", JSON.parse(conv));
  await memory.flush();
  // Nothing new: nothing changes, so no update event re-reads anything after it.
  memory.observe("b", JSON.parse(conv));
  await memory.flush();
  assert.deepEqual(seen, [
    ["a", true, []],
    ["b", false, []],
  ]);
  await memory.close();
});
