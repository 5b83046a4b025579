// `tsc --strict --noEmit` (TypeScript from this repository's node_modules) on files of a
// consumer project, for the packaging tests of the published types.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./pack.mjs";

/** The options every check uses: strict, declarations of libraries checked too. */
export const STRICT = {
  strict: true,
  noEmit: true,
  skipLibCheck: false,
  target: "es2022",
  module: "nodenext",
  moduleResolution: "nodenext",
};

/**
 * Compiles `files` in `dir` (with `sources`, `{ name: text }`, written first) under STRICT
 * plus `compilerOptions`; returns tsc's output, throws with it on errors.
 */
export function tsc(dir, files, compilerOptions = {}, sources = {}) {
  for (const [name, text] of Object.entries(sources)) writeFileSync(join(dir, name), text);
  const config = `tsconfig.${files[0]}.json`;
  writeFileSync(
    join(dir, config),
    JSON.stringify({ compilerOptions: { ...STRICT, ...compilerOptions }, files }, null, 2),
  );
  try {
    return execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", config], {
      cwd: dir,
      encoding: "utf8",
    });
  } catch (e) {
    throw new Error(`tsc ${files[0]} failed:\n${e.stdout}${e.stderr}`);
  }
}

/** Compiler options for a project that has no @types/node of its own: this repository's. */
export const NODE_TYPES = { typeRoots: [join(ROOT, "node_modules/@types")], types: ["node"] };
