// Memory on disk is readable by its owner only: the file store creates its folder 0700 and
// every file 0600 (values, the compareAndSet lock, temp files), whatever the umask; the CLI's
// `export <file>` of (decrypted) memory writes 0600, also over an existing 0644 file; the
// rollback marks of encrypted memory, kept outside the store (fileStore's `markDir`, by default
// in the user's cache folder), get a 0700 folder (with the parents it creates) and 0600 files.
// POSIX modes only: skipped on Windows.
import { spawnSync } from "node:child_process";
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { fileStore } from "user-memory/node";
import { closeAll, openMemory, root, scratchDir } from "../helpers/pipeline.mjs";

after(closeAll);
const scratch = scratchDir("um-modes-");
const mode = (path) => statSync(path).mode & 0o777;
const posix = process.platform !== "win32";

test(
  "the file store's folder is 0700 and every file in it 0600, even with umask 000",
  { skip: !posix, timeout: 60_000 },
  async () => {
    const dir = join(scratch, "memory");
    const old = process.umask(0);
    try {
      const store = fileStore(dir);
      const memory = await openMemory({ storage: store, agent: "modes", autoProcess: false, llm: async () => "{}" });
      await memory.addFact({ content: "Allergic to penicillin" });
      await memory.observe("t1", [
        { role: "user", content: "I keep bees" },
        { role: "assistant", content: "Noted." },
      ]);
      await store.compareAndSet("probe", null, "x");
      await memory.close();
      assert.equal(mode(dir).toString(8), "700", "the folder");
      const files = readdirSync(dir);
      assert.ok(files.length >= 3, files.join(", "));
      for (const f of files) assert.equal(mode(join(dir, f)).toString(8), "600", f);
    } finally {
      process.umask(old);
    }
  },
);

test(
  "the lock and temp files are created 0600 (checked while they exist)",
  { skip: !posix, timeout: 60_000 },
  async () => {
    const dir = join(scratch, "locks");
    const old = process.umask(0);
    try {
      const store = fileStore(dir);
      await store.set("k", "v");
      // Many racing compareAndSets: each holds the lock file and writes a temp file; sample
      // the folder while they run.
      const seen = new Map();
      let running = true;
      const sampler = (async () => {
        while (running) {
          for (const f of readdirSync(dir)) {
            try {
              seen.set(f, mode(join(dir, f)));
            } catch {
              // removed between readdir and stat
            }
          }
          await new Promise((r) => setImmediate(r));
        }
      })();
      let value = "v";
      for (let i = 0; i < 40; i++) {
        const next = `v${i}`;
        if (await store.compareAndSet("k", value, next)) value = next;
      }
      running = false;
      await sampler;
      const hidden = [...seen].filter(([f]) => f.startsWith("."));
      assert.ok(hidden.length > 0, `a lock or temp file was seen: ${[...seen.keys()].join(", ")}`);
      for (const [f, m] of seen) assert.equal(m.toString(8), "600", f);
    } finally {
      process.umask(old);
    }
  },
);

test(
  "CLI export <file> writes 0600, also over an existing file that was 0644",
  { skip: !posix, timeout: 60_000 },
  () => {
    const dir = join(scratch, "cli");
    const cli = (...args) =>
      spawnSync(process.execPath, [join(root, "pkg/cli.js"), ...args, "--dir", dir], { encoding: "utf8" });
    assert.equal(cli("add", "Prefers dark mode").status, 0);
    const fresh = join(scratch, "fresh.json");
    const existing = join(scratch, "existing.json");
    writeFileSync(existing, "old");
    chmodSync(existing, 0o644);
    for (const out of [fresh, existing]) {
      const r = cli("export", out);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(mode(out).toString(8), "600", out);
      assert.match(JSON.parse(readFileSync(out, "utf8")).facts[0].content, /dark mode/);
    }
  },
);

/** Opens encrypted memory on `store` with umask 000, writes a fact and closes it. */
async function writeEncrypted(store, agent) {
  const old = process.umask(0);
  try {
    const memory = await openMemory({
      storage: store,
      agent,
      autoProcess: false,
      llm: async () => "{}",
      encryption: { passphrase: "correct horse battery staple" },
    });
    await memory.addFact({ content: "Allergic to penicillin" });
    await memory.close();
  } finally {
    process.umask(old);
  }
}

/** Asserts `folder` (and each of `parents`) is 0700 and holds at least one file, each 0600. */
function assertOwnerOnly(folder, parents = []) {
  for (const d of [folder, ...parents]) assert.equal(mode(d).toString(8), "700", d);
  const files = readdirSync(folder);
  assert.ok(files.length >= 1, `a mark was written in ${folder}`);
  for (const f of files) assert.equal(mode(join(folder, f)).toString(8), "600", f);
}

test(
  "the rollback mark folder (and the parents it creates) is 0700, mark files 0600, even with umask 000",
  { skip: !posix, timeout: 60_000 },
  async () => {
    const cache = join(scratch, "mark-cache");
    const markDir = join(cache, "user-memory", "marks");
    await writeEncrypted(fileStore(join(scratch, "marked"), { markDir }), "marked");
    assertOwnerOnly(markDir, [join(cache, "user-memory"), cache]);
    assertOwnerOnly(join(scratch, "marked"));
  },
);

test(
  "the default mark folder in $XDG_CACHE_HOME is 0700 with 0600 files",
  { skip: process.platform !== "linux", timeout: 60_000 },
  async () => {
    const old = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = join(scratch, "xdg");
    try {
      const store = fileStore(join(scratch, "default-mark"));
      assert.equal(store.rollbackMark?.name.includes(join(scratch, "xdg", "user-memory", "marks")), true);
      await writeEncrypted(store, "default-mark");
    } finally {
      if (old === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = old;
    }
    const xdg = join(scratch, "xdg");
    assertOwnerOnly(join(xdg, "user-memory", "marks"), [join(xdg, "user-memory"), xdg]);
  },
);
