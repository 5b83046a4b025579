// How many facts localStorage holds (≈5 MB an origin, and a commit writes the new record
// beside the old one), in headless Chromium: the largest memory, found by bisection, that
// can be imported and then edited (5 addFact, 5 removeFact: history entries), plain and
// encrypted, and what a commit past it does (STORAGE_QUOTA, the memory kept).
//
//   node scripts/build.mjs     (once, if pkg/ is missing or stale)
//   node bench/localstorage-capacity.mjs
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchBrowser } from "../tests/helpers/browser.mjs";
import { startStaticServer } from "../tests/helpers/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
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
  const page = await browser.context.newPage();
  await page.goto(`${server.url}/storage.html`);
  await page.waitForFunction(() => window.ready === true);
  console.log(`# ${browser.version ?? "chromium"}`);
  console.log("| memory | most facts that fit | record then | chars in localStorage | one fact more |");
  console.log("|---|---|---|---|---|");
  for (const encryption of [null, "key"]) {
    const r = await page.evaluate(async (encryption) => {
      const { UserMemory, documentOf } = window;
      const extra = await window.encryptionOption(encryption);
      let seq = 0;
      /** Whether `n` facts fit: imported, then edited; the sizes when they do. */
      async function fits(n) {
        localStorage.clear();
        const agent = `cap-${seq++}`;
        const memory = await UserMemory.open({
          agent,
          storage: "localstorage",
          llm: async () => "{}",
          maxFacts: 100_000,
          ...extra,
        });
        try {
          await memory.import(documentOf(n));
          const ids = [];
          for (let i = 0; i < 5; i++)
            ids.push((await memory.addFact({ content: `Added fact ${i} about a side project` })).id);
          for (const id of ids) await memory.removeFact(id);
          const pointer = JSON.parse(localStorage.getItem(`user-memory/${agent}/doc`));
          let total = 0;
          for (let i = 0; i < localStorage.length; i++) {
            const k = localStorage.key(i);
            total += k.length + localStorage.getItem(k).length;
          }
          return { ok: true, record: localStorage.getItem(pointer.key).length, total };
        } catch (e) {
          return { ok: false, code: e.code, facts: (await memory.get()).facts.length };
        } finally {
          await memory.close();
        }
      }
      let lo = 100;
      let hi = 40_000;
      let best = null;
      let failure = null;
      while (hi - lo > 50) {
        const mid = Math.floor((lo + hi) / 2);
        const r = await fits(mid);
        if (r.ok) {
          lo = mid;
          best = r;
        } else {
          hi = mid;
          failure = r;
        }
      }
      localStorage.clear();
      return { n: lo, best, failure };
    }, encryption);
    const kib = (c) => `${(c / 1024).toFixed(0)} K chars`;
    console.log(
      `| ${encryption ? "encrypted (CryptoKey)" : "plain"} | ${r.n} | ${kib(r.best.record)} | ${kib(r.best.total)} | ${r.failure ? `${r.failure.code}, the memory kept (${r.failure.facts} facts readable)` : "-"} |`,
    );
  }
} finally {
  await browser.close();
  await server.close();
}
