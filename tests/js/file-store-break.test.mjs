// Breaking a stale file-store lock never takes away a fresh one. Breakers take turns under
// `.lock.break` and remove the lock only if it is still the stale one they read; a guard
// left by a breaker that died is cleared.
//
// The race is forced, not waited for: `link` of node:fs/promises (how the guard is created,
// complete, from a temp file) is wrapped before the store is imported, so that the moment a
// breaker takes its turn, another breaker has just replaced the stale lock with a live
// holder's fresh one.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { eventually } from "../helpers/wait.mjs";

const fsp = createRequire(import.meta.url)("node:fs/promises");
const realLink = fsp.link;
/** Runs once, right before the next `.lock.break` is created. */
let beforeGuard = null;
fsp.link = async (from, to) => {
  if (typeof to === "string" && to.endsWith("/.lock.break") && beforeGuard) {
    const hook = beforeGuard;
    beforeGuard = null;
    hook();
  }
  return realLink(from, to);
};
syncBuiltinESMExports();
const { fileStore } = await import("user-memory/node");

const dirs = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), "um-break-"));
  dirs.push(d);
  return join(d, "store");
};
const deadPid = () =>
  Number(spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }).stdout);
const here = () => {
  let space = "";
  try {
    space = `${readlinkSync("/proc/self/ns/pid")} ${readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`;
  } catch {
    // not Linux
  }
  return {
    host: hostname(),
    space,
    tag: createHash("sha256").update(`${hostname()}\n${space}`).digest("hex").slice(0, 8),
  };
};
const lockOf = (pid, token) => JSON.stringify({ pid, host: here().host, space: here().space, at: Date.now(), token });

test("a breaker whose stale lock was replaced by a fresh one meanwhile leaves the fresh one alone", async () => {
  const s = fileStore(freshDir(), { staleLockMs: 3_600_000 });
  await s.set("p", "a");
  const lock = join(s.dir, ".lock");
  writeFileSync(lock, lockOf(deadPid(), "stale"));
  let replaced = false;
  beforeGuard = () => {
    // Another breaker removed the stale lock, and a live process took the lock.
    writeFileSync(lock, lockOf(process.pid, "fresh"));
    replaced = true;
  };
  let done = false;
  const cas = s.compareAndSet("p", "a", "b").then((r) => ((done = true), r));
  await eventually(() => replaced, "the breaker to take its turn under .lock.break");
  // fixed wait: an absence check (the fresh lock is respected meanwhile): a slow machine can only make it pass
  await new Promise((r) => setTimeout(r, 300));
  assert.match(readFileSync(lock, "utf8"), /"fresh"/, "the fresh lock is still there");
  assert.equal(done, false, "and it is respected");
  assert.equal(readFileSync(join(s.dir, "p"), "utf8"), "a");
  assert.equal(existsSync(join(s.dir, ".lock.break")), false, "the breaker's guard is gone");
  rmSync(lock); // the live holder releases it
  assert.equal(await cas, true);
  assert.equal(await s.get("p"), "b");
});

test("a .lock.break left by a breaker that died is cleared, and the stale lock is broken", async () => {
  const s = fileStore(freshDir(), { staleLockMs: 3_600_000 });
  await s.set("p", "a");
  writeFileSync(join(s.dir, ".lock"), lockOf(deadPid(), "stale"));
  writeFileSync(join(s.dir, ".lock.break"), lockOf(deadPid(), "break"));
  // fixed wait: a hang detector: fails the test instead of hanging it
  const hung = new Promise((r) => setTimeout(() => r("still waiting after 60 s"), 60_000).unref());
  assert.equal(await Promise.race([s.compareAndSet("p", "a", "b"), hung]), true);
  assert.equal(existsSync(join(s.dir, ".lock.break")), false);
  assert.equal(existsSync(join(s.dir, ".lock")), false);
});
