// A browser app bundled from the packed tarball by esbuild, Vite and webpack runs in headless
// Chromium: memory is learned, kept in IndexedDB across a reload, and injected, and the page
// loads the .wasm the bundler emitted and nothing from node_modules.
//
// esbuild has no notion of `new URL("….wasm", import.meta.url)`, so its app passes the URL
// of the file loader's copy (`user-memory/wasm`) to `init()`. Vite and webpack emit the
// .wasm the glue points at by themselves: their app is the plain `import { UserMemory }`.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { freshProject } from "../helpers/pack.mjs";
import { chromiumTest as test, launchBrowser } from "../helpers/browser.mjs";
import { startStaticServer } from "../helpers/static-server.mjs";

/** The app; `explicitInit` for bundlers that need the .wasm's URL handed to `init()`. */
function app(explicitInit) {
  return `import { init, UserMemory } from "user-memory";
     ${explicitInit ? `import wasmUrl from "user-memory/wasm";` : ""}

     async function main() {
       ${explicitInit ? "await init(wasmUrl); // the URL esbuild gave the .wasm it emitted" : "// open() loads the .wasm the bundler emitted"}
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
       return { before, block };
     }
     main().then((r) => (window.result = r), (e) => (window.result = { error: String(e), code: e.code }));`;
}

/** Each bundler: write the app into `project`, build it; returns the page's path. */
const bundlers = {
  async esbuild(project) {
    writeFileSync(join(project, "app.js"), app(true));
    writeFileSync(
      join(project, "index.html"),
      `<!doctype html><meta charset="utf-8"><title>bundle</title><script type="module" src="/dist/app.js"></script>`,
    );
    const { build } = await import("esbuild");
    await build({
      entryPoints: [join(project, "app.js")],
      bundle: true,
      minify: true,
      format: "esm",
      platform: "browser",
      outdir: join(project, "dist"),
      publicPath: "/dist/",
      loader: { ".wasm": "file" },
      logLevel: "error",
      absWorkingDir: project,
    });
    return "/index.html";
  },
  async vite(project) {
    writeFileSync(join(project, "app.js"), app(false));
    writeFileSync(
      join(project, "index.html"),
      `<!doctype html><meta charset="utf-8"><title>bundle</title><script type="module" src="./app.js"></script>`,
    );
    const { build } = await import("vite");
    await build({
      root: project,
      base: "/dist/",
      configFile: false,
      logLevel: "error",
      build: { outDir: "dist", target: "es2022" },
    });
    return "/dist/index.html";
  },
  async webpack(project) {
    writeFileSync(join(project, "app.js"), app(false));
    writeFileSync(
      join(project, "index.html"),
      `<!doctype html><meta charset="utf-8"><title>bundle</title><script src="/dist/app.js"></script>`,
    );
    const { default: webpack } = await import("webpack");
    const compiler = webpack({
      mode: "production",
      context: project,
      entry: "./app.js",
      devtool: false,
      performance: { hints: false },
      output: { path: join(project, "dist"), publicPath: "auto", filename: "app.js" },
    });
    await new Promise((resolve, reject) =>
      compiler.run((err, stats) => {
        compiler.close(() => {});
        if (err || stats.hasErrors()) reject(err ?? new Error(stats.toString("errors-only")));
        else resolve();
      }),
    );
    return "/index.html";
  },
};

for (const [name, bundle] of Object.entries(bundlers)) {
  test(
    `${name} bundle of a page: learns, keeps memory in IndexedDB across a reload, injects it`,
    { timeout: 120_000 },
    async () => {
      const project = freshProject();
      const pagePath = await bundle(project);

      const server = await startStaticServer([["/", project]]);
      const { context, close } = await launchBrowser();
      try {
        const page = await context.newPage();
        const requests = [];
        page.on("request", (r) => requests.push(new URL(r.url()).pathname));
        const load = async () => {
          await page.goto(`${server.url}${pagePath}`);
          return page.waitForFunction(() => window.result, null, { timeout: 60_000 }).then((h) => h.jsonValue());
        };
        const first = await load();
        assert.equal(first.error, undefined, `${first.error} (${first.code})`);
        assert.equal(first.before, 0);
        assert.match(first.block, /<memory>[\s\S]*Bikes to work in Utrecht[\s\S]*<\/memory>/);
        assert.ok(
          requests.some((p) => p.startsWith("/dist/") && p.endsWith(".wasm")),
          `the emitted .wasm is what was loaded (${requests.join(", ")})`,
        );
        assert.ok(!requests.some((p) => p.startsWith("/node_modules/")), "the page needs nothing but the bundle");

        const second = await load();
        assert.equal(second.before, 1, "the fact is still in IndexedDB after a reload");
        assert.match(second.block, /Bikes to work in Utrecht/);
      } finally {
        await close();
        await server.close();
      }
    },
  );
}

test(
  "webpack bundle of a web worker (target webworker, the `worker` condition): memory works inside a Worker",
  { timeout: 120_000 },
  async () => {
    const project = freshProject();
    writeFileSync(
      join(project, "worker.js"),
      `import { UserMemory } from "user-memory";
     (async () => {
       const memory = await UserMemory.open({ agent: "in-worker", llm: async () => "{}" });
       await memory.addFact({ content: "Runs in a web worker" });
       const block = await memory.inject([]);
       await memory.close();
       return block;
     })().then((block) => postMessage({ block }), (e) => postMessage({ error: String(e), code: e.code }));`,
    );
    writeFileSync(
      join(project, "index.html"),
      `<!doctype html><meta charset="utf-8"><title>worker</title><script>
       const w = new Worker("/dist/worker.js");
       w.onmessage = (e) => (window.result = e.data);
       w.onerror = (e) => (window.result = { error: e.message });
     </script>`,
    );
    const { default: webpack } = await import("webpack");
    const compiler = webpack({
      mode: "production",
      target: "webworker",
      context: project,
      entry: "./worker.js",
      devtool: false,
      performance: { hints: false },
      output: { path: join(project, "dist"), publicPath: "auto", filename: "worker.js" },
    });
    await new Promise((resolve, reject) =>
      compiler.run((err, stats) => {
        compiler.close(() => {});
        if (err || stats.hasErrors()) reject(err ?? new Error(stats.toString("errors-only")));
        else resolve();
      }),
    );
    const server = await startStaticServer([["/", project]]);
    const { context, close } = await launchBrowser();
    try {
      const page = await context.newPage();
      await page.goto(`${server.url}/index.html`);
      const result = await page
        .waitForFunction(() => window.result, null, { timeout: 60_000 })
        .then((h) => h.jsonValue());
      assert.equal(result.error, undefined, `${result.error} (${result.code})`);
      assert.match(result.block, /<memory>[\s\S]*Runs in a web worker[\s\S]*<\/memory>/);
    } finally {
      await close();
      await server.close();
    }
  },
);
