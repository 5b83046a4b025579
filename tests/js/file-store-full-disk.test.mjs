// A full disk while a writer breaks a dead holder's lock leaves nothing behind: the
// `.lock.break` guard is created like the lock, complete (a hard link of a written temp
// file) or not at all. An empty guard, left when the disk filled up between creating and
// writing it, looked live for `staleLockMs` to every writer, every time.
//
// On a real full file system where this machine lets the test make one: a 256 KB tmpfs
// mounted directly (root) or inside a user and mount namespace (`unshare -rm`). Only where
// neither works, the child fakes a full disk by failing writes beyond a byte budget.
// (`UM_FULL_DISK=mount|unshare|fake` picks one way, to check each.)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { root } from "../helpers/pipeline.mjs";

// The child: the store on `dir`, a stale lock (written at epoch 0) in it, the disk filled
// up to its last page (so the lock's own temp file still fits, the guard does not).
const SCENARIO = `
const [dir, mode] = process.argv.slice(-2);
const fs = await import("node:fs");
const fsp = (await import("node:module")).createRequire(import.meta.url)("node:fs/promises");
let budget = Infinity;
if (mode === "fake") {
  // Writes of node:fs/promises (all the file store uses) fail with ENOSPC beyond the budget,
  // after the file was created, as a real full disk does.
  const full = () => Object.assign(new Error("ENOSPC: no space left on device (fake)"), { code: "ENOSPC" });
  const spend = (data) => {
    const pages = Math.ceil(Buffer.byteLength(data) / 4096);
    if (pages > budget) throw full();
    budget -= pages;
  };
  const writeFile = fsp.writeFile;
  fsp.writeFile = async (path, data, opts) => {
    if (typeof path === "string" && budget !== Infinity) {
      try {
        spend(data);
      } catch (e) {
        await writeFile(path, "", opts);
        throw e;
      }
    }
    return writeFile(path, data, opts);
  };
  const probe = await fsp.open(dir + "/probe", "w");
  const proto = Object.getPrototypeOf(probe);
  await probe.close();
  const handleWrite = proto.writeFile;
  proto.writeFile = async function (data, opts) {
    if (budget !== Infinity) spend(data);
    return handleWrite.call(this, data, opts);
  };
  (await import("node:module")).syncBuiltinESMExports();
}
const { fileStore } = await import("user-memory/node");
const store = dir + "/store";
const s = fileStore(store, { staleLockMs: 3_600_000 });
await s.set("p", "a");
fs.writeFileSync(store + "/.lock", JSON.stringify({ pid: 999999, host: "elsewhere", at: 0, token: "stale" }));
if (mode === "fake") budget = 1;
else {
  const st = fs.statfsSync(dir);
  fs.writeFileSync(dir + "/filler", Buffer.alloc(Math.max(st.bavail - 1, 0) * st.bsize));
}
let full = null;
try {
  await s.compareAndSet("p", "a", "b");
} catch (e) {
  full = e.code;
}
const left = fs.readdirSync(store).filter((n) => n.startsWith(".") && n !== ".lock").map((n) => [n, fs.statSync(store + "/" + n).size]);
if (mode === "fake") budget = Infinity;
else fs.rmSync(dir + "/filler");
// fixed wait: a hang detector: fails the test instead of hanging it
const freed = await Promise.race([s.compareAndSet("p", "a", "b"), new Promise((r) => setTimeout(() => r("still waiting 20 s after the space was freed"), 20_000).unref())]);
console.log(JSON.stringify({ full, left, freed, value: await s.get("p") }));
process.exit(0);
`;

const dirs = [];
const mounted = [];
after(() => {
  for (const d of mounted) spawnSync("umount", [d]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const node = (dir, mode) => [process.execPath, "--input-type=module", "-e", SCENARIO, dir, mode];

/** Runs the scenario on a real small tmpfs if one can be made, else on a faked full disk. */
function runScenario() {
  const dir = mkdtempSync(join(tmpdir(), "um-full-"));
  dirs.push(dir);
  const opts = { cwd: root, encoding: "utf8", timeout: 60_000 };
  const only = process.env.UM_FULL_DISK; // "mount", "unshare" or "fake": try just that way
  if (
    (!only || only === "mount") &&
    spawnSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir]).status === 0
  ) {
    mounted.push(dir);
    return {
      how: "a tmpfs mounted for the test",
      r: spawnSync(node(dir, "real")[0], node(dir, "real").slice(1), opts),
    };
  }
  const inner = `mount -t tmpfs -o size=256k tmpfs "$1" && shift && exec "$@"`;
  if (
    (!only || only === "unshare") &&
    spawnSync("unshare", ["-rm", "sh", "-c", `mount -t tmpfs tmpfs "$0"`, dir]).status === 0
  ) {
    const args = ["-rm", "sh", "-c", inner, "sh", dir, ...node(dir, "real")];
    return { how: "a tmpfs in a user and mount namespace", r: spawnSync("unshare", args, opts) };
  }
  return {
    how: "a faked full disk (no tmpfs can be mounted here)",
    r: spawnSync(node(dir, "fake")[0], node(dir, "fake").slice(1), opts),
  };
}

test("a disk that fills up while a writer breaks a dead holder's lock leaves no guard behind, and writing resumes once there is space", () => {
  const { how, r } = runScenario();
  assert.equal(r.status, 0, `${how}: ${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split("\n").pop());
  console.log(`# on ${how}`);
  assert.equal(out.full, "ENOSPC", `${how}: the full disk is reported`);
  assert.deepEqual(out.left, [], `${how}: no guard, no temp file left behind`);
  assert.equal(out.freed, true, `${how}: once there is space, the stale lock is broken and the write lands`);
  assert.equal(out.value, "b");
});
