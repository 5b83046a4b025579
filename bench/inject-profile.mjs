// Where inject()'s time goes in the wasm: a CPU profile of inject() calls through the package,
// on a build that keeps the wasm's function names, summed per phase.
//
//   node scripts/build.mjs && node bench/inject-profile.mjs [facts] [--top N]
//
// The named build: the wasm cargo left in target/ (it still has its name section) through
// wasm-bindgen and `wasm-opt -Oz` keeping the names, into target/inject-profile/ beside a copy
// of pkg/'s JS entries (the panic stubs of the real build are skipped: they only touch panic
// paths). The profile comes from node:inspector's Profiler (what `node --cpu-prof` writes),
// sampling every 50 µs while inject() runs with bench/inject-compare.mjs's data (default
// 10 000 facts, 16 queries in turn). Self time is summed per phase by function name (a
// function of no phase counts for its nearest caller that has one);
// --top N also lists the N functions with the most self time.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { document, makeFacts, QUERIES } from "./inject-data.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const topAt = argv.indexOf("--top");
const TOP = topAt >= 0 ? Number(argv.splice(topAt, 2)[1]) : 0;
const N = Number(argv[0] ?? 10000);

const out = join(root, "target", "inject-profile");
const cargoWasm = join(root, "target/wasm32-unknown-unknown/release/user_memory.wasm");
if (!existsSync(join(root, "pkg", "size.json")) || !existsSync(cargoWasm)) {
  throw new Error("build first: node scripts/build.mjs");
}
rmSync(out, { recursive: true, force: true });
cpSync(join(root, "pkg"), out, { recursive: true });
rmSync(join(out, "wasm"), { recursive: true, force: true });
mkdirSync(join(out, "wasm"));
execFileSync(
  "wasm-bindgen",
  ["--target", "web", "--out-dir", join(out, "wasm"), "--out-name", "user_memory", "--keep-debug", cargoWasm],
  {
    stdio: "inherit",
    env: { ...process.env, PATH: `${process.env.HOME}/.cargo/bin:${process.env.PATH}` },
  },
);
const wasm = join(out, "wasm", "user_memory_bg.wasm");
execFileSync(
  process.execPath,
  [join(root, "node_modules/binaryen/bin/wasm-opt"), "-Oz", "--debuginfo", wasm, "-o", wasm],
  { stdio: "inherit" },
);

const { UserMemory } = await import(pathToFileURL(join(out, "node.js")).href);
const memory = await UserMemory.open({ agent: `profile-${N}`, storage: "memory", llm: async () => "{}", maxFacts: N });
await memory.import(document(makeFacts(N)));
for (let i = 0; i < 200; i++) await memory.inject(QUERIES[i % 16]);

const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: 50 });
await session.post("Profiler.start");
const calls = N >= 10000 ? 2000 : 8000;
const t0 = performance.now();
for (let i = 0; i < calls; i++) await memory.inject(QUERIES[i % 16]);
const perCall = (performance.now() - t0) / calls;
const { profile } = await session.post("Profiler.stop");
session.disconnect();
await memory.close();
// For DevTools (Performance → load profile) or a closer look at callers.
writeFileSync(join(out, `inject-${N}.cpuprofile`), JSON.stringify(profile));

// Self time per profile node and per function name.
const dt = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  dt.set(profile.samples[i], (dt.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
/** @param {any} node */
const nameOf = (node) => node.callFrame.functionName || `(${node.callFrame.url.split("/").pop() || "anonymous"})`;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
const self = new Map();
let total = 0;
for (const node of profile.nodes) {
  const t = dt.get(node.id) ?? 0;
  if (!t) continue;
  self.set(nameOf(node), (self.get(nameOf(node)) ?? 0) + t);
  total += t;
}

const PHASES = [
  ["idle / between calls", /^\((idle|program|garbage collector)\)$/],
  [
    "per-fact checks (category, lifetime, blank)",
    /Map::position|Map::get|expected_valid_days|is_expired|is_blank|memcmp|bcmp|PartialEq|Prepared|prepared/,
  ],
  ["sanitising / neutralising text", /sanitize|url_at|strip_invisible|neutrali[sz]e|inject::clean/],
  ["BM25 scoring, fusion", /similarities|fusion/],
  ["query: filter, tokenise", /tokenize|lexicon|query_terms|query_text|stem|filter|Hash|hash|recent_turns/],
  // The selection is inlined into the engine's ranking future (`Engine::rank::{{closure}}`).
  [
    "selection (rank, top-k, sort)",
    /inject::select|inject::run|Selection|better|top_k|TopK|sort|partition_point|Engine::rank::/,
  ],
  [
    "rendering, token counting",
    /push_value|fact_line|summary_line|inject::fit|Estimate|count|push_confidence|collapse|push_date|safe_category|written_day|scan_iso/,
  ],
  ["allocation, copies", /alloc|talc|memcpy|memmove|memset|dlmalloc|realloc|free/],
  [
    "JS/wasm boundary (messages in, string out, promise)",
    /convert|messages|wasm_bindgen|js_sys|JsValue|getStringFromWasm|passStringToWasm|__wbg|closure|Promise|future|queueMicrotask|prop|^\(user_memory\.js\)|^(node\.js|\(node\.js\))/,
  ],
  ["engine (options, snapshot, async path)", /engine|Engine|rank|inject_options|query_vectors|kick_vectors|Config|now/],
];
// A function of no phase of its own (a std string iterator, memcmp …) counts for the
// nearest caller that has one.
/** @param {number} id */
const phaseOf = (id) => {
  for (let x = id; x !== undefined; x = parent.get(x)) {
    const k = PHASES.findIndex(([, re]) => re.test(nameOf(byId.get(x))));
    if (k >= 0) return k;
  }
  return -1;
};
const sums = PHASES.map(() => 0);
let other = 0;
const restBy = new Map();
for (const node of profile.nodes) {
  const t = dt.get(node.id) ?? 0;
  if (!t) continue;
  const k = phaseOf(node.id);
  if (k >= 0) sums[k] += t;
  else {
    other += t;
    restBy.set(nameOf(node), (restBy.get(nameOf(node)) ?? 0) + t);
  }
}
const rest = [...restBy];
const busy = total - sums[0];
console.log(
  `node ${process.version}; ${N} facts; ${calls} inject() calls, ${(perCall * 1000).toFixed(0)} µs per call under the profiler`,
);
console.log("| phase | share of busy time | ≈ µs per call |");
console.log("|---|--:|--:|");
for (let k = 1; k < PHASES.length; k++) {
  console.log(
    `| ${PHASES[k][0]} | ${((100 * sums[k]) / busy).toFixed(1)} % | ${((perCall * 1000 * sums[k]) / busy).toFixed(1)} |`,
  );
}
console.log(`| other | ${((100 * other) / busy).toFixed(1)} % | ${((perCall * 1000 * other) / busy).toFixed(1)} |`);
if (TOP) {
  console.log("\nself time, top functions:");
  for (const [name, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${name.slice(0, 110)}`);
  }
  console.log("\nunattributed, top:");
  for (const [name, t] of rest.sort((a, b) => b[1] - a[1]).slice(0, 10)) {
    console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${name.slice(0, 110)}`);
  }
}
