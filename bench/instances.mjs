// What an open instance costs a server that keeps one memory per user (Node).
//
//   node scripts/build.mjs && node --expose-gc bench/instances.mjs [users] [facts]   (default 500 50)
//
// Opens `users` instances (`agent: "user-<i>"`), each importing a document of `facts` facts
// (about 70 characters each, with the six sections filled), all kept open, and reports:
//
// * open + import: the median and 95th percentile of one `UserMemory.open()` followed by
//   `import()` of that user's document, and of a bare `open()` of a stored document;
// * memory per open instance: the growth of the wasm heap (the engine's document, index and
//   queue live there) and of the JS heap after GC, divided by `users`. The documents are stored
//   in a JS Map adapter (as a database would hold them elsewhere); its strings are counted
//   apart, so the figures are what the open instances themselves cost;
// * then the same number of `inject()` calls, one per user, to show the instances are live.
import { performance } from "node:perf_hooks";
import { initSync, UserMemory } from "user-memory";

const [users = 500, facts = 50] = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
const gc = globalThis.gc ?? (() => {});
if (!globalThis.gc) console.warn("(run with --expose-gc for steadier heap figures)");

const words =
  "rust go kafka lisbon porto tea cycling rabbit garden piano chess running climbing python postgres redis tokyo berlin sushi vegan".split(
    " ",
  );
function documentFor(user) {
  const at = "2026-01-01T00:00:00Z";
  const section = (summary) => ({ summary, updatedAt: at });
  return {
    version: "1.0",
    lastUpdated: at,
    user: {
      workContext: section(`User ${user} is a backend engineer working on order services.`),
      personalContext: section("Lives with a partner and a rabbit; cycles to work."),
      topOfMind: section("Migrating a service to Rust; learning Kafka consumer tuning."),
    },
    history: {
      recentMonths: section("Moved teams in the autumn."),
      earlierContext: section(""),
      longTermBackground: section("Studied physics."),
    },
    facts: Array.from({ length: facts }, (_, i) => ({
      id: `fact_${(user * 1000 + i).toString(16).padStart(8, "0").slice(-8)}`,
      content: `Fact ${i} of user ${user}: likes ${words[(user + i) % words.length]} and ${words[(user * 7 + i * 3) % words.length]} on weekends`,
      category: "preference",
      confidence: 0.7 + (i % 3) / 10,
      createdAt: at,
      source: "import",
    })),
  };
}

const stored = new Map();
const storage = {
  get: (k) => stored.get(k) ?? null,
  set: (k, v) => void stored.set(k, v),
  delete: (k) => void stored.delete(k),
};
const llm = async () => '{"newFacts":[]}';
const wasmHeap = () => initSync().memory.buffer.byteLength;
const storedChars = () => [...stored.values()].reduce((n, v) => n + v.length, 0);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)];

// Warm up the module (first calls compile and grow the heap once).
const warm = await UserMemory.open({ agent: "warm", storage, llm });
await warm.import(documentFor(0));
await warm.close();
stored.clear();
gc();

const heap0 = process.memoryUsage().heapUsed;
const wasm0 = wasmHeap();
const openImport = [];
const open = [];
for (let u = 0; u < users; u++) {
  const t0 = performance.now();
  const m = await UserMemory.open({ agent: `user-${u}`, storage, llm, autoProcess: false });
  await m.import(documentFor(u));
  openImport.push(performance.now() - t0);
  open.push(m);
}
gc();
const heap1 = process.memoryUsage().heapUsed;
const wasm1 = wasmHeap();
// V8 keeps these one-byte strings at about 1 byte per character.
const storeBytes = storedChars();

const reopen = [];
for (let u = 0; u < Math.min(users, 200); u++) {
  const t0 = performance.now();
  const m = await UserMemory.open({ agent: `user-${u}`, storage, llm, autoProcess: false });
  reopen.push(performance.now() - t0);
  await m.close();
}
const injectTimes = [];
for (const m of open) {
  const t0 = performance.now();
  await m.inject([{ role: "user", content: "what should I do this weekend?" }]);
  injectTimes.push(performance.now() - t0);
}
for (const m of open) await m.close();

const kb = (b) => `${(b / 1024).toFixed(1)} KB`;
const ms = (x) => `${x.toFixed(2)} ms`;
console.log(`${users} open instances with ${facts} facts each (Node ${process.version})`);
console.log(`  open + import one:            median ${ms(median(openImport))}, p95 ${ms(p95(openImport))}`);
console.log(`  open() of a stored document:  median ${ms(median(reopen))}, p95 ${ms(p95(reopen))}`);
console.log(`  inject() on an open instance: median ${ms(median(injectTimes))}`);
console.log(
  `  per open instance: wasm heap ${kb((wasm1 - wasm0) / users)}, JS heap ${kb((heap1 - heap0 - storeBytes) / users)} (stored documents, ${kb(storeBytes / users)} each, not counted)`,
);
