// Bundles tests/servers/contract-worker.js the way wrangler does (the workerd condition, the
// .wasm kept as a module of its own, cloudflare:* left to the runtime) and runs it in workerd
// through miniflare with two Durable Object classes (SQLite-backed, and key-value-backed
// with production's value limits: tests/helpers/do-limits.mjs) and a D1 database, both in
// memory.
import { readdirSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { ROOT } from "../helpers/pack.mjs";

/** Starts the worker; `call(path, body?)` fetches from it and returns the JSON answer. */
export async function startWorkerd() {
  const out = mkdtempSync(join(tmpdir(), "um-workerd-"));
  await build({
    entryPoints: [join(ROOT, "tests/servers/contract-worker.js")],
    bundle: true,
    format: "esm",
    outdir: out,
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    loader: { ".wasm": "copy" },
    logLevel: "error",
  });
  const wasm = readdirSync(out).find((f) => f.endsWith(".wasm"));
  const mf = new Miniflare({
    modulesRoot: out,
    modules: [
      { type: "ESModule", path: join(out, "contract-worker.js") },
      { type: "CompiledWasm", path: join(out, wasm) },
    ],
    compatibilityDate: "2026-04-01",
    durableObjects: {
      CONTRACT: { className: "ContractObject", useSQLite: true },
      KV_LIMIT: { className: "KvLimitObject", useSQLite: false },
    },
    d1Databases: ["DB"],
    host: "127.0.0.1",
    port: 0,
  });
  const url = await mf.ready;
  return {
    async call(path, body) {
      const res = await fetch(
        new URL(path, url),
        body === undefined
          ? {}
          : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
      );
      const text = await res.text();
      try {
        return JSON.parse(text);
      } catch {
        throw new Error(`${path}: ${res.status} ${text.slice(0, 500)}`);
      }
    },
    dispose: () => mf.dispose(),
  };
}
