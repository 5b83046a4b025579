// Commit-path speed through the built package (Node) on a large memory: every edit, an
// import, a fresh read, and an extraction commit, at N facts.
//
//   node scripts/build.mjs && node bench/commit.mjs [sizes…]       (default 1000 10000)
//   node bench/commit.mjs --file 10000                             (file store instead of memory)
//
// The memory is imported once per size (deterministic facts), with one `update` listener
// attached (as a UI has). Each cell is the median of `REPS` calls; every call is awaited,
// so the time includes everything the event loop is blocked for (diff, index sync, JSON
// writing, storage, the JS boundary and the event payload).
//
// * addFact / updateFact / removeFact — one hand edit each (a new fact, a changed content,
//   a removed fact).
// * import  — replacing the whole memory with an N-fact document (the facts get new
//   content each time, so every fact changes).
// * get     — a fresh read from storage, returned to JS.
// * extract — `flush()` of one queued conversation whose extraction (an LLM function)
//   adds one fact and removes one: read, prompt, parse, apply, commit, events.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";

const args = process.argv.slice(2);
const useFile = args.includes("--file");
const sizes = args.map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [1000, 10000];
const REPS = Number(process.env.REPS ?? 5);

function makeFacts(n, tag = "") {
  const words =
    "writes go rust python kafka postgres redis cache latency berlin shanghai climbing bread coffee rabbit garden piano".split(
      " ",
    );
  return Array.from({ length: n }, (_, i) => ({
    id: `fact_${i.toString(16).padStart(8, "0")}`,
    content: `${words[i % words.length]} ${words[(i * 7) % words.length]} number ${i}${tag}`,
    category: "knowledge",
    confidence: 0.5 + (i % 50) / 100,
    createdAt: "2026-01-01T00:00:00Z",
    source: "bench",
  }));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function time(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function bench(n) {
  const dir = useFile ? mkdtempSync(join(tmpdir(), "um-bench-commit-")) : null;
  let reply = JSON.stringify({ newFacts: [] });
  const memory = await UserMemory.open({
    agent: `bench-commit-${n}-${process.pid}`,
    storage: useFile ? fileStore(dir) : "memory",
    maxFacts: n + 1000,
    autoProcess: false,
    llm: async () => reply,
  });
  let updates = 0;
  memory.on("update", () => updates++);
  const doc = { version: "1.0", user: {}, history: {}, facts: makeFacts(n) };
  const cells = {};
  const run = async (name, fn) => {
    const ts = [];
    for (let i = 0; i < REPS; i++) ts.push(await time(() => fn(i)));
    cells[name] = median(ts);
  };
  await run("import", (i) => memory.import({ ...doc, facts: makeFacts(n, i % 2 ? " again" : "") }));
  await memory.import(doc);
  const added = [];
  await run("addFact", async (i) =>
    added.push((await memory.addFact({ content: `a new fact number ${i}`, confidence: 0.95 })).id),
  );
  await run("updateFact", (i) => memory.updateFact(added[i], { content: `an edited fact number ${i}` }));
  await run("removeFact", (i) => memory.removeFact(added[i]));
  await run("get", () => memory.get());
  await run("extract", async (i) => {
    reply = JSON.stringify({
      newFacts: [{ content: `Learned thing number ${i}`, category: "knowledge", confidence: 0.9 }],
      factsToRemove: [`fact_${(i + 1).toString(16).padStart(8, "0")}`],
    });
    await memory.observe(`thread-${i}`, [
      { role: "user", content: `Remember thing number ${i}` },
      { role: "assistant", content: "Noted." },
    ]);
    await memory.flush();
  });
  const facts = (await memory.get()).facts.length;
  await memory.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (updates === 0) throw new Error("no update event fired");
  return { n, facts, ...cells };
}

const fmt = (ms) =>
  ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`;
console.log(`storage: ${useFile ? "fileStore" : "memory"}, median of ${REPS} calls, Node ${process.versions.node}\n`);
const cols = ["addFact", "updateFact", "removeFact", "import", "get", "extract"];
console.log(`| facts | ${cols.join(" | ")} |`);
console.log(`|--:|${cols.map(() => "--:").join("|")}|`);
for (const n of SIZES) {
  const r = await bench(n);
  console.log(`| ${n.toLocaleString("en")} | ${cols.map((c) => fmt(r[c])).join(" | ")} |`);
}
