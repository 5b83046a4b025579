// Errors keep what caused them, and every module's errors look alike, through the built
// package: a storage adapter's, an LLM function's and an embed function's own error is the
// `cause` of the UserMemoryError it becomes (same object, so its stack and fields survive);
// the JS-side modules (file store, Durable Object store, pool, AI SDK middleware) throw
// errors named UserMemoryError with a stable code.
import { after } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { fileStore, memoryPool } from "user-memory/node";
import { durableObjectStore } from "user-memory/workers";
import { userMemoryMiddleware } from "user-memory/ai-sdk";
import { closeAll, eventually, freshAgent, openMemory, record, runChild, test, turn } from "../helpers/pipeline.mjs";

after(closeAll);

class DiskError extends Error {
  constructor() {
    super("disk on fire");
    this.errno = 28;
  }
}

test("a storage adapter's error is the cause of the STORAGE_FAILED it becomes", async () => {
  const thrown = new DiskError();
  const map = new Map();
  const adapter = {
    get: (k) => map.get(k) ?? null,
    set: () => {
      throw thrown;
    },
    delete: (k) => void map.delete(k),
  };
  const memory = await openMemory({ agent: freshAgent("cause"), storage: adapter });
  const err = await memory.addFact({ content: "Keeps bees" }).then(
    () => null,
    (e) => e,
  );
  assert.ok(err, "the write failed");
  assert.equal(err.name, "UserMemoryError");
  assert.equal(err.code, "STORAGE_FAILED");
  assert.match(err.message, /disk on fire/);
  assert.equal(err.cause, thrown, "the adapter's own error, not a copy");
  assert.equal(err.cause.errno, 28);
});

test("an LLM function's error is the cause of the LLM_FAILED, also in the error event", async () => {
  const thrown = new Error("quota exceeded upstream");
  const memory = await openMemory({
    agent: freshAgent("cause"),
    storage: "memory",
    debounceMs: 60_000,
    maxAttempts: 1,
    llm: async () => {
      throw thrown;
    },
  });
  const rec = record(memory, ["error"]);
  await memory.observe("t", turn("I keep bees", "Nice"));
  const err = await memory.flush().then(
    () => null,
    (e) => e,
  );
  assert.equal(err?.code, "LLM_FAILED");
  assert.equal(err.cause, thrown);
  const ev = rec.of("error").find((e) => e.code === "LLM_FAILED");
  assert.equal(ev?.error?.cause, thrown, "the event's error has it too");
});

test("an embed function's error is the cause of the EMBED_FAILED", async () => {
  const thrown = new RangeError("model not loaded");
  const memory = await openMemory({
    agent: freshAgent("cause"),
    storage: "memory",
    embed: async () => {
      throw thrown;
    },
  });
  const rec = record(memory, ["error"]);
  await memory.addFact({ content: "Keeps bees" });
  await memory.search("bees");
  await eventually(() => rec.of("error").some((e) => e.code === "EMBED_FAILED"), "an EMBED_FAILED event");
  const ev = rec.of("error").find((e) => e.code === "EMBED_FAILED");
  assert.ok(ev, "the failure is reported");
  assert.equal(ev.error?.cause, thrown);
});

test("the JS-side modules throw UserMemoryError with a stable code", async () => {
  const cases = [
    ["fileStore('')", () => fileStore(""), "INVALID_INPUT"],
    ["memoryPool({})", () => memoryPool({}), "INVALID_INPUT"],
    ["durableObjectStore({})", () => durableObjectStore({}), "INVALID_INPUT"],
    ["userMemoryMiddleware({})", () => userMemoryMiddleware({}), "INVALID_INPUT"],
  ];
  for (const [what, f, code] of cases) {
    let err;
    try {
      f();
    } catch (e) {
      err = e;
    }
    assert.ok(err, `${what} throws`);
    assert.deepEqual([err.name, err.code], ["UserMemoryError", code], what);
  }
  const pool = memoryPool({ open: (key) => UserMemory.open({ agent: key, storage: "memory" }) });
  await pool.close();
  const closed = await Promise.resolve()
    .then(() => pool.acquire("u"))
    .then(
      () => null,
      (e) => e,
    );
  assert.deepEqual([closed?.name, closed?.code], ["UserMemoryError", "CLOSED"]);
});

test("an uncaught error in Node prints a short source line, then the message (not the whole glue)", async () => {
  const r = await runChild(`import { UserMemory } from "user-memory";\nawait UserMemory.open({ debounceMs: -1 });\n`);
  assert.notEqual(r.code, 0);
  const at = r.stderr.indexOf("`debounceMs` must be a finite number");
  assert.ok(at > 0, r.stderr.slice(0, 2000));
  // Node prints the file, the source line of the throw and a caret before the message.
  assert.ok(at < 600, `${at} characters before the message:\n${r.stderr.slice(0, 2000)}`);
  const longest = Math.max(...r.stderr.split("\n").map((l) => l.length));
  assert.ok(longest < 300, `a ${longest}-character line in the report`);
});
