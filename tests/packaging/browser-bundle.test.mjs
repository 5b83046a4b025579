// A browser app bundled with esbuild from the packed tarball (minified, the .wasm emitted
// by the file loader through the `user-memory/wasm` export) runs in headless Chromium:
// memory is learned, kept in IndexedDB across a reload, and injected.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { freshProject } from "../helpers/pack.mjs";
import { launchBrowser } from "../helpers/browser.mjs";
import { startStaticServer } from "../helpers/static-server.mjs";

test("esbuild bundle of a page: learns, keeps memory in IndexedDB across a reload, injects it", { timeout: 120_000 }, async () => {
  const project = freshProject({ extra: ["esbuild"] });
  writeFileSync(
    join(project, "app.js"),
    `import { init, UserMemory } from "user-memory";
     import wasmUrl from "user-memory/wasm";

     async function main() {
       await init(wasmUrl); // the URL esbuild gave the .wasm it emitted
       const memory = await UserMemory.open({
         agent: "bundled",
         llm: async () => JSON.stringify({ newFacts: [{ content: "Bikes to work in Utrecht", category: "context", confidence: 0.9 }] }),
       });
       const before = (await memory.get()).facts.length;
       if (before === 0) {
         memory.observe("t1", [{ role: "user", content: "I bike to work in Utrecht every day" }, { role: "assistant", content: "Nice!" }]);
         await memory.flush();
       }
       const block = await memory.inject([{ role: "user", content: "How should I commute tomorrow?" }]);
       await memory.close();
       return { before, block, wasmUrl };
     }
     main().then((r) => (window.result = r), (e) => (window.result = { error: String(e), code: e.code }));`,
  );
  writeFileSync(join(project, "index.html"), `<!doctype html><meta charset="utf-8"><title>bundle</title><script type="module" src="/dist/app.js"></script>`);
  const { build } = await import(join(project, "node_modules/esbuild/lib/main.js"));
  await build({
    entryPoints: [join(project, "app.js")], bundle: true, minify: true, format: "esm", platform: "browser",
    outdir: join(project, "dist"), publicPath: "/dist/", loader: { ".wasm": "file" }, logLevel: "error",
  });

  const server = await startStaticServer([["/", project]]);
  const { context, close } = await launchBrowser();
  try {
    const page = await context.newPage();
    const requests = [];
    page.on("request", (r) => requests.push(new URL(r.url()).pathname));
    const load = async () => {
      await page.goto(`${server.url}/index.html`);
      return page.waitForFunction(() => window.result, null, { timeout: 60_000 }).then((h) => h.jsonValue());
    };
    const first = await load();
    assert.equal(first.error, undefined, `${first.error} (${first.code})`);
    assert.equal(first.before, 0);
    assert.match(first.block, /<memory>[\s\S]*Bikes to work in Utrecht[\s\S]*<\/memory>/);
    assert.ok(requests.some((p) => p.startsWith("/dist/") && p.endsWith(".wasm")), "the emitted .wasm is what was loaded");
    assert.ok(!requests.some((p) => p.startsWith("/node_modules/")), "the page needs nothing but the bundle");

    const second = await load();
    assert.equal(second.before, 1, "the fact is still in IndexedDB after a reload");
    assert.match(second.block, /Bikes to work in Utrecht/);
  } finally {
    await close();
    await server.close();
  }
});
