// Deleting on a full disk (the red team's case): a file store on a real small tmpfs, filled
// until only three quarters of the memory record fit. addFact() is STORAGE_QUOTA and changes
// nothing; removeFact({ forget }) and clear() succeed, written without the oldest history
// (a `debug` HISTORY_DROPPED), and a fresh instance reads the result. The tmpfs is mounted
// directly (root) or in a user and mount namespace (`unshare -rm`); where neither works the
// child fails writes beyond a byte budget as a full disk does (tests/js/file-store-full-disk.test.mjs
// does the same for locks).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { root } from "../helpers/pipeline.mjs";

const SCENARIO = `
const [dir, mode] = process.argv.slice(-2);
const fs = await import("node:fs");
const fsp = (await import("node:module")).createRequire(import.meta.url)("node:fs/promises");
let budget = Infinity; // the disk's size in pages of 4 KiB, in the fake mode
if (mode === "fake") {
  // A disk of "budget" pages: the files in the folder take their pages, a write fails if
  // its data does not fit beside them.
  const full = () => Object.assign(new Error("ENOSPC: no space left on device (fake)"), { code: "ENOSPC" });
  const pages = (n) => Math.ceil(n / 4096);
  const used = () => {
    let n = 0;
    for (const d of [dir, dir + "/store"])
      for (const f of fs.existsSync(d) ? fs.readdirSync(d) : []) {
        const st = fs.statSync(d + "/" + f, { throwIfNoEntry: false });
        if (st?.isFile()) n += pages(st.size);
      }
    return n;
  };
  const spend = (data) => {
    if (used() + pages(Buffer.byteLength(data)) > budget) throw full();
  };
  const writeFile = fsp.writeFile;
  fsp.writeFile = async (path, data, opts) => {
    if (typeof path === "string" && budget !== Infinity) spend(data);
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
const { UserMemory } = await import("user-memory");
const { fileStore } = await import("user-memory/node");
const store = dir + "/store";
const open = () => UserMemory.open({ agent: "full", storage: fileStore(store), autoProcess: false, llm: async () => "{}" });
const m = await open();
const debugs = [];
m.on("debug", (e) => debugs.push(e.code));
const ids = [];
for (let i = 0; i < 60; i++)
  ids.push((await m.addFact({ content: "Fact " + i + ": a long project with many details, tools, places and people, told over several weeks" })).id);
const record = Math.max(...fs.readdirSync(store).map((n) => fs.statSync(store + "/" + n).size));
const room = Math.floor((record * 3) / 4);
if (mode === "fake") budget = Math.ceil(fs.readdirSync(store).reduce((n, f) => n + fs.statSync(store + "/" + f).size, 0) / 4096) + fs.readdirSync(store).length + Math.floor(room / 4096);
else {
  const st = fs.statfsSync(dir);
  fs.writeFileSync(dir + "/filler", Buffer.alloc(Math.max(st.bavail * st.bsize - room, 0)));
}
const codeOf = (p) => p.then(() => "ok", (e) => e.code);
const out = { record, room };
out.add = await codeOf(m.addFact({ content: "Does not fit" }));
out.removed = await codeOf(m.removeFact(ids[7], { forget: true }));
out.cleared = await codeOf(m.clear());
out.history = (await m.history()).length;
out.dropped = debugs.filter((c) => c === "HISTORY_DROPPED").length;
await m.close();
const again = await open();
out.facts = (await again.get()).facts.length;
out.forgotten = (await again.forgotten()).length;
await again.close();
console.log(JSON.stringify(out));
process.exit(0);
`;

const dirs = [];
const mounted = [];
after(() => {
  for (const d of mounted) spawnSync("umount", [d]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const node = (dir, mode) => [process.execPath, "--input-type=module", "-e", SCENARIO, dir, mode];

function runScenario() {
  const dir = mkdtempSync(join(tmpdir(), "um-full-delete-"));
  dirs.push(dir);
  const opts = { cwd: root, encoding: "utf8", timeout: 120_000 };
  const only = process.env.UM_FULL_DISK;
  if ((!only || only === "mount") && spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]).status === 0) {
    mounted.push(dir);
    return {
      how: "a tmpfs mounted for the test",
      r: spawnSync(node(dir, "real")[0], node(dir, "real").slice(1), opts),
    };
  }
  const inner = `mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"`;
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

test("on a full disk, addFact() is STORAGE_QUOTA but removeFact() and clear() succeed without the oldest history", () => {
  const { how, r } = runScenario();
  assert.equal(r.status, 0, `${how}: ${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split("\n").pop());
  console.log(`on ${how}: ${JSON.stringify(out)}`);
  assert.equal(out.add, "STORAGE_QUOTA", `${how}: an addition does not fit`);
  assert.equal(out.removed, "ok", `${how}: removeFact() succeeds`);
  assert.equal(out.cleared, "ok", `${how}: clear() succeeds`);
  assert.ok(out.dropped >= 1, `${how}: HISTORY_DROPPED said so`);
  assert.ok(out.history < 62, `${how}: history entries were left out (${out.history} kept)`);
  assert.equal(out.facts, 0, `${how}: a fresh instance reads the cleared memory`);
  assert.equal(out.forgotten, 1, `${how}: the tombstone was stored`);
});
