// inject() of an earlier build against the current one, in one Node process, on the same data.
//
//   node bench/inject-compare.mjs [--old <commit>] [--new <commit>|.] [--rounds N] [sizes…]
//
//   --old     the earlier build (default 0c0e8bb, the build before the round of issue 28)
//   --new     `.` (default): this checkout as it is (built with `scripts/build.mjs --if-stale`
//             and packed), or a commit, built like --old
//   --rounds  how many old/new pairs per size (default 8)
//   sizes     default 500 10000
//
// A commit is built in a temporary `git worktree` (scripts/build.mjs of that commit, then
// `npm pack`); the unpacked package is cached under target/inject-compare/<commit>/, so a
// second run starts at once. Both packages are loaded into this process (two wasm
// instances), fed the same generated facts (bench/inject.mjs's generator) and the same 16
// queries, used in turn. The runs alternate old/new/old/new (the first of each pair swaps
// every round, so neither always runs first); each run is the median of many calls after
// a warm-up. Printed per size: the median of the runs of each build, their range, and
// new ÷ old (below 1: the current build is faster).
//
// Results (`--rounds 6`, Node 20, 2 shared cores, load average 4–10; docs/relevance.md has each step):
//   c5b1482 (main before issue 28's selection work)  500: ×1.91   10 000: ×1.54
//   6cb863a (inject::select, the ranking loop, kept line counts)  500: ×1.57   10 000: ×0.72
//   57bfccc (line heads at sync)                                   500: ×1.13   10 000: ×0.57
//   the fixed cost of a call cut (`--rounds 12`, load average 1.4)  500: ×0.95   10 000: ×0.50
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { document, makeFacts, QUERIES } from "./inject-data.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  if (i < 0) return dflt;
  const v = argv[i + 1];
  argv.splice(i, 2);
  return v;
};
const OLD = opt("--old", "0c0e8bb");
const NEW = opt("--new", ".");
const ROUNDS = Number(opt("--rounds", "8"));
const sizes = argv.map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [500, 10000];
const cache = join(root, "target", "inject-compare");

const sh = (cmd, args, cwd = root) =>
  execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();

/** Packs the package in `tree` (npm pack runs the build if stale) and unpacks it as `<dest>/node_modules/user-memory`. */
function packInto(tree, dest) {
  const scratch = join(dest, "tgz");
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  execFileSync("npm", ["pack", "--silent", "--pack-destination", scratch], {
    cwd: tree,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const tgz = readdirSync(scratch).find((f) => f.endsWith(".tgz"));
  if (!tgz) throw new Error(`npm pack produced no tarball in ${tree}`);
  sh("tar", ["-xzf", join(scratch, tgz), "-C", scratch]);
  const modules = join(dest, "node_modules");
  rmSync(modules, { recursive: true, force: true });
  mkdirSync(modules, { recursive: true });
  renameSync(join(scratch, "package"), join(modules, "user-memory"));
  rmSync(scratch, { recursive: true, force: true });
  // A module inside `dest` resolves "user-memory" to the unpacked package. `dest` needs its
  // own package.json: without one the checkout's (named user-memory) is the nearest, and
  // Node resolves a package's own name to itself before looking in node_modules.
  writeFileSync(
    join(dest, "package.json"),
    JSON.stringify({ name: "inject-compare-build", private: true, type: "module" }) + "\n",
  );
  writeFileSync(join(dest, "load.mjs"), 'export { UserMemory } from "user-memory";\n');
}

/** The unpacked package of `rev` (a commit, or "." for this checkout); returns the directory holding load.mjs. */
function build(rev) {
  if (rev === ".") {
    const dest = join(cache, "current");
    packInto(root, dest);
    return {
      dest,
      label: `this checkout (${sh("git", ["rev-parse", "--short", "HEAD"])}${sh("git", ["status", "--porcelain", "--", "src", "js"]) ? "+changes" : ""})`,
    };
  }
  const sha = sh("git", ["rev-parse", "--short", `${rev}^{commit}`]);
  const dest = join(cache, sha);
  if (existsSync(join(dest, "package.json"))) return { dest, label: sha };
  const tree = join(cache, `${sha}-tree`);
  rmSync(tree, { recursive: true, force: true });
  sh("git", ["worktree", "prune"]);
  console.error(`building ${sha} in a temporary worktree (a few minutes)…`);
  sh("git", ["worktree", "add", "--detach", "--quiet", tree, sha]);
  try {
    symlinkSync(join(root, "node_modules"), join(tree, "node_modules"));
    // One cargo target folder for every earlier build: the dependencies compile once.
    mkdirSync(join(cache, "cargo-target"), { recursive: true });
    symlinkSync(join(cache, "cargo-target"), join(tree, "target"));
    execFileSync("node", ["scripts/build.mjs"], { cwd: tree, stdio: ["ignore", "ignore", "inherit"] });
    packInto(tree, dest);
  } finally {
    sh("git", ["worktree", "remove", "--force", tree]);
  }
  return { dest, label: sha };
}

// --- timing ------------------------------------------------------------------------------
/** Median per call of `calls` inject() calls (queries in turn), after a warm-up. */
async function run(memory, calls) {
  for (let i = 0; i < 16; i++) await memory.inject(QUERIES[i]);
  const times = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const q = QUERIES[i % QUERIES.length];
    const t = performance.now();
    await memory.inject(q);
    times[i] = performance.now() - t;
  }
  times.sort();
  return times[calls >> 1];
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (x) => `${x.toFixed(3)} ms`;

const old = build(OLD);
const cur = build(NEW);
const builds = [];
for (const b of [old, cur]) {
  const { UserMemory } = await import(pathToFileURL(join(b.dest, "load.mjs")).href);
  builds.push({ ...b, UserMemory });
}
if (builds[0].UserMemory === builds[1].UserMemory) throw new Error("both builds resolved to the same module");

console.log(`node ${process.version}, ${process.arch}; old = ${old.label}, new = ${cur.label}; ${ROUNDS} rounds`);
console.log("| facts | old inject() (range) | new inject() (range) | new ÷ old (range) |");
console.log("|------:|---------------------:|---------------------:|------------------:|");
for (const n of SIZES) {
  const facts = makeFacts(n);
  const memories = [];
  for (const b of builds) {
    const memory = await b.UserMemory.open({
      agent: `cmp-${n}`,
      storage: "memory",
      llm: async () => "{}",
      maxFacts: n,
    });
    await memory.import(document(facts));
    const held = (await memory.get()).facts.length;
    if (held !== n) throw new Error(`${b.label}: memory holds ${held} facts, not ${n}`);
    if (!(await memory.inject(QUERIES[0])).includes("<memory>")) throw new Error(`${b.label}: no block`);
    memories.push(memory);
  }
  const calls = n >= 10000 ? 160 : 800;
  const times = [[], []];
  const ratios = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [1, 0] : [0, 1];
    const pair = [];
    for (const k of order) pair[k] = await run(memories[k], calls);
    times[0].push(pair[0]);
    times[1].push(pair[1]);
    ratios.push(pair[1] / pair[0]);
  }
  for (const m of memories) await m.close();
  const range = (xs, f) => `${f(Math.min(...xs))}–${f(Math.max(...xs))}`;
  const r2 = (x) => x.toFixed(2);
  console.log(
    `| ${String(n).padStart(5)} | ${ms(median(times[0]))} (${range(times[0], (x) => x.toFixed(3))}) | ${ms(median(times[1]))} (${range(times[1], (x) => x.toFixed(3))}) | ×${r2(median(ratios))} (${range(ratios, r2)}) |`,
  );
}
