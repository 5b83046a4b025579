// The storage adapters' shared helpers (js/store-util.js, built into pkg/): the retrying
// one-time set-up every store waits on, the "error" listener guard, the key range of a prefix.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { test } from "node:test";
import { keepErrorsFromEndingProcess, prefixEnd, redact, retryingOnce } from "../../pkg/store-util.js";

test("retryingOnce: concurrent callers share one run; a success is kept", async () => {
  let runs = 0;
  const ready = retryingOnce(async () => ++runs);
  assert.deepEqual(await Promise.all([ready(), ready(), ready()]), [1, 1, 1]);
  assert.equal(await ready(), 1);
  assert.equal(runs, 1);
});

test("retryingOnce: a rejection reaches every waiter, is forgotten, and the next call runs again", async () => {
  let runs = 0;
  const ready = retryingOnce(async () => {
    runs++;
    if (runs === 1) throw new Error("server down");
    return "up";
  });
  const waiters = [ready(), ready()];
  for (const w of waiters) await assert.rejects(w, /server down/);
  assert.equal(await ready(), "up");
  assert.equal(runs, 2);
});

test("retryingOnce: forget() returns the kept promise and the next call starts anew; a late rejection of the forgotten run does not drop the new one", async () => {
  let fail;
  let runs = 0;
  const ready = retryingOnce(() => {
    runs++;
    return runs === 1 ? new Promise((_, reject) => (fail = reject)) : Promise.resolve(runs);
  });
  const first = ready();
  assert.equal(ready.forget(), first);
  assert.equal(ready.forget(), null, "nothing kept after forget()");
  assert.equal(await ready(), 2);
  fail(new Error("the old run failed late"));
  await assert.rejects(first, /failed late/);
  assert.equal(await ready(), 2, "the second run's result is still kept");
  assert.equal(runs, 2);
});

test("keepErrorsFromEndingProcess: adds a listener only where none is", () => {
  const bare = new EventEmitter();
  keepErrorsFromEndingProcess(bare);
  assert.equal(bare.listenerCount("error"), 1);
  bare.emit("error", new Error("connection lost")); // would throw without the listener
  const own = new EventEmitter();
  const seen = [];
  own.on("error", (e) => seen.push(e.message));
  keepErrorsFromEndingProcess(own);
  assert.equal(own.listenerCount("error"), 1, "the application's listener stays alone");
  own.emit("error", new Error("x"));
  assert.deepEqual(seen, ["x"]);
  keepErrorsFromEndingProcess({}); // not an emitter: nothing to do
  keepErrorsFromEndingProcess(null);
});

test("prefixEnd: the smallest string above every string with the prefix", () => {
  assert.equal(prefixEnd("user-memory/a/"), "user-memory/a0");
  assert.equal(prefixEnd("ab"), "ac");
  assert.equal(prefixEnd(""), null);
  assert.equal(prefixEnd("\u{10FFFF}"), null);
  assert.equal(prefixEnd("a\u{10FFFF}"), "b");
  assert.equal(prefixEnd("\uD7FF"), "\uE000", "surrogates are skipped: they cannot be stored as UTF-8");
  assert.equal(prefixEnd("x\u{1F600}"), "x\u{1F601}", "astral characters count as one");
  for (const [prefix, key] of [
    ["a/", "a/zzz"],
    ["a/", "a/\u{10FFFF}\u{10FFFF}"],
  ])
    assert.ok(key >= prefix && key < prefixEnd(prefix), `${JSON.stringify(key)} is in the range`);
});

test("redact: masks URL passwords, password= pairs and the given secrets", () => {
  assert.equal(
    redact("connect postgres://me:hunter22@db:5432/x failed; password=abc; sec123 seen", ["sec123"]),
    "connect postgres://me:***@db:5432/x failed; password=***; *** seen",
  );
});
