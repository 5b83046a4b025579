// The published types, from the packed tarball: `tsc --strict` on consumers of every public
// API (Node + browser + AI SDK; a Worker against @cloudflare/workers-types), and no `any` in
// the public declaration files.
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { freshProject, ROOT } from "../helpers/pack.mjs";
import { tsc as compile } from "../helpers/typescript.mjs";

const tsc = (files, compilerOptions) => compile(project, files, compilerOptions);

let project;
before(() => {
  project = freshProject({ extra: ["typescript", "@types/node", "ai", "@cloudflare/workers-types"] });
  for (const f of ["consumer.ts", "consumer-worker.ts"])
    copyFileSync(join(ROOT, "tests/packaging", f), join(project, f));
  // ai's declarations import "json-schema" but do not depend on @types/json-schema: a project
  // checking library declarations (skipLibCheck: false, as here) needs those types. A stand-in:
  writeFileSync(
    join(project, "json-schema.d.ts"),
    `declare module "json-schema" {
       export interface JSONSchema7 { [key: string]: unknown }
       export type JSONSchema7Definition = JSONSchema7 | boolean;
       export type JSONSchema7TypeName = string;
     }`,
  );
});

test(
  "tsc --strict: a Node/browser consumer of every API, the file store and the AI SDK middleware",
  { timeout: 120_000 },
  () => {
    tsc(["consumer.ts", "json-schema.d.ts"], { lib: ["es2022", "dom", "dom.iterable"], types: ["node"] });
  },
);

test(
  "tsc --strict: a Worker with a Durable Object, typed by @cloudflare/workers-types (no DOM, no Node)",
  { timeout: 120_000 },
  () => {
    tsc(["consumer-worker.ts"], { lib: ["es2022"], types: ["@cloudflare/workers-types"] });
  },
);

test(
  "tsc --strict: the types catch misuse (a deliberately wrong consumer fails to compile)",
  { timeout: 120_000 },
  () => {
    writeFileSync(
      join(project, "wrong.ts"),
      `import { UserMemory } from "user-memory";
     const m = await UserMemory.open({ storage: "memory", llm: async () => "{}" });
     const n: number = await m.inject([]);
     export { n };`,
    );
    assert.throws(() => tsc(["wrong.ts"], { lib: ["es2022", "dom"], types: [] }), /wrong\.ts.*TS2322/s);
  },
);

test("the public declaration files contain no `any`", () => {
  const pkg = join(project, "node_modules/user-memory/pkg");
  const stripComments = (s) => s.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  for (const f of readdirSync(pkg).filter((f) => f.endsWith(".d.ts"))) {
    assert.doesNotMatch(stripComments(readFileSync(join(pkg, f), "utf8")), /\bany\b/, `pkg/${f}`);
  }
  // The generated declarations: only wasm-bindgen's internal InitOutput (shadowed by a precise
  // one in index.d.ts, so never reachable from "user-memory") may use `any`.
  const generated = stripComments(readFileSync(join(pkg, "wasm/user_memory.d.ts"), "utf8")).replace(
    /export interface InitOutput \{[\s\S]*?\n\}/,
    "",
  );
  const lines = generated.split("\n").filter((l) => /\bany\b/.test(l));
  assert.deepEqual(lines, [], "`any` in the generated public declarations");
});
