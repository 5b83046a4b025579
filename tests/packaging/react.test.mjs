// `user-memory/react` from the packed tarball, with a real React 19 build in headless
// Chromium: a page bundled by esbuild (react, react-dom/client, the browser entry, the hook)
// renders useUserMemory's { document, facts, status, error } and re-renders on update,
// queued, processed and error; switching the memory prop drops the old instance's events.
// And the hook's types under tsc --strict with @types/react.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { consumerProject } from "../helpers/pack.mjs";
import { launchBrowser } from "../helpers/browser.mjs";
import { startStaticServer } from "../helpers/static-server.mjs";
import { tsc } from "../helpers/typescript.mjs";

const APP = `
import { createElement as h, StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { init, UserMemory } from "user-memory";
import wasmUrl from "user-memory/wasm";
import { useUserMemory } from "user-memory/react";

function Panel({ memory }) {
  const { document, status, facts, error } = useUserMemory(memory);
  return h("div", null,
    h("p", { id: "facts" }, facts.map((f) => f.content).join(" | ")),
    h("p", { id: "pending" }, status ? "pending:" + status.pending.join(",") : "no status"),
    h("p", { id: "error" }, error ? error.code : "no error"),
    h("p", { id: "doc" }, document ? "document v" + document.version : "no document"));
}

let fail = false;
const llm = async () => {
  if (fail) throw new Error("the model is down");
  return JSON.stringify({ newFacts: [{ content: "Lives in Porto", category: "context", confidence: 0.9 }] });
};

async function main() {
  await init(wasmUrl);
  // The hook takes the promise open() returns, too (a stable one: made once, here).
  const opening = UserMemory.open({ agent: "react-a", storage: "memory", debounceMs: 60000, llm });
  const root = createRoot(document.getElementById("root"));
  const show = (memory) => root.render(h(StrictMode, null, h(Panel, { memory })));
  show(opening);
  const memory = await opening;
  const other = await UserMemory.open({ agent: "react-b", storage: "memory", debounceMs: 60000, llm });
  await other.addFact({ content: "Only in B" });
  window.app = { memory, other, show, setFail: (v) => (fail = v) };
}
main().then(() => (window.ready = true), (e) => (window.failed = String(e)));
`;

test(
  "useUserMemory in Chromium with React 19: re-renders on update, queued, processed and error",
  { timeout: 180_000 },
  async () => {
    const project = consumerProject("react");
    writeFileSync(join(project, "app.js"), APP);
    writeFileSync(
      join(project, "index.html"),
      `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>react</title><div id="root"></div><script type="module" src="/dist/app.js"></script>`,
    );
    const { build } = await import("esbuild");
    await build({
      entryPoints: [join(project, "app.js")],
      bundle: true,
      format: "esm",
      platform: "browser",
      define: { "process.env.NODE_ENV": '"development"' },
      outdir: join(project, "dist"),
      publicPath: "/dist/",
      loader: { ".wasm": "file" },
      logLevel: "error",
      absWorkingDir: project,
    });
    const server = await startStaticServer([["/", project]]);
    const { context, close } = await launchBrowser();
    try {
      const page = await context.newPage();
      const pageErrors = [];
      page.on("pageerror", (e) => pageErrors.push(String(e)));
      page.on("console", (m) => m.type() === "error" && pageErrors.push(m.text()));
      await page.goto(`${server.url}/index.html`);
      await page.waitForFunction(() => window.ready || window.failed, null, { timeout: 60_000 });
      assert.equal(await page.evaluate(() => window.failed), undefined);
      const text = (id) => page.locator(`#${id}`).textContent();
      /** Waits until element `id` shows `expected` (the hook re-rendered), else fails with what it shows. */
      const shows = async (id, expected) => {
        try {
          await page.waitForFunction(
            ([id, expected]) => document.getElementById(id)?.textContent === expected,
            [id, expected],
            { timeout: 60_000 }, // a re-render, as long as a loaded machine takes
          );
        } catch {
          assert.fail(`#${id} shows ${JSON.stringify(await text(id))}, expected ${JSON.stringify(expected)}`);
        }
      };

      // The first read: an empty document, an empty queue.
      await shows("doc", "document v1.0");
      await shows("pending", "pending:");
      // update (addFact) → the document is re-read.
      await page.evaluate(() => app.memory.addFact({ content: "Keeps bees" }));
      await shows("facts", "Keeps bees");
      // queued → the status shows the thread.
      await page.evaluate(() =>
        app.memory.observe("t1", [
          { role: "user", content: "I live in Porto" },
          { role: "assistant", content: "Nice" },
        ]),
      );
      await shows("pending", "pending:t1");
      // processed (with an update) → the learned fact, an empty queue.
      await page.evaluate(() => app.memory.flush());
      await shows("facts", "Keeps bees | Lives in Porto");
      await shows("pending", "pending:");
      // error → the error's code; the next processed clears it.
      await page.evaluate(async () => {
        app.setFail(true);
        app.memory.observe("t2", [
          { role: "user", content: "I cycle" },
          { role: "assistant", content: "Good" },
        ]);
        await app.memory.flush().catch(() => {});
      });
      await shows("error", "LLM_FAILED");
      await shows("pending", "pending:t2");
      await page.evaluate(async () => {
        app.setFail(false);
        await app.memory.flush();
      });
      await shows("error", "no error");
      await shows("pending", "pending:");

      // Another instance as the prop: its document; the first one's events no longer reach the panel.
      await page.evaluate(() => app.show(app.other));
      await shows("facts", "Only in B");
      // Every text the panel shows from here on is recorded; A's write comes first, so its
      // update would render before B's (events and React's renders keep their order).
      await page.evaluate(() => {
        const el = document.getElementById("facts");
        globalThis.factTexts = [el.textContent];
        new MutationObserver(() => globalThis.factTexts.push(el.textContent)).observe(el, {
          subtree: true,
          childList: true,
          characterData: true,
        });
      });
      await page.evaluate(() => app.memory.addFact({ content: "Written to A after the switch" }));
      await page.evaluate(() => app.other.addFact({ content: "Written to B" }));
      await shows("facts", "Only in B | Written to B");
      const seen = await page.evaluate(() => globalThis.factTexts);
      assert.ok(
        seen.every((t) => !t.includes("Written to A")),
        `an update of the old instance does not re-render the panel: ${JSON.stringify(seen)}`,
      );
      // null: back to the empty state.
      await page.evaluate(() => app.show(null));
      await shows("doc", "no document");
      await shows("facts", "");
      assert.deepEqual(pageErrors, []);
    } finally {
      await close();
      await server.close();
    }
  },
);

test(
  "tsc --strict: useUserMemory's state is typed (an instance, a promise or null), misuse is rejected",
  { timeout: 120_000 },
  () => {
    const dir = consumerProject("react");
    const source = `import { createElement, type ReactElement } from "react";
import type { Fact, UserMemory } from "user-memory";
import { useUserMemory, type UserMemoryState } from "user-memory/react";

export function Facts({ memory }: { memory: UserMemory | null }): ReactElement {
  const state: UserMemoryState = useUserMemory(memory);
  const facts: readonly Fact[] = state.facts;
  const pending: number = state.status?.pending.length ?? 0;
  const code: string | undefined = state.error?.code;
  const version: string | undefined = state.document?.version;
  return createElement("p", null, facts.map((f) => f.content).join(", "), pending, code, version);
}
export function Opening({ opening }: { opening: Promise<UserMemory> }): number {
  return useUserMemory(opening).facts.length;
}
// @ts-expect-error a string is no memory
useUserMemory("memory");
`;
    tsc(dir, ["hook.ts"], { lib: ["es2022", "dom"], types: [] }, { "hook.ts": source });
  },
);
