// What each browser engine guarantees, measured through the built package in Chromium,
// Firefox and WebKitGTK (tests/helpers/engines.mjs):
//
//   node bench/engines.mjs kill [runs] [delays]
//                                          a fact committed, then every process of the browser
//                                          SIGKILLed after 0 … 6000 ms (or the comma-separated
//                                          delays): is the fact there after a restart?
//                                          (IndexedDB and localStorage)
//   node bench/engines.mjs legacy [runs]   without BroadcastChannel and Web Locks (Safari before
//                                          15.4): two windows add a fact each, d ms apart, on
//                                          localStorage: how often is one lost? Also how long a
//                                          localStorage write takes to become visible in
//                                          another window (the cause).
//
// BROWSER_ENGINES=webkit limits the engines. Needs a built pkg/ (node scripts/build.mjs).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ENGINES, launch, skipReason } from "../tests/helpers/engines.mjs";
import { startStaticServer } from "../tests/helpers/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const [mode = "kill", runsArg, delaysArg] = process.argv.slice(2);
const runs = Number(runsArg ?? 3);
if (!existsSync(join(ROOT, "pkg/wasm/user_memory_bg.wasm"))) {
  console.error("pkg/ is missing: run `node scripts/build.mjs` first");
  process.exit(1);
}
const server = await startStaticServer([
  ["/pkg/", join(ROOT, "pkg")],
  ["/", join(ROOT, "tests/browser/pages")],
]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const agentName = (what) => `${what}-${process.pid}-${seq++}`;

async function page(browser, query = "") {
  const p = await browser.newPage(`${server.url}/${query}`);
  await p.waitFor(() => window.ready === true);
  return p;
}
const open = (p, options) => p.evaluate((o) => window.openMemory({ llm: async () => "{}", ...o }), options);
const facts = (p) => p.evaluate(() => window.storedFacts());

async function killRuns(engine) {
  const delays = delaysArg ? delaysArg.split(",").map(Number) : [0, 250, 1000, 3000, 6000];
  const browser = await launch(engine);
  const rows = [];
  try {
    for (const storage of ["indexeddb", "localstorage"]) {
      for (const delay of delays) {
        let kept = 0;
        for (let i = 0; i < runs; i++) {
          const agent = agentName("kill");
          let p = await page(browser);
          await open(p, { agent, storage });
          await p.evaluate(() => window.memory.addFact({ content: "Committed before the crash" }));
          await sleep(delay);
          await browser.kill();
          p = await page(browser);
          await open(p, { agent, storage });
          if ((await facts(p)).length === 1) kept++;
          await p.evaluate(() => window.memory.close());
        }
        rows.push({ storage, "killed after (ms)": delay, kept: `${kept} of ${runs}` });
      }
    }
  } finally {
    await browser.close();
  }
  return rows;
}

async function legacyRuns(engine) {
  const browser = await launch(engine);
  const rows = [];
  try {
    const a = await page(browser, "?legacy");
    const b = await page(browser, "?legacy");
    const legacy = await a.evaluate(() => typeof BroadcastChannel === "undefined" && !navigator.locks);
    if (!legacy) throw new Error("the ?legacy page still has BroadcastChannel or navigator.locks");
    // How long until a localStorage write of one window is visible in the other: the other
    // window polls (it must not hold the driver while it waits, so it reports into a global).
    const lags = [];
    for (let i = 0; i < 20; i++) {
      const key = `lag-${i}`;
      await b.evaluate((key) => {
        window.lag = null;
        const t0 = performance.timeOrigin + performance.now();
        const look = () => {
          const v = localStorage.getItem(key);
          if (v !== null) return (window.lag = performance.timeOrigin + performance.now() - Number(v));
          if (performance.timeOrigin + performance.now() - t0 > 5000) return (window.lag = -1);
          setTimeout(look, 0);
        };
        look();
      }, key);
      await sleep(50);
      await a.evaluate((key) => localStorage.setItem(key, String(performance.timeOrigin + performance.now())), key);
      lags.push((await b.waitFor(() => window.lag !== null && { lag: window.lag })).lag);
      await a.evaluate((key) => localStorage.removeItem(key), key);
    }
    lags.sort((x, y) => x - y);
    const at = (q) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))].toFixed(1);
    rows.push({
      what: "write visible in the other window (ms)",
      median: at(0.5),
      p90: at(0.9),
      max: lags.at(-1).toFixed(1),
    });
    for (const gap of [0, 5, 10, 15, 20, 30, 50, 100]) {
      let lost = 0;
      for (let i = 0; i < runs; i++) {
        const agent = agentName("legacy");
        await open(a, { agent, storage: "localstorage" });
        await open(b, { agent, storage: "localstorage" });
        // Both windows wait for a moment on the shared wall clock, then add their fact.
        const start = Date.now() + 200;
        const addAt = ([at, content]) => window.sleepUntil(at).then(() => window.memory.addFact({ content }));
        await Promise.all([a.evaluate(addAt, [start, "From A"]), b.evaluate(addAt, [start + gap, "From B"])]);
        await sleep(300);
        for (const p of [a, b]) await p.evaluate(() => window.memory.close());
        await open(a, { agent, storage: "localstorage" });
        if ((await facts(a)).length < 2) lost++;
        await a.evaluate(() => window.memory.close());
      }
      rows.push({ what: `two adds ${gap} ms apart`, lost: `${lost} of ${runs}` });
    }
  } finally {
    await browser.close();
  }
  return rows;
}

try {
  for (const engine of ENGINES) {
    const skip = skipReason(engine);
    if (skip) {
      console.log(`${engine}: skipped (${skip})`);
      continue;
    }
    const rows = mode === "legacy" ? await legacyRuns(engine) : await killRuns(engine);
    console.log(`\n${engine} (${mode}, ${runs} runs each)`);
    console.table(rows);
  }
} finally {
  await server.close();
}
