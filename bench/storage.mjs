// Storage benchmark: commit and open latency of the IndexedDB and localStorage backends in
// headless Chromium, for documents of 100 and 500 facts (median and p90 of many runs); and
// IndexedDB with encryption at rest, by passphrase (PBKDF2 on every open) and by CryptoKey.
//
//   node scripts/build.mjs     (once, if pkg/ is missing or stale)
//   node bench/storage.mjs [runs]
//
// "commit" is `updateFact()` end to end: read the stored document, validate it, apply the
// change, commit it atomically. "open" is `UserMemory.open()` until it resolves (cleanup of
// crash orphans, reading document and queue; for localStorage also becoming the leader tab
// or finding it). The "follower" rows run in a second tab while the first holds the
// localStorage leadership, so every operation crosses BroadcastChannel.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchBrowser } from "../tests/helpers/browser.mjs";
import { startStaticServer } from "../tests/helpers/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.argv[2] ?? 50);
if (!existsSync(join(ROOT, "pkg/wasm/user_memory_bg.wasm"))) {
  console.error("pkg/ is missing: run `node scripts/build.mjs` first");
  process.exit(1);
}

const server = await startStaticServer([
  ["/pkg/", join(ROOT, "pkg")],
  ["/", join(ROOT, "bench")],
]);
const browser = await launchBrowser();
try {
  const page = async () => {
    const p = await browser.context.newPage();
    await p.goto(`${server.url}/storage.html`);
    await p.waitForFunction(() => window.ready === true);
    return p;
  };
  const main = await page();
  const rows = [];
  for (const storage of ["indexeddb", "localstorage"]) {
    for (const n of [100, 500]) {
      const agent = `bench-${storage}-${n}`;
      rows.push({ backend: storage, n, ...(await main.evaluate((a) => window.bench(a), { agent, storage, n, runs })) });
    }
  }
  for (const [encryption, label] of [
    ["passphrase", "indexeddb, encrypted (passphrase)"],
    ["key", "indexeddb, encrypted (CryptoKey)"],
  ]) {
    for (const n of [100, 500]) {
      const agent = `bench-indexeddb-${encryption}-${n}`;
      rows.push({
        backend: label,
        n,
        ...(await main.evaluate((a) => window.bench(a), { agent, storage: "indexeddb", n, runs, encryption })),
      });
    }
  }
  // localStorage from a follower tab: the main page holds the leadership.
  const follower = await page();
  for (const n of [100, 500]) {
    const agent = `bench-localstorage-${n}`;
    await main.evaluate(([a, s]) => window.hold(a, s), [agent, "localstorage"]);
    rows.push({
      backend: "localstorage (follower tab)",
      n,
      ...(await follower.evaluate((a) => window.bench(a), { agent, storage: "localstorage", n, runs, seed: false })),
    });
    await main.evaluate(() => window.held.close());
  }

  const version =
    browser.context.browser()?.version() ??
    (await main.evaluate(() => navigator.userAgent.match(/Chrome\/([\d.]+)/)?.[1]));
  console.log(`headless Chromium ${version}, ${runs} runs each, milliseconds\n`);
  const ms = (x) => x.toFixed(1);
  console.log("| backend | facts | document | commit median | commit p90 | open median | open p90 |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    console.log(
      `| ${r.backend} | ${r.facts} | ${(r.bytes / 1024).toFixed(0)} KB | ${ms(r.commitMedian)} | ${ms(r.commitP90)} | ${ms(r.openMedian)} | ${ms(r.openP90)} |`,
    );
  }
} finally {
  await browser.close();
  await server.close();
}
