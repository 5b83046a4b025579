// The packed package, installed into fresh projects, loads and works in each runtime with
// the same `import { UserMemory } from "user-memory"`: Node ESM, workerd, Chromium.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { freshProject, packOnce, ROOT } from "../helpers/pack.mjs";
import { chromiumTest, launchBrowser } from "../helpers/browser.mjs";
import { startStaticServer } from "../helpers/static-server.mjs";

test("npm pack gives user-memory-<version>.tgz with the wasm, the entries and the types", () => {
  const tgz = packOnce();
  const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
  assert.match(tgz, new RegExp(`user-memory-${version.replaceAll(".", "\\.")}\\.tgz$`));
  const listing = execFileSync("tar", ["-tzf", tgz], { encoding: "utf8" });
  const subpaths = [
    "file-store",
    "durable-object-store",
    "d1-store",
    "ai-sdk",
    "postgres-store",
    "redis-store",
    "sqlite-store",
  ].flatMap((f) => [`package/pkg/${f}.js`, `package/pkg/${f}.d.ts`]);
  for (const f of [
    "package/pkg/wasm/user_memory_bg.wasm",
    "package/pkg/node.js",
    "package/pkg/browser.js",
    "package/pkg/workers.js",
    "package/pkg/index.d.ts",
    "package/pkg/wasm/user_memory.d.ts",
    ...subpaths,
    "package/README.md",
  ]) {
    assert.ok(listing.includes(f), `${f} is in the tarball`);
  }
  assert.ok(!listing.includes("package/src/"), "Rust sources are not shipped");
});

test("every export of package.json resolves to a file in the tarball, with types for each subpath", () => {
  // `ai`: the peer user-memory/ai-sdk imports jsonSchema() from.
  const dir = freshProject({ extra: ["ai"] });
  const manifest = JSON.parse(readFileSync(join(dir, "node_modules/user-memory/package.json"), "utf8"));
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    const files = typeof target === "string" ? [target] : Object.values(target);
    for (const f of files) assert.ok(existsSync(join(dir, "node_modules/user-memory", f)), `${subpath} → ${f}`);
    if (typeof target === "object") assert.equal(Object.keys(target)[0], "types", `${subpath}: "types" comes first`);
  }
  // The subpaths load in Node without the wasm (they are plain JS) and expose their API.
  const out = execFileSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `const n = await import("user-memory/node"); const w = await import("user-memory/workers"); const a = await import("user-memory/ai-sdk");
      const p = await import("user-memory/postgres"); const r = await import("user-memory/redis"); const s = await import("user-memory/sqlite");
      console.log([typeof n.fileStore, typeof w.durableObjectStore, typeof w.d1Store, typeof a.userMemoryMiddleware, typeof a.memoryTools, typeof p.postgresStore, typeof r.redisStore, typeof s.sqliteStore].join(","))`,
    ],
    { cwd: dir, encoding: "utf8" },
  );
  assert.equal(
    out.trim(),
    "function,function,function,function,function,function,function,function",
    "each subpath loads without its database client installed",
  );
});

test("Node ESM: import, open, add a fact, export", () => {
  const dir = freshProject();
  writeFileSync(
    join(dir, "main.mjs"),
    `import { UserMemory } from "user-memory";
     const m = await UserMemory.open({ storage: "memory", llm: async () => "{}" });
     const f = await m.addFact({ content: "Writes Go microservices", category: "knowledge" });
     const doc = await m.export();
     await m.close();
     console.log(JSON.stringify({ id: f.id, facts: doc.facts.length, version: doc.version }));`,
  );
  const out = JSON.parse(execFileSync(process.execPath, ["main.mjs"], { cwd: dir, encoding: "utf8" }));
  assert.match(out.id, /^fact_[0-9a-f]{8}$/);
  assert.deepEqual([out.facts, out.version], [1, "1.0"]);
});

test("workerd: a Worker bundled from the package answers a request on 127.0.0.1", async () => {
  const dir = freshProject({ extra: ["esbuild", "miniflare"] });
  writeFileSync(
    join(dir, "worker.js"),
    `import { UserMemory } from "user-memory";
     export default {
       async fetch(request) {
         const m = await UserMemory.open({ storage: "memory", agent: "w", llm: async () => "{}" });
         await m.addFact({ content: "Runs on workerd" });
         const doc = await m.export();
         return Response.json({ facts: doc.facts.map((f) => f.content), hasWindow: typeof window !== "undefined" });
       },
     };`,
  );
  const { build } = await import(join(dir, "node_modules/esbuild/lib/main.js"));
  // What wrangler does: resolve with the workerd condition, keep the .wasm as a module.
  await build({
    entryPoints: [join(dir, "worker.js")],
    bundle: true,
    format: "esm",
    outdir: join(dir, "dist"),
    conditions: ["workerd", "worker", "browser"],
    loader: { ".wasm": "copy" },
    logLevel: "error",
  });
  const wasmFile = (await import("node:fs")).readdirSync(join(dir, "dist")).find((f) => f.endsWith(".wasm"));
  assert.ok(wasmFile, "the .wasm is emitted next to the bundle");
  const { Miniflare } = await import(join(dir, "node_modules/miniflare/dist/src/index.js"));
  const mf = new Miniflare({
    modulesRoot: join(dir, "dist"),
    modules: [
      { type: "ESModule", path: join(dir, "dist/worker.js") },
      { type: "CompiledWasm", path: join(dir, "dist", wasmFile) },
    ],
    compatibilityDate: "2026-04-01",
    host: "127.0.0.1",
    port: 0,
  });
  try {
    const url = await mf.ready;
    assert.equal(url.hostname, "127.0.0.1");
    const res = await fetch(url);
    const body = await res.json();
    assert.deepEqual(body, { facts: ["Runs on workerd"], hasWindow: false });
  } finally {
    await mf.dispose();
  }
});

chromiumTest(
  "Chromium: a page importing the browser entry opens memory and exports it; a failed wasm load is retried, not remembered",
  async () => {
    const dir = freshProject();
    writeFileSync(
      join(dir, "index.html"),
      `<!doctype html><meta charset="utf-8">
     <script type="importmap">{ "imports": { "user-memory": "/node_modules/user-memory/pkg/browser.js" } }</script>
     <script type="module">
       import { init, UserMemory } from "user-memory";
       try {
         // A first load that fails (a wrong URL, as when offline) ...
         const failed = await init("/no-such.wasm").then(() => false, () => true);
         // ... does not stick: open() loads the real module.
         const m = await UserMemory.open({ storage: "memory", llm: async () => "{}" });
         await m.addFact({ content: "Reads in the browser" });
         const doc = await m.export();
         window.result = { failed, facts: doc.facts.map((f) => f.content) };
       } catch (e) { window.result = { error: String(e), code: e.code }; }
     </script>`,
    );
    const server = await startStaticServer([["/", dir]]);
    const { context, close } = await launchBrowser();
    try {
      const page = await context.newPage();
      await page.goto(`${server.url}/index.html`);
      const result = await page
        .waitForFunction(() => window.result, null, { timeout: 60_000 })
        .then((h) => h.jsonValue());
      assert.deepEqual(result, { failed: true, facts: ["Reads in the browser"] });
    } finally {
      await close();
      await server.close();
    }
  },
);
