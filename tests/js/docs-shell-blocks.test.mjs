// The shell blocks of README.md and docs/*.md follow the rule of their JavaScript blocks: each
// runs in tests/packaging/readme.test.mjs (README blocks by their heading's check, docs blocks
// marked `<!-- runnable -->` line by line against the installed package), or is marked
// `<!-- not run: why, naming the file that runs it instead -->`. A block that cannot run here
// (it rebuilds the package, starts a model, needs an API key or a database URL) still must not
// rot: every repository file it names must exist, and every `--option` it passes to one of this
// repository's scripts (`node bench/….mjs`, `cargo run --example …`) must be one that script
// reads. Nothing here needs the built package.
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { ROOT } from "../helpers/pack.mjs";
import { assertNamesFiles, fencedBlocks, shellCommands, staleReferences } from "../helpers/markdown.mjs";

const SH_LANGS = new Set(["sh", "bash", "shell", "console"]);
const files = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];
const blocks = files.flatMap((file) =>
  fencedBlocks(readFileSync(join(ROOT, file), "utf8"))
    .filter((b) => SH_LANGS.has(b.lang))
    .map((b) => ({ ...b, file })),
);
const where = (b) => `${b.file} line ${b.line} (${b.heading}, ${b.lang})`;

test("every shell block of docs/*.md is runnable or says why not, naming the file that runs it instead", () => {
  assert.ok(blocks.length >= 15, `found ${blocks.length} shell blocks`);
  const unmarked = blocks.filter((b) => b.file !== "README.md" && !b.marker).map(where);
  assert.deepEqual(unmarked, [], "mark each <!-- runnable --> or <!-- not run: why, `the file that runs it` -->");
  for (const b of blocks.filter((b) => b.marker?.startsWith("not run:"))) assertNamesFiles(where(b), b.marker);
});

test("the shell blocks that do not run name only files that exist and options their scripts read", () => {
  const read = (f) => readFileSync(join(ROOT, f), "utf8");
  const exists = (f) => existsSync(join(ROOT, f));
  const problems = blocks
    .filter((b) => b.marker?.startsWith("not run:"))
    .flatMap((b) => staleReferences(b.code, exists, read).map((p) => `${where(b)}: ${p}`));
  assert.deepEqual(problems, []);
});

test("shellCommands joins continued lines and drops comments; staleReferences flags what is gone", () => {
  assert.deepEqual(shellCommands('a --x 1 \\\n    b.json   # note\n\n# only a comment\nc "d e"'), [
    ["a", "--x", "1", "b.json"],
    ["c", '"d e"'],
  ]);
  const src = {
    "bench/a.mjs": 'const half = opt("half");',
    "examples/ev.rs": 'args.iter().any(|a| a == "--keywords")',
  };
  const exists = (f) => f in src || f === "tests/data/x.json";
  const check = (code) => staleReferences(code, exists, (f) => src[f]);
  assert.deepEqual(check("node bench/a.mjs --half report   # the report half"), []);
  assert.deepEqual(check("cargo run --release --example ev -- --keywords \\\n    tests/data/x.json:tune"), []);
  assert.deepEqual(check("node bench/a.mjs --ranker both"), ["bench/a.mjs knows no --ranker"]);
  assert.deepEqual(check("node bench/gone.mjs"), ["bench/gone.mjs does not exist"]);
  assert.deepEqual(check("cargo run --example ev -- tests/data/y.json"), ["tests/data/y.json does not exist"]);
  assert.deepEqual(check("cargo run --example nope -- --keywords"), ["examples/nope.rs does not exist"]);
  assert.deepEqual(check("node bench/a.mjs > target/eval/out.json   # an output, not a file of the repository"), []);
});
