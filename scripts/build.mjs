// Builds the npm package into pkg/:
//   cargo build (wasm32, release, size profile) → wasm-bindgen --target web → std's panic
//   paths stubbed to a trap (scripts/panic-stubs.mjs) → wasm-opt -Oz
//   (binaryen from npm; Debian's wasm-opt 108 breaks wasm-bindgen's output) → minify the
//   JS glue (esbuild) → copy the JS
//   entries → size report (raw and gzip) → pkg/size.json.
//
//   node scripts/build.mjs              build
//   node scripts/build.mjs --if-stale   build only if a source is newer than pkg/
//   node scripts/build.mjs --check-size fail if wasm + glue gzipped (pkg/size.json) exceed the budget
//   node scripts/build.mjs --variants[=a,b]  also build and measure the lighter Cargo feature sets
//                                       (VARIANTS) into target/variants/, record them in
//                                       pkg/size.json and the table of docs/size.md
import { execFileSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { homedir } from "node:os";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// scripts/setup.sh installs wasm-bindgen-cli into cargo's bin folder, which need not be on
// PATH (a system cargo, a fresh shell): look there too.
process.env.PATH = `${process.env.CARGO_HOME ?? join(homedir(), ".cargo")}/bin${delimiter}${process.env.PATH ?? ""}`;
const pkg = join(root, "pkg");
const args = new Set(process.argv.slice(2));
/** `--variants` (all) or `--variants=lite,no-embed` (those; the others' last numbers kept). */
const variantsArg = process.argv.slice(2).find((a) => a === "--variants" || a.startsWith("--variants="));
const variantsWanted = variantsArg?.includes("=") ? variantsArg.slice("--variants=".length).split(",") : null;
/** Budget for wasm + JS glue, gzipped: the measured size of main + 2 KB (266.0 KB with `userSaid`, issue 29's statements of the user, +3.1 KB on a main at 262.9 KB; 261.8 KB with the rollback mark outside the store, issue 25 item 2's rest, +3.0 KB on a main at 258.8 KB; 258.2 KB on 8dd0b28 with the adaptive block (`extraFacts`) and inject()'s boundary work (names made once, only the end of the chat read, no spawned task), landed together and measured together; 256.0 KB with forget by meaning (the embedder's part of issue 25 item 8) on 2dd4565, which also holds the apply_delta refactor 087a086 measured with it: +3.7 KB together; 252.3 KB with "no value" markers against the check-then-write race of encryption, issue 25 item 4, +1.5 KB on a main at 250.8 KB; 249.1 KB with stripping on store, issue 25 item 12, on main at be1dae5; 246.7 KB with forget variants and safeText, issue 25 items 7, 8, 11, +2.8 KB; 243.9 KB with encryption integrity, +10.1 KB: the authenticated key record, revision-bound values and rollback marks, rotation to a new data key, stale-writer checks, docs/security.md; 233.8 KB with message times in every shape, observe()'s `at` and event dates on facts, issue 23, +2.1 KB; 231.6 KB with the signal hints, +1.5 KB; 226.7 KB with the small-model extraction of issue 29, +7.5 KB: the facts-first schema, section salvage, prompt-copy, fragment and task-residue gates, loop retry, extraBody, learning counters; 219.2 KB before with the userId alias and hide_from_ui in every shape); raised from 150 KB for the memory-quality, semantic-recall, history and encryption features, then from 180 KB when careful memory came on top of a main already at 179.3 KB, then from 200 KB for the leader protocol's fixes and error causes on a main at 199.2 KB, then from 204 KB for history, forget tombstones and encryption at rest (+16.6 KB on a main at 201.9 KB): docs/size.md). */
export const BUDGET_GZIP_BYTES = 268 * 1024;

function newest(dir) {
  let t = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

function stale() {
  const stamp = join(pkg, "size.json");
  if (!existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  const sources = Math.max(
    newest(join(root, "src")),
    newest(join(root, "js")),
    statSync(join(root, "Cargo.toml")).mtimeMs,
    statSync(join(root, "Cargo.lock")).mtimeMs,
  );
  return sources > built;
}

function run(cmd, argv, opts = {}) {
  execFileSync(cmd, argv, { cwd: root, stdio: "inherit", ...opts });
}

export function sizeReport() {
  const file = (name) => {
    const bytes = readFileSync(join(pkg, name));
    return { file: name, raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
  };
  const wasm = file("wasm/user_memory_bg.wasm");
  const glue = file("wasm/user_memory.js");
  const entries = ["browser.js", "node.js", "workers.js"].map(file);
  const total = { ...measure(join(pkg, "wasm")) };
  return { wasm, glue, entries, total, budgetGzip: BUDGET_GZIP_BYTES };
}

function printReport(r) {
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  console.log("\nsize report (gzip -9):");
  for (const f of [r.wasm, r.glue, ...r.entries]) {
    console.log(`  ${f.file.padEnd(28)} ${kb(f.raw).padStart(10)} raw ${kb(f.gzip).padStart(10)} gzip`);
  }
  console.log(
    `  ${"wasm + glue".padEnd(28)} ${kb(r.total.raw).padStart(10)} raw ${kb(r.total.gzip).padStart(10)} gzip   (budget ${kb(r.budgetGzip)}; brotli ${kb(r.total.brotli)})`,
  );
  for (const [name, v] of Object.entries(r.variants ?? {}))
    console.log(
      `  variant ${name.padEnd(20)} ${kb(v.raw).padStart(10)} raw ${kb(v.gzip).padStart(10)} gzip ${kb(v.brotli).padStart(10)} brotli`,
    );
}

/** Serialises builds (several test runs may build at once); a lock older than 10 min is stale. */
async function withBuildLock(fn) {
  const lock = join(root, "target", ".build-lock");
  mkdirSync(join(root, "target"), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 600_000) rmSync(lock, { recursive: true, force: true });
      } catch {}
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * The builds measured by `--variants`: name → [Cargo features (null: the default set, all on),
 * what is left out]. Only `default` is published; the others tell what each feature costs.
 */
export const VARIANTS = {
  default: [null, "nothing (published)"],
  "no-embed": [["encryption", "http"], "embeddings"],
  "no-encryption": [["embed", "http"], "encryption at rest"],
  "no-http": [["embed", "encryption"], "the built-in fetch transports"],
  "no-embed-no-encryption": [["http"], "embeddings, encryption"],
  lite: [[], "embeddings, encryption, the fetch transports"],
};

/**
 * Builds the wasm with `features` (null: the default set) into `dir`: cargo build (wasm32,
 * release) → wasm-bindgen --target web → panic stubs → wasm-opt -Oz → the glue minified.
 */
async function buildWasm(features, dir) {
  const cargoArgs = ["build", "--lib", "--release", "--target", "wasm32-unknown-unknown"];
  if (features !== null)
    cargoArgs.push("--no-default-features", ...(features.length ? ["--features", features.join(",")] : []));
  run("cargo", cargoArgs);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  run("wasm-bindgen", [
    "--target",
    "web",
    "--out-dir",
    dir,
    "--out-name",
    "user_memory",
    // The name section stays for the panic stubs; wasm-opt --strip-debug removes it.
    "--remove-producers-section",
    join(root, "target/wasm32-unknown-unknown/release/user_memory.wasm"),
  ]);
  const wasm = join(dir, "user_memory_bg.wasm");
  const { stubPanics } = await import("./panic-stubs.mjs");
  stubPanics(wasm);
  // --merge-similar-functions folds monomorphizations that differ only in constants, and
  // --converge repeats -Oz until it stops shrinking (0.5 KB gzip together).
  run(process.execPath, [
    join(root, "node_modules/binaryen/bin/wasm-opt"),
    "-Oz",
    "--merge-similar-functions",
    "--converge",
    "--strip-debug",
    wasm,
    "-o",
    wasm,
  ]);
  // Minify the JS glue (40 KB → 16 KB raw, 8.2 → 4.9 KB gzip). Export names, the import
  // object's keys and `new URL("…wasm", import.meta.url)` (which bundlers look for) are
  // kept; the documentation lives in the .d.ts. Lines stay under ~160 characters: Node
  // prints the source line of an uncaught error, which for one minified line was the
  // whole 17 KB of glue before the message (+0.2 KB gzip, docs/size.md).
  const glue = join(dir, "user_memory.js");
  const { transformSync } = await import("esbuild");
  writeFileSync(
    glue,
    transformSync(readFileSync(glue, "utf8"), { minify: true, format: "esm", target: "es2020", lineLimit: 160 }).code,
  );
}

/** wasm + glue of a build folder: raw, gzip -9 and brotli -11 bytes. */
function measure(dir) {
  const total = { raw: 0, gzip: 0, brotli: 0 };
  for (const f of ["user_memory_bg.wasm", "user_memory.js"]) {
    const bytes = readFileSync(join(dir, f));
    total.raw += bytes.length;
    total.gzip += gzipSync(bytes, { level: 9 }).length;
    total.brotli += brotliCompressSync(bytes, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }).length;
  }
  return total;
}

/** Builds and measures every variant but the default (already in pkg/). */
async function measureVariants(report, previous = {}) {
  const variants = { default: { features: "default", leftOut: VARIANTS.default[1], ...report.total } };
  for (const [name, [features, leftOut]] of Object.entries(VARIANTS)) {
    if (features === null) continue;
    if (variantsWanted && !variantsWanted.includes(name)) {
      if (previous[name]) variants[name] = previous[name];
      continue;
    }
    const dir = join(root, "target", "variants", name);
    await buildWasm(features, dir);
    variants[name] = { features: features.join(",") || "none", leftOut, ...measure(dir) };
  }
  // Leave target/ with the default build, which the next `build.mjs` relinks from.
  run("cargo", ["build", "--lib", "--release", "--target", "wasm32-unknown-unknown"]);
  return variants;
}

const DOCS_BEGIN = "<!-- variants: generated by `node scripts/build.mjs --variants` -->";
const DOCS_END = "<!-- /variants -->";

/** The table of docs/size.md between the markers, from the measured variants. */
function writeDocsTable(variants) {
  const path = join(root, "docs", "size.md");
  const text = readFileSync(path, "utf8");
  const at = text.indexOf(DOCS_BEGIN);
  const end = text.indexOf(DOCS_END);
  if (at < 0 || end < at) throw new Error(`docs/size.md has no ${DOCS_BEGIN} … ${DOCS_END} block`);
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  const base = variants.default;
  const rows = Object.entries(variants).map(
    ([name, v]) =>
      `| \`${name}\` | ${v.leftOut} | ${kb(v.raw)} | **${kb(v.gzip)}** | ${name === "default" ? "" : `−${kb(base.gzip - v.gzip)}`} | ${kb(v.brotli)} |`,
  );
  const git = (...a) => execFileSync("git", a, { cwd: root, encoding: "utf8" }).trim();
  const commit =
    git("rev-parse", "--short", "HEAD") + (git("status", "--porcelain", "src", "Cargo.toml") ? " + changes" : "");
  const table = [
    DOCS_BEGIN,
    "",
    `Measured on ${commit} (\`node scripts/build.mjs --variants\`):`,
    "",
    "| build | left out | wasm + glue raw | gzip -9 | vs default | brotli -11 |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    DOCS_END,
  ].join("\n");
  writeFileSync(path, text.slice(0, at) + table + text.slice(end + DOCS_END.length));
}

await withBuildLock(async () => {
  const previous = existsSync(join(pkg, "size.json")) ? JSON.parse(readFileSync(join(pkg, "size.json"), "utf8")) : {};
  if (args.has("--if-stale") && !stale() && !variantsArg) {
    console.log("pkg/ is up to date");
  } else {
    const t0 = Date.now();
    if (!(args.has("--if-stale") && !stale())) {
      // Build into a scratch folder and swap it in, so readers never see a half-written pkg/.
      const scratch = join(root, "target", "pkg-wasm-next");
      await buildWasm(null, scratch);
      mkdirSync(pkg, { recursive: true });
      const old = join(root, "target", "pkg-wasm-old");
      rmSync(old, { recursive: true, force: true });
      if (existsSync(join(pkg, "wasm"))) renameSync(join(pkg, "wasm"), old);
      renameSync(scratch, join(pkg, "wasm"));
      rmSync(old, { recursive: true, force: true });
      // Every entry, adapter and type file of js/ (the subpath exports of package.json point at them).
      for (const f of readdirSync(join(root, "js")).filter((f) => f.endsWith(".js") || f.endsWith(".d.ts"))) {
        copyFileSync(join(root, "js", f), join(pkg, f));
      }
    }
    const report = sizeReport();
    // Variants are measured on demand only (each is a build of its own); the last measured
    // ones are carried over, with the default size they were measured beside.
    if (variantsArg) {
      report.variants = await measureVariants(report, previous.variants);
      writeDocsTable(report.variants);
    } else if (previous.variants) report.variants = previous.variants;
    writeFileSync(join(pkg, "size.json"), JSON.stringify(report, null, 2) + "\n");
    printReport(report);
    console.log(`built pkg/ in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
});

if (args.has("--check-size")) {
  // The measured size from the build's report; the budget as this file sets it now.
  const r = JSON.parse(readFileSync(join(pkg, "size.json"), "utf8"));
  if (r.total.gzip > BUDGET_GZIP_BYTES) {
    console.error(`size budget exceeded: wasm + glue = ${r.total.gzip} bytes gzipped > ${BUDGET_GZIP_BYTES}`);
    process.exit(1);
  }
  console.log(`size budget ok: ${r.total.gzip} ≤ ${BUDGET_GZIP_BYTES} bytes gzipped (pkg/size.json)`);
}
