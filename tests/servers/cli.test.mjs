// `user-memory` (pkg/cli.js) as a subprocess: every command over a file-store folder, the same
// over postgres://, redis:// and sqlite: URLs on the real servers, `process` against the
// scripted LLM server, exit statuses per error code, confirmation before destructive commands,
// and that no output ever carries the API key or the store password. The packed package's bin
// and the messages when an optional client is missing are tested from a fresh project.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startPostgres, startRedis } from "../helpers/servers.mjs";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { nodeBinary, NODE_VERSIONS } from "../helpers/runtimes.mjs";
import { freshProject, ROOT } from "../helpers/pack.mjs";

const CLI = join(ROOT, "pkg/cli.js");
const WRITER = join(ROOT, "tests/servers/writer.mjs");
const KEY = "sk-cli-secret-0123456789";
const scratch = mkdtempSync(join(tmpdir(), "um-cli-"));
let postgres;
let redis;
let llm;
let dirs = 0;
const freshDir = () => join(scratch, `d${++dirs}`);
before(async () => ([postgres, redis, llm] = await Promise.all([startPostgres(), startRedis(), startLlmServer()])));
after(async () => {
  await Promise.all([postgres?.close(), redis?.close(), llm?.close()]);
  rmSync(scratch, { recursive: true, force: true });
});

/** Runs `bin` (default: this Node on pkg/cli.js) with `args`; resolves { status, stdout, stderr }. */
function run(args, { env = {}, input = "", node = process.execPath, cli = CLI, cwd = ROOT } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [cli, ...args], {
      cwd,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    // fixed wait: a hang detector: kills a hung child so the test fails instead of hanging
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (status, signal) => {
      clearTimeout(timer);
      resolve({ status: status ?? signal, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

/** Runs and expects success; returns stdout. */
async function ok(args, options) {
  const r = await run(args, options);
  assert.equal(r.status, 0, `user-memory ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** Asserts nothing the CLI printed contains any of `secrets`. */
function noSecrets(r, ...secrets) {
  for (const s of secrets)
    for (const stream of ["stdout", "stderr"])
      assert.ok(!r[stream].includes(s), `${stream} contains a secret: ${r[stream]}`);
}

test("over a folder: add, show, search, forget, remove, export, import round-trip; --json output parses", async () => {
  const dir = ["--dir", freshDir()];
  const { revision, added: go } = JSON.parse(
    await ok(["add", ...dir, "--json", "--category", "knowledge", "Writes", "Go", "microservices"]),
  );
  assert.equal(revision, 1);
  assert.match(go.id, /^fact_[0-9a-f]{8}$/);
  assert.deepEqual(
    [go.content, go.category, go.confidence, go.source],
    ["Writes Go microservices", "knowledge", 0.9, "manual"],
  );
  await ok(["add", ...dir, "--confidence", "0.8", "Lives in Lisbon"]);
  await ok(["add", ...dir, "喜欢喝茶"]);
  const shown = await ok(["show", ...dir]);
  assert.match(shown, /Memory "default" in folder .*: 3 facts/);
  assert.match(shown, new RegExp(`\n  ${go.id} \\[knowledge \\| 0\\.90\\] Writes Go microservices\n`));
  assert.ok(shown.indexOf("Writes Go") < shown.indexOf("Lives in Lisbon"), "facts by confidence");
  const doc = JSON.parse(await ok(["show", ...dir, "--json"])).document;
  assert.equal(doc.facts.length, 3);

  const hits = JSON.parse(await ok(["search", ...dir, "--json", "which", "Go", "services"])).results;
  assert.equal(hits[0].fact.id, go.id, "the Go fact ranks first");
  assert.match(await ok(["search", ...dir, "tea"]), /喜欢喝茶/, "the concept lexicon links English to Chinese");
  assert.equal((await run(["search", ...dir, "--limit", "0", "x"])).status, 2);

  assert.match(
    await ok(["forget", ...dir, "lisbon"]),
    /^forgot fact_[0-9a-f]{8} \[context \| 0\.80\] Lives in Lisbon$/m,
  );
  const missing = await run(["forget", ...dir, "Paris"]);
  assert.equal(missing.status, 3, "NOT_FOUND exits 3");
  assert.match(missing.stderr, /^error NOT_FOUND: no fact has the id or contains "Paris"/);
  await ok(["add", ...dir, "Drinks green tea"]);
  await ok(["add", ...dir, "Brews TEA at noon"]);
  const ambiguous = await run(["forget", ...dir, "tea"]);
  assert.equal(ambiguous.status, 2, "two facts contain it: refused without --all");
  assert.match(ambiguous.stderr, /2 facts contain "tea"/);
  assert.equal(JSON.parse(await ok(["forget", ...dir, "--all", "--json", "tea"])).removed.length, 2);
  await ok(["add", ...dir, "Drinks green tea"]);
  await ok(["remove", ...dir, go.id]);
  assert.equal((await run(["remove", ...dir, go.id])).status, 3, "an unknown id is NOT_FOUND");

  const file = join(scratch, "export.json");
  await ok(["export", ...dir, file]);
  const exported = JSON.parse(readFileSync(file, "utf8"));
  assert.deepEqual(exported.facts.map((f) => f.content).sort(), ["Drinks green tea", "喜欢喝茶"].sort());
  const other = ["--dir", freshDir()];
  assert.match(await ok(["import", ...other, file]), /imported 2 facts/);
  assert.deepEqual(JSON.parse(await ok(["export", ...other])), exported, "export → import → export is lossless");
  const fromStdin = ["--dir", freshDir()];
  assert.equal(
    JSON.parse(await ok(["import", ...fromStdin, "-", "--json"], { input: JSON.stringify(exported) })).imported,
    2,
  );
});

test("history names each change's facts, newest first; undo reverts the newest; forget keeps a tombstone", async () => {
  const dir = ["--dir", freshDir()];
  await ok(["add", ...dir, "Keeps bees"]);
  await ok(["add", ...dir, "Lives in Lisbon"]);
  await ok(["forget", ...dir, "lisbon"]);
  const lines = (await ok(["history", ...dir])).trimEnd().split("\n");
  assert.equal(lines.length, 6, lines.join("\n"));
  assert.match(lines[0], /^ {2}3 {2}\d{4}-\d\d-\d\dT[\d:.]+Z {2}removeFact: -1 fact$/);
  assert.match(lines[1], /^ {6}- fact_[0-9a-f]{8} \[context \| 0\.90\] Lives in Lisbon \(forgotten\)$/);
  assert.match(lines[4], /^ {2}1 .*addFact: \+1 fact$/);
  assert.match(lines[5], /^ {6}\+ fact_[0-9a-f]{8} \[context \| 0\.90\] Keeps bees$/);
  const { entries } = JSON.parse(await ok(["history", ...dir, "--json", "--limit", "1"]));
  assert.deepEqual(
    [entries.length, entries[0].removed[0].content, entries[0].forgot.length],
    [1, "Lives in Lisbon", 1],
  );
  const stored = JSON.parse(await ok(["inspect", ...dir]));
  assert.match(JSON.stringify(stored), /lives in lisbon/, "the tombstone is in the stored record");
  assert.match(
    await ok(["undo", ...dir]),
    /^undid revision 3 \(removeFact: -1 fact\); memory is at revision 4\n {6}\+ fact_[0-9a-f]{8} .*Lives in Lisbon$/m,
  );
  assert.deepEqual(
    JSON.parse(await ok(["show", ...dir, "--json"])).document.facts.map((f) => f.content),
    ["Keeps bees", "Lives in Lisbon"],
  );
  assert.equal((await run(["history", ...dir, "--limit", "x"])).status, 2);
});

test("bad input loses nothing: an invalid document, a wrong confidence or an unknown option exit 2 and change nothing", async () => {
  const dir = ["--dir", freshDir()];
  await ok(["add", ...dir, "Keeps bees"]);
  const before = await ok(["export", ...dir]);
  const bad = join(scratch, "bad.json");
  writeFileSync(bad, JSON.stringify({ user: {}, history: {}, facts: [{ content: 42 }] }));
  const r = await run(["import", ...dir, bad, "--yes"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /INVALID_INPUT: .*facts\[0\]\.content` must be a string/);
  for (const args of [
    ["add", ...dir, "--confidence", "high", "x"],
    ["show", ...dir, "--colour"],
    ["show", "--dir"],
    ["frobnicate", ...dir],
    ["show", ...dir, "--store", "sqlite:x.db"],
  ]) {
    const e = await run(args);
    assert.equal(e.status, 2, `${args.join(" ")}: ${e.stderr}`);
    assert.match(e.stderr, /^error INVALID_INPUT: /);
  }
  assert.equal(await ok(["export", ...dir]), before);
  const json = await run(["show", "--json"]);
  assert.deepEqual(JSON.parse(json.stderr).error.code, "INVALID_INPUT", "--json errors are one JSON line");
});

test("reset and import over a memory ask first: refused without a terminal unless --yes", async () => {
  const dir = ["--dir", freshDir()];
  await ok(["add", ...dir, "Keeps bees"]);
  const refused = await run(["reset", ...dir]);
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /Delete the memory "default".*pass --yes/);
  const file = join(scratch, "empty.json");
  writeFileSync(file, JSON.stringify({ version: "1.0", user: {}, history: {}, facts: [] }));
  assert.equal((await run(["import", ...dir, file])).status, 2, "import over existing facts asks too");
  assert.match(await ok(["show", ...dir]), /1 fact,/, "nothing was changed");
  await ok(["reset", ...dir, "--yes"]);
  assert.match(await ok(["show", ...dir]), /0 facts.*\n\n\(empty\)/);
});

test("agents lists every memory in the store; --agent picks one", async () => {
  const dir = ["--dir", freshDir()];
  await ok(["add", ...dir, "--agent", "coder", "Prefers Rust"]);
  await ok(["add", ...dir, "--agent", "研究 notes", "Reads papers"]);
  await ok(["add", ...dir, "Default fact"]);
  assert.deepEqual(JSON.parse(await ok(["agents", ...dir, "--json"])).agents, ["coder", "default", "研究 notes"]);
  assert.match(await ok(["show", ...dir, "--agent", "研究 notes"]), /Reads papers/);
});

test("process extracts what is queued with the LLM from the environment; --all does every agent; the key is never printed", async () => {
  const dir = freshDir();
  for (const [agent, thread, text] of [
    ["a", "t1", "I keep three hives of bees"],
    ["b", "t2", "I sail dinghies"],
  ]) {
    await new Promise((resolve, reject) =>
      spawn(process.execPath, [WRITER, dir, agent, "observe", thread, text], { cwd: ROOT }).on("close", (c) =>
        c === 0 ? resolve() : reject(new Error(`writer ${c}`)),
      ),
    );
  }
  assert.match(await ok(["show", "--dir", dir, "--agent", "a"]), /Queued for extraction: 1 conversation/);
  const env = { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: KEY, MODEL: "test-model" };
  llm.script.push(factsReply("Keeps bees"));
  const one = await run(["process", "--dir", dir, "--agent", "a", "--json"], { env });
  assert.equal(one.status, 0, one.stderr);
  assert.deepEqual(JSON.parse(one.stdout), { agents: [{ agent: "a", processed: ["t1"], failed: [] }] });
  assert.equal(llm.requests.at(-1).headers.authorization, `Bearer ${KEY}`);
  assert.equal(llm.requests.at(-1).body.model, "test-model");
  noSecrets(one, KEY);

  llm.script.push(factsReply("Sails dinghies"));
  const all = await run(["process", "--dir", dir, "--all"], { env });
  assert.equal(all.status, 0, all.stderr);
  assert.equal(all.stdout, "a: nothing queued\nb: processed 1, failed 0\n");
  assert.match(await ok(["show", "--dir", dir, "--agent", "b"]), /Sails dinghies/);

  // A provider that rejects the key and echoes it back: LLM_HTTP, exit 6, the key masked.
  await new Promise((resolve) =>
    spawn(process.execPath, [WRITER, dir, "a", "observe", "t3", "I play the oboe"], { cwd: ROOT }).on("close", resolve),
  );
  llm.script.push({ status: 401, body: { error: { message: `Incorrect API key provided: ${KEY}` } } });
  const denied = await run(["process", "--dir", dir, "--agent", "a"], { env });
  assert.equal(denied.status, 6, denied.stderr);
  assert.match(denied.stderr, /LLM_HTTP/);
  noSecrets(denied, KEY);
  const none = await run(["process", "--dir", dir], { env: {} });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /process needs an LLM: set OPENAI_BASE_URL/);
});

test("--passphrase-env opens encrypted memory: add, show, history, undo, process; nothing stored or printed is plaintext or the passphrase", async () => {
  const dir = freshDir();
  const PASS = "correct horse battery staple";
  const enc = ["--dir", dir, "--passphrase-env", "MEMORY_PASSPHRASE"];
  const env = { MEMORY_PASSPHRASE: PASS };
  const added = await run(["add", ...enc, "Allergic to penicillin"], { env });
  assert.equal(added.status, 0, added.stderr);
  assert.match(added.stdout, /^added fact_[0-9a-f]{8} .*Allergic to penicillin$/m);
  await ok(["add", ...enc, "Lives in Lisbon"], { env });
  await ok(["forget", ...enc, "lisbon"], { env });
  assert.match(
    await ok(["history", ...enc], { env }),
    /removeFact: -1 fact\n.*Lives in Lisbon \(forgotten\)\n.*addFact: \+1 fact\n.*\n.*addFact: \+1 fact\n.*penicillin\n$/,
  );
  // One revision more than plain memory: encrypted memory's first document revision is its
  // sealed "no value" marker (docs/storage.md, encryption at rest).
  assert.match(await ok(["undo", ...enc], { env }), /undid revision 4 .*; memory is at revision 5/);
  // Another process (with the passphrase) queues a conversation; process extracts it.
  await new Promise((resolve, reject) =>
    spawn(process.execPath, [WRITER, dir, "default", "observe", "t1", "I keep three hives of bees"], {
      cwd: ROOT,
      env: { ...process.env, MEMORY_PASSPHRASE: PASS },
    }).on("close", (c) => (c === 0 ? resolve() : reject(new Error(`writer ${c}`)))),
  );
  llm.script.push(factsReply("Keeps bees"));
  const processed = await run(["process", ...enc, "--json"], {
    env: { ...env, OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: KEY, MODEL: "m" },
  });
  assert.equal(processed.status, 0, processed.stderr);
  assert.deepEqual(JSON.parse(processed.stdout), { agents: [{ agent: "default", processed: ["t1"], failed: [] }] });
  const shown = await run(["show", ...enc], { env });
  assert.match(shown.stdout, /3 facts, revision 6/);
  assert.match(shown.stdout, /Keeps bees/);
  assert.match(shown.stdout, /Allergic to penicillin/);
  assert.match(shown.stdout, /Lives in Lisbon/);
  noSecrets(shown, PASS);

  // The raw strings (inspect, and the files themselves) hold none of it.
  const raw = await ok(["inspect", "--dir", dir]);
  assert.match(raw, /umenc2:/, "inspect shows the ciphertext");
  const files = readdirSync(dir, { recursive: true }).filter((f) => statSync(join(dir, f)).isFile());
  assert.ok(files.length >= 2, `document and key record stored: ${files}`);
  for (const f of files) {
    const text = readFileSync(join(dir, f), "utf8");
    for (const plain of ["penicillin", "Lisbon", "lisbon", "bees", PASS])
      assert.ok(!text.includes(plain), `${f} contains ${JSON.stringify(plain)}`);
  }
  const before = files.map((f) => readFileSync(join(dir, f), "utf8"));

  // A wrong passphrase and no passphrase: DECRYPT_FAILED, exit 5, nothing changed or printed.
  const wrong = await run(["add", ...enc, "Plays the oboe"], { env: { MEMORY_PASSPHRASE: "wrong horse" } });
  assert.equal(wrong.status, 5, wrong.stderr);
  assert.match(wrong.stderr, /^error DECRYPT_FAILED: /);
  noSecrets(wrong, "wrong horse", PASS);
  const plain = await run(["show", "--dir", dir]);
  assert.equal(plain.status, 5);
  assert.match(plain.stderr, /^error DECRYPT_FAILED: the memory "default" is encrypted: pass --passphrase-env NAME/);
  assert.doesNotMatch(plain.stderr, /`encryption` option/, "CLI wording, not the API's");
  assert.deepEqual(
    files.map((f) => readFileSync(join(dir, f), "utf8")),
    before,
    "no stored value changed",
  );

  // The passphrase only ever comes from the environment: an unset variable or a value in place of a name is refused.
  const unset = await run(["show", ...enc]);
  assert.equal(unset.status, 2);
  assert.match(unset.stderr, /--passphrase-env: the environment variable it names is not set or empty/);
  const inline = await run(["show", "--dir", dir, "--passphrase-env", PASS], { env });
  assert.equal(inline.status, 2);
  assert.match(inline.stderr, /--passphrase-env takes the name of an environment variable/);
  assert.ok(!inline.stderr.includes(PASS), "the refused value is not echoed");
});

/** The same commands over a store URL. */
function overUrl(name, url, { node = () => ({ path: process.execPath }), password = () => null } = {}) {
  describe(`over ${name}`, () => {
    test(
      "add, search, forget, export and show work, and nothing printed carries the password",
      { timeout: 120_000 },
      async (t) => {
        const bin = node();
        if (!bin) return t.skip("no Node 22 binary for this platform");
        const store = ["--store", url(), "--agent", `cli-${name}`];
        const options = { node: bin.path };
        const { added } = JSON.parse(await ok(["add", ...store, "--json", "Deploys on Fridays"], options));
        await ok(["add", ...store, "Lives in Lisbon"], options);
        assert.equal(
          JSON.parse(await ok(["search", ...store, "--json", "deploy"], options)).results[0].fact.id,
          added.id,
        );
        await ok(["forget", ...store, "Lisbon"], options);
        const shown = await run(["show", ...store], options);
        assert.equal(shown.status, 0, shown.stderr);
        assert.match(shown.stdout, /1 fact,/);
        if (password()) {
          assert.ok(!shown.stdout.includes(password()), "the label masks the password");
          assert.match(shown.stdout, /:\*\*\*@127\.0\.0\.1/);
        }
        // Through the environment, so the password is not in the process list.
        const viaEnv = await run(["export", "--agent", `cli-${name}`], {
          ...options,
          env: { USER_MEMORY_STORE: url() },
        });
        assert.deepEqual(
          JSON.parse(viaEnv.stdout).facts.map((f) => f.content),
          ["Deploys on Fridays"],
        );
      },
    );
  });
}

overUrl("postgres://", () => postgres.url, { password: () => postgres.password });
overUrl("redis://", () => redis.url, { password: () => redis.password });
overUrl("sqlite: (Node 22)", () => `sqlite:${join(scratch, "cli.db")}`, {
  node: () => nodeBinary(NODE_VERSIONS.node22),
});

test(
  "a database that is down exits 4 with STORAGE_UNAVAILABLE and never prints the password",
  { timeout: 120_000 },
  async () => {
    await postgres.stop();
    try {
      const r = await run(["show", "--store", postgres.url]);
      assert.equal(r.status, 4, r.stderr);
      assert.match(r.stderr, /^error STORAGE_UNAVAILABLE: .*Postgres is unreachable/);
      noSecrets(r, postgres.password);
    } finally {
      await postgres.start();
    }
    await redis.stop();
    try {
      const r = await run(["show", "--store", redis.url]);
      assert.equal(r.status, 4, r.stderr);
      assert.match(r.stderr, /^error STORAGE_UNAVAILABLE: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ is unreachable/);
      noSecrets(r, redis.password);
    } finally {
      await redis.start();
    }
    const wrong = await run(["show", "--store", "redis://:not-the-password-42@127.0.0.1:" + redis.port]);
    assert.equal(wrong.status, 4, wrong.stderr);
    noSecrets(wrong, "not-the-password-42", redis.password);
  },
);

test(
  "the packed package's bin: `user-memory` runs from node_modules/.bin, and a missing client or MCP SDK says what to install",
  { timeout: 180_000 },
  async () => {
    const project = freshProject();
    const bin = join(project, "node_modules/.bin/user-memory");
    const options = { cli: bin, cwd: project };
    const added = await run(["add", "--dir", "memory", "Runs from the packed bin"], {
      ...options,
      node: process.execPath,
    });
    assert.equal(added.status, 0, added.stderr);
    const version = await run(["--version"], { ...options, node: process.execPath });
    assert.equal(version.stdout.trim(), JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version);
    const pg = await run(["show", "--store", postgres.url], { ...options, node: process.execPath });
    assert.equal(pg.status, 4);
    assert.match(pg.stderr, /STORAGE_UNAVAILABLE: postgres: URLs need the `pg` package: npm install pg/);
    noSecrets(pg, postgres.password);
    const rd = await run(["show", "--store", redis.url], { ...options, node: process.execPath });
    assert.match(rd.stderr, /npm install redis/);
    const mcp = await run(["mcp", "--dir", "memory"], { ...options, node: process.execPath });
    assert.equal(mcp.status, 2);
    assert.match(mcp.stderr, /user-memory mcp needs the MCP SDK: npm install @modelcontextprotocol\/sdk/);
  },
);
