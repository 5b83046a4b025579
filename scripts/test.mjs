// Runs every test, in order, and prints a timing summary. Called by `npm test` after
// scripts/setup.sh. Stops at the first failing step (its output is above the summary).
//
//   node scripts/test.mjs            everything
//   node scripts/test.mjs lint rust  only the named steps (see STEPS)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { homedir } from "node:os";
import { fileURLToPath } from "node:url";
import { findBrowsers } from "./browsers.mjs";
import { allowedSkips } from "./skip-reporter.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// scripts/setup.sh installs wasm-bindgen-cli into cargo's bin folder, which need not be on
// PATH (a system cargo, a fresh shell): look there too.
process.env.PATH = `${process.env.CARGO_HOME ?? join(homedir(), ".cargo")}/bin${delimiter}${process.env.PATH ?? ""}`;
const node = process.execPath;
// The wasm browser tests run in Chromium through chromedriver, wherever it is installed.
const chromedriver = findBrowsers().chromium.driver;
const wasmEnv = { ...(chromedriver ? { CHROMEDRIVER: chromedriver } : {}), WASM_BINDGEN_TEST_TIMEOUT: "120" };

function jsTests(dir) {
  const d = join(root, dir);
  if (!existsSync(d)) return [];
  return readdirSync(d)
    .filter((f) => f.endsWith(".test.mjs"))
    .sort()
    .map((f) => join(dir, f));
}

/** The tests/wasm_*.rs targets; the browser ones (wasm_browser*) only where chromedriver is. */
function wasmTests() {
  return readdirSync(join(root, "tests"))
    .filter((f) => /^wasm_.*\.rs$/.test(f))
    .filter((f) => chromedriver || !f.startsWith("wasm_browser"))
    .sort()
    .flatMap((f) => ["--test", f.replace(/\.rs$/, "")]);
}

/** name → [description, command, args, extra env] */
const STEPS = {
  lint: [
    "rustfmt --check, prettier --check (JS, TS), tsc --checkJs --strict over js/ and each module against its .d.ts, src/ imports against HACKING.md's map (no loops), no function of src/ over 100 lines, clippy -D warnings (native, and wasm32 with the wasm tests)",
    "bash",
    [
      "-c",
      [
        "cargo fmt --check",
        `"${node}" node_modules/prettier/bin/prettier.cjs --check --log-level warn .`,
        `"${node}" scripts/check-js.mjs`,
        `"${node}" scripts/check-layers.mjs`,
        `"${node}" scripts/long-fns.mjs --check`,
        "cargo clippy --quiet --all-targets -- -D warnings",
        "cargo clippy --quiet --lib --features serde -- -D warnings",
        "cargo clippy --quiet --target wasm32-unknown-unknown --lib " + wasmTests().join(" ") + " -- -D warnings",
      ].join(" && "),
    ],
    {},
  ],
  // The optional `serde` feature (for Rust users of the rlib, never in the wasm) is built and
  // its unit tests run here too, so it cannot rot unseen.
  rust: [
    "host cargo test (pure core, engine, doctests; the lib again with --features serde)",
    "bash",
    ["-c", "cargo test --quiet && cargo test --quiet --lib --features serde"],
    {},
  ],
  build: [
    "build the package (wasm-bindgen + wasm-opt) and check the size budget",
    node,
    ["scripts/build.mjs", "--if-stale", "--check-size"],
    {},
  ],
  // Only the tests/wasm_*.rs targets: the native test files use native-only dev-dependencies
  // (and wasm doctests would "pass" without running).
  wasm: [
    "wasm tests in Node and headless Chromium (wasm-bindgen-test-runner)",
    "cargo",
    ["test", "--target", "wasm32-unknown-unknown", ...wasmTests()],
    wasmEnv,
  ],
  js: [
    "JS tests of the built package (node:test)",
    node,
    ["--test", "--test-concurrency=1", ...jsTests("tests/js")],
    {},
  ],
  browser: [
    "browser tests in Chromium, Firefox and WebKit (tests/helpers/engines.mjs)",
    node,
    ["--test", "--test-concurrency=1", ...jsTests("tests/browser")],
    {},
  ],
  packaging: [
    "packaging smoke tests from the packed tarball",
    node,
    ["--test", "--test-concurrency=1", ...jsTests("tests/packaging")],
    {},
  ],
  servers: [
    "server stores on real Postgres, Redis, SQLite (Node 22/24, Bun) and workerd; CLI; MCP server",
    node,
    ["--test", "--test-concurrency=1", ...jsTests("tests/servers")],
    {},
  ],
};

if (!chromedriver)
  console.error(
    "\n!!! no chromedriver found (set CHROMEDRIVER): the wasm tests run in Node only, the browser ones are SKIPPED\n",
  );

const skipDir = join(root, "target", "test-skips");
rmSync(skipDir, { recursive: true, force: true });
mkdirSync(skipDir, { recursive: true });
/** Skipped tests and suites of this run: { step, name, file, reason }. */
const skipped = [];

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(STEPS);
const results = [];
const t0 = Date.now();
for (const name of names) {
  const step = STEPS[name];
  if (!step) {
    console.error(`unknown step ${name}; steps: ${Object.keys(STEPS).join(", ")}`);
    process.exit(2);
  }
  const [description, cmd, args, env] = step;
  if (cmd === node && args[0] === "--test" && args.length === 3) {
    results.push([name, "skipped (no tests)", 0]);
    continue;
  }
  console.log(`\n=== ${name}: ${description}`);
  // node:test steps also report their skips (scripts/skip-reporter.mjs) to a file.
  const skipLog = join(skipDir, `${name}.jsonl`);
  const reporters =
    cmd === node && args[0] === "--test"
      ? [
          `--test-reporter=${process.stdout.isTTY ? "spec" : "tap"}`,
          "--test-reporter-destination=stdout",
          `--test-reporter=${join(root, "scripts/skip-reporter.mjs")}`,
          `--test-reporter-destination=${skipLog}`,
        ]
      : [];
  const start = Date.now();
  const r = spawnSync(cmd, [...(reporters.length ? [args[0], ...reporters] : [args[0]]), ...args.slice(1)], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, ...env },
  });
  const secs = (Date.now() - start) / 1000;
  if (existsSync(skipLog))
    for (const line of readFileSync(skipLog, "utf8").split("\n").filter(Boolean))
      skipped.push({ step: name, ...JSON.parse(line) });
  if (name === "wasm" && !chromedriver)
    skipped.push({ step: name, name: "tests/wasm_browser*.rs", reason: "no chromedriver" });
  results.push([name, r.status === 0 ? "ok" : `FAILED (exit ${r.status ?? r.signal})`, secs]);
  if (r.status !== 0) break;
}
console.log("\n=== summary");
for (const [name, status, secs] of results) {
  console.log(`  ${name.padEnd(10)} ${status.padEnd(22)} ${secs.toFixed(1).padStart(6)} s`);
}
console.log(`  total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const allowed = allowedSkips(readFileSync(join(root, "docs/development.md"), "utf8"));
const unexplained = skipped.filter((s) => !allowed.has(s.reason));
if (skipped.length) {
  console.log("\n=== skipped");
  for (const s of skipped)
    console.log(
      `  ${allowed.has(s.reason) ? "  " : "!!"} ${s.step}: ${s.file ? `${s.file}: ` : ""}${s.name} (${s.reason})`,
    );
}
const skipsOk = unexplained.length === 0 || process.env.ALLOW_SKIPS === "1";
if (unexplained.length)
  console.log(
    `\n${skipsOk ? "" : "FAILED: "}${unexplained.length} test(s) skipped for a reason docs/development.md does not list ` +
      `under "Skipped tests"${skipsOk ? " (ALLOW_SKIPS=1: not failing)" : "; install what they need (bash scripts/setup.sh --all), list the reason there, or set ALLOW_SKIPS=1 for a local run"}`,
  );
process.exit(
  results.every(([, s]) => s === "ok" || s.startsWith("skipped")) && results.length === names.length && skipsOk ? 0 : 1,
);
