// The Node file store (`user-memory/node`): file names, atomic writes, compareAndSet and its
// lock file, bad directories, corrupt files, and memory that survives a restart.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { hostname, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { UserMemory } from "user-memory";
import { FileStore, fileName, fileStore } from "user-memory/node";

const scratch = mkdtempSync(join(tmpdir(), "um-filestore-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
const freshDir = () => join(scratch, `d${++n}`);
const noLlm = async () => "{}";

/** The pid of a process that has exited. */
function deadPid() {
  const r = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(r.stdout);
}

test("any key round-trips through a portable file name: capitals, slashes, CJK, very long, empty", async () => {
  const s = fileStore(freshDir());
  const keys = [
    "user-memory/coder/doc",
    "user-memory/Coder/doc",
    "a%2Fb",
    ".hidden",
    "研究/記憶",
    "x".repeat(400),
    "長".repeat(100),
    "",
    "~tilde",
  ];
  for (const [i, k] of keys.entries()) await s.set(k, `value ${i}`);
  for (const [i, k] of keys.entries())
    assert.equal(await s.get(k), `value ${i}`, `get(${JSON.stringify(k.slice(0, 20))})`);
  assert.deepEqual((await s.keys("")).sort(), [...keys].sort());
  assert.deepEqual((await s.keys("user-memory/")).sort(), keys.filter((k) => k.startsWith("user-memory/")).sort());
  for (const name of readdirSync(s.dir)) {
    assert.ok(!/[A-Z/\\]/.test(name), `${name} has no capitals or separators (same on case-insensitive file systems)`);
    assert.ok(Buffer.byteLength(name) <= 255, `${name.slice(0, 30)}… fits a file name`);
  }
  assert.notEqual(fileName("user-memory/Coder/doc"), fileName("user-memory/coder/doc"));
  assert.equal(fileName("user-memory/coder/doc"), "user-memory%2fcoder%2fdoc");
});

test("files that are not keys (other programs' files, dot files, bad escapes) are ignored", async () => {
  const s = fileStore(freshDir());
  await s.set("k", "v");
  writeFileSync(join(s.dir, "README.md"), "notes");
  writeFileSync(join(s.dir, "bad%zz"), "x");
  writeFileSync(join(s.dir, ".DS_Store"), "x");
  writeFileSync(join(s.dir, "x~0123"), "no key line");
  assert.deepEqual(await s.keys(""), ["k"]);
});

test("get of a missing key is null; delete is idempotent; set replaces", async () => {
  const s = new FileStore(freshDir());
  assert.equal(await s.get("missing"), null);
  await s.set("k", "one");
  await s.set("k", "two");
  assert.equal(await s.get("k"), "two");
  await s.delete("k");
  await s.delete("k");
  assert.equal(await s.get("k"), null);
  assert.deepEqual(readdirSync(s.dir), [], "no temp file or lock is left behind");
});

test("compareAndSet writes only over the expected value (null = absent)", async () => {
  const s = fileStore(freshDir());
  assert.equal(await s.compareAndSet("p", "x", "1"), false, "absent is not 'x'");
  assert.equal(await s.compareAndSet("p", null, "1"), true);
  assert.equal(await s.compareAndSet("p", null, "2"), false, "present is not absent");
  assert.equal(await s.compareAndSet("p", "0", "2"), false);
  assert.equal(await s.compareAndSet("p", "1", "2"), true);
  assert.equal(await s.get("p"), "2");
  assert.ok(!existsSync(join(s.dir, ".lock")), "the lock is released");
});

test("concurrent compareAndSet loops of several stores on one directory lose no increment", async () => {
  const dir = freshDir();
  const stores = [0, 1, 2, 3].map(() => fileStore(dir));
  await stores[0].set("counter", "0");
  let conflicts = 0;
  const bump = async (s) => {
    for (let i = 0; i < 10; i++) {
      for (;;) {
        const cur = await s.get("counter");
        if (await s.compareAndSet("counter", cur, String(Number(cur) + 1))) break;
        conflicts++;
      }
    }
  };
  await Promise.all(stores.map(bump));
  assert.equal(await stores[0].get("counter"), "40");
  assert.ok(conflicts > 0, "the loops did interleave (otherwise this test proves nothing)");
});

/** What the store writes into a lock to say "this host": host name, PID namespace and boot. */
function here() {
  let space = "";
  try {
    space = `${readlinkSync("/proc/self/ns/pid")} ${readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`;
  } catch {
    // not Linux: the host name alone
  }
  return {
    host: hostname(),
    space,
    tag: createHash("sha256").update(`${hostname()}\n${space}`).digest("hex").slice(0, 8),
  };
}

test("a lock left by a dead process is broken at once", async () => {
  // staleLockMs of an hour: only the dead holder can explain the lock being broken.
  const s = fileStore(freshDir(), { staleLockMs: 3_600_000 });
  await s.set("p", "a");
  const { host, space } = here();
  writeFileSync(join(s.dir, ".lock"), JSON.stringify({ pid: deadPid(), host, space, at: Date.now(), token: "dead" }));
  // fixed wait: a hang detector: fails the test instead of hanging it
  const hung = new Promise((r) => setTimeout(() => r("still waiting after 60 s"), 60_000).unref());
  assert.equal(await Promise.race([s.compareAndSet("p", "a", "b"), hung]), true);
  assert.equal(await s.get("p"), "b");
  assert.ok(!existsSync(join(s.dir, ".lock")));
});

test("a lock from another PID namespace (a container sharing the directory) is judged by age, not by a pid that means nothing here", async () => {
  const s = fileStore(freshDir());
  await s.set("p", "a");
  const lock = join(s.dir, ".lock");
  // Same host name (containers of one pod), another PID namespace: its pid looks dead here.
  writeFileSync(
    lock,
    JSON.stringify({
      pid: deadPid(),
      host: hostname(),
      space: "pid:[4026530000] another-boot",
      at: Date.now(),
      token: "container-b",
    }),
  );
  let done = false;
  const cas = s.compareAndSet("p", "a", "b").then((r) => ((done = true), r));
  // fixed wait: an absence check (the lock is respected meanwhile): a slow machine can only make it pass
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(done, false, "the other container's lock is respected");
  assert.equal(readFileSync(lock, "utf8").includes("container-b"), true);
  rmSync(lock);
  assert.equal(await cas, true);
});

test("a lock held by a live process is respected until it is released", async () => {
  const s = fileStore(freshDir());
  await s.set("p", "a");
  const lock = join(s.dir, ".lock");
  writeFileSync(lock, JSON.stringify({ pid: process.pid, ...here(), at: Date.now(), token: "someone-else" }));
  let done = false;
  const cas = s.compareAndSet("p", "a", "b").then((r) => ((done = true), r));
  // fixed wait: an absence check (compareAndSet waits meanwhile): a slow machine can only make it pass
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(done, false, "compareAndSet waits while the lock is held");
  assert.equal(readFileSync(join(s.dir, fileName("p")), "utf8"), "a");
  rmSync(lock);
  assert.equal(await cas, true);
  assert.equal(await s.get("p"), "b");
});

test("a lock older than staleLockMs is broken even if its holder is alive", async () => {
  const s = fileStore(freshDir(), { staleLockMs: 1000 });
  await s.set("p", "a");
  writeFileSync(
    join(s.dir, ".lock"),
    JSON.stringify({ pid: process.pid, host: hostname(), at: Date.now() - 60_000, token: "old" }),
  );
  assert.equal(await s.compareAndSet("p", "a", "b"), true);
});

test("temp files of dead writers are removed on first use; others' are kept", async () => {
  const dir = freshDir();
  mkdirSync(dir);
  const { tag } = here();
  const orphan = `.tmp-${tag}-${deadPid()}-0a0b0c`;
  const live = `.tmp-${tag}-${process.pid}-0d0e0f`;
  // Another PID namespace's temp file: its pid cannot be checked here, so it is kept.
  const otherSpace = `.tmp-${createHash("sha256").update(`${hostname()}\nelsewhere`).digest("hex").slice(0, 8)}-${deadPid()}-0a0b0d`;
  writeFileSync(join(dir, orphan), "half a docu");
  writeFileSync(join(dir, live), "being written");
  writeFileSync(join(dir, otherSpace), "being written in another container");
  const s = fileStore(dir);
  assert.equal(await s.get("anything"), null);
  assert.deepEqual(readdirSync(dir).sort(), [live, otherSpace].sort());
});

test("the directory is created when its parent exists", async () => {
  const dir = freshDir();
  const m = await UserMemory.open({ storage: fileStore(dir), llm: noLlm });
  await m.addFact({ content: "Keeps notes in files" });
  await m.close();
  assert.ok(readdirSync(dir).length >= 2, "pointer and document files");
});

test("a missing parent or a file in the way rejects open() with STORAGE_UNAVAILABLE naming the path", async () => {
  const missing = join(scratch, "no-such-parent", "memory");
  await assert.rejects(UserMemory.open({ storage: fileStore(missing), llm: noLlm }), (e) => {
    assert.equal(e.code, "STORAGE_UNAVAILABLE");
    assert.equal(e.name, "UserMemoryError");
    assert.ok(e.message.includes(missing), e.message);
    return true;
  });
  const file = join(scratch, "a-file");
  writeFileSync(file, "");
  await assert.rejects(
    UserMemory.open({ storage: fileStore(file), llm: noLlm }),
    (e) => e.code === "STORAGE_UNAVAILABLE" && e.message.includes(file),
  );
  assert.ok(!existsSync(join(scratch, "no-such-parent")), "nothing was created");
  assert.throws(() => fileStore(""), { code: "INVALID_INPUT" });
  assert.throws(() => fileStore(scratch, { staleLockMs: -1 }), { code: "INVALID_INPUT" });
});

test("a read-only directory is STORAGE_UNAVAILABLE, naming the path", (t) => {
  // Root ignores permissions: run the check as an unprivileged user in a child process.
  const dir = freshDir();
  mkdirSync(dir, { mode: 0o555 });
  chmodSync(dir, 0o555);
  chmodSync(scratch, 0o755);
  // A copy of the module the unprivileged user can surely read (the checkout may not be).
  const copy = join(scratch, "file-store.mjs");
  const source = fileURLToPath(import.meta.resolve("user-memory/node"));
  copyFileSync(source, copy);
  chmodSync(copy, 0o644);
  // …with the modules it imports (memoryPool, the errors' helpers, the retrying set-up).
  for (const dep of ["pool.js", "errors.js", "store-util.js"]) {
    copyFileSync(join(dirname(source), dep), join(scratch, dep));
    chmodSync(join(scratch, dep), 0o644);
  }
  const moduleUrl = pathToFileURL(copy).href;
  const code = `import { fileStore } from ${JSON.stringify(moduleUrl)};
    fileStore(${JSON.stringify(dir)}).set("k", "v").then(() => console.log("written"), (e) => console.log(e.code + " " + e.message));`;
  const asRoot = process.getuid?.() === 0;
  if (!asRoot && process.platform === "win32") return t.skip("no POSIX permissions");
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    encoding: "utf8",
    ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout.trim(), /^STORAGE_UNAVAILABLE .*not writable/);
  assert.ok(r.stdout.includes(dir));
});

test("corrupt files: open() rejects with CORRUPT_MEMORY and leaves every file as it was", async () => {
  const dir = freshDir();
  const m = await UserMemory.open({ storage: fileStore(dir), agent: "a", llm: noLlm });
  await m.addFact({ content: "A fact worth keeping" });
  await m.close();
  const pointer = JSON.parse(readFileSync(join(dir, fileName("user-memory/a/doc")), "utf8"));
  const docFile = join(dir, fileName(pointer.key));
  writeFileSync(docFile, '{"version":"1.0","facts":"not a list"'); // torn/garbled document
  const before = Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f), "utf8")]));
  await assert.rejects(UserMemory.open({ storage: fileStore(dir), agent: "a", llm: noLlm }), {
    code: "CORRUPT_MEMORY",
  });
  const afterOpen = Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f), "utf8")]));
  assert.deepEqual(afterOpen, before);
  // The raw text is still reachable for recovery.
  const raw = await UserMemory.inspect({ storage: fileStore(dir), agent: "a" });
  assert.equal(raw.document, before[fileName(pointer.key)]);
  // A garbled pointer is corrupt too, and is not overwritten.
  writeFileSync(join(dir, fileName("user-memory/a/doc")), "{garbage");
  await assert.rejects(UserMemory.open({ storage: fileStore(dir), agent: "a", llm: noLlm }), {
    code: "CORRUPT_MEMORY",
  });
  assert.equal(readFileSync(join(dir, fileName("user-memory/a/doc")), "utf8"), "{garbage");
});

test("a queued conversation survives a restart and is processed by the next instance", async () => {
  const dir = freshDir();
  const first = await UserMemory.open({ storage: fileStore(dir), debounceMs: 60_000, llm: noLlm });
  const persisted = first.observe("t1", [
    { role: "user", content: "I maintain the billing service in Rust" },
    { role: "assistant", content: "Got it." },
  ]);
  assert.equal(await persisted, true);
  await first.close();
  let prompt = "";
  const second = await UserMemory.open({
    storage: fileStore(dir),
    debounceMs: 60_000,
    llm: async (req) => {
      prompt = req.prompt;
      return JSON.stringify({
        newFacts: [{ content: "Maintains the billing service in Rust", category: "knowledge", confidence: 0.9 }],
      });
    },
  });
  assert.deepEqual(second.status().pending, ["t1"]);
  await second.flush();
  assert.match(prompt, /billing service in Rust/);
  assert.deepEqual(
    (await second.get()).facts.map((f) => f.content),
    ["Maintains the billing service in Rust"],
  );
  await second.close();
});
