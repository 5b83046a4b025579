// `user-memory mcp` tested with the MCP SDK's own client over stdio (the server a subprocess,
// as a desktop agent starts it): the tools and resources it lists, remember → search → forget
// through the tools, the memory block and the document as resources, facts written by another
// process seen without a restart, a Postgres store named in the environment, encrypted memory
// opened with --passphrase-env, errors as tool results the model can read, and the server
// exiting when the client disconnects.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { startPostgres } from "../helpers/servers.mjs";
import { ROOT } from "../helpers/pack.mjs";

const CLI = join(ROOT, "pkg/cli.js");
const scratch = mkdtempSync(join(tmpdir(), "um-mcp-"));
let postgres;
before(async () => (postgres = await startPostgres()));
after(async () => {
  await postgres?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Starts `user-memory mcp <args>` and connects the SDK's client to it. */
async function connect(args, env = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", ...args],
    env: { PATH: process.env.PATH, ...env },
    stderr: "pipe",
    cwd: ROOT,
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "test-client", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

const text = (result) => result.content.map((c) => c.text).join("\n");

/** Runs the CLI once (to write from another process). */
function cli(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`cli ${args.join(" ")} exited ${code}`)),
    );
  });
}

test("lists its four tools with JSON schemas, the two resources, and instructions", async () => {
  const { client } = await connect(["--dir", join(scratch, "list")]);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      ["search_memory", "remember", "forget", "get_profile"],
    );
    for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);
    assert.deepEqual(tools.find((t) => t.name === "remember").inputSchema.required, ["content"]);
    const { resources } = await client.listResources();
    assert.deepEqual(
      resources.map((r) => [r.uri, r.mimeType]),
      [
        ["memory://default/block", "text/plain"],
        ["memory://default/document", "application/json"],
      ],
    );
    assert.match(client.getInstructions(), /Long-term memory about the user/);
    assert.equal(client.getServerVersion().name, "user-memory");
  } finally {
    await client.close();
  }
});

test("--passphrase-env serves encrypted memory: remember and get_profile work, the files hold only ciphertext, the CLI reads it with the same passphrase", async () => {
  const dir = join(scratch, "encrypted");
  const PASS = "mcp passphrase for the desk";
  const { client, stderr } = await connect(["--dir", dir, "--passphrase-env", "MEMORY_PASSPHRASE"], {
    MEMORY_PASSPHRASE: PASS,
  });
  try {
    const saved = await client.callTool({ name: "remember", arguments: { content: "Allergic to penicillin" } });
    assert.ok(!saved.isError, text(saved));
    assert.match(text(await client.callTool({ name: "get_profile", arguments: {} })), /Allergic to penicillin/);
  } finally {
    await client.close();
  }
  assert.ok(!stderr().includes(PASS), "the passphrase is never printed");
  const files = readdirSync(dir, { recursive: true }).filter((f) => statSync(join(dir, f)).isFile());
  assert.ok(files.length >= 2, `document and key record stored: ${files}`);
  for (const f of files)
    assert.ok(!/penicillin|mcp passphrase/.test(readFileSync(join(dir, f), "utf8")), `${f} holds plaintext`);
  const shown = await new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, "show", "--dir", dir, "--passphrase-env", "P"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, P: PASS },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("close", () => resolve(out));
  });
  assert.match(shown, /Allergic to penicillin/);
});

test("remember, search_memory, get_profile and forget work through the tools; the block resource holds the facts", async () => {
  const { client } = await connect(["--dir", join(scratch, "tools"), "--agent", "desk"]);
  try {
    const call = (name, args = {}) => client.callTool({ name, arguments: args });
    const saved = await call("remember", {
      content: "Prefers TypeScript over JavaScript",
      category: "preference",
      confidence: 0.95,
    });
    assert.ok(!saved.isError, text(saved));
    const id = /fact_[0-9a-f]{8}/.exec(text(saved))[0];
    await call("remember", { content: "Lives in Lisbon" });
    const found = await call("search_memory", { query: "which language should this project use, typescript?" });
    assert.match(
      text(found).split("\n")[0],
      new RegExp(`^- ${id} \\[preference \\| 0\\.95\\] Prefers TypeScript over JavaScript \\(score`),
    );
    assert.equal(text(await call("search_memory", { query: "quantum chromodynamics" })), "No fact in memory matches.");
    const profile = text(await call("get_profile"));
    assert.match(profile, /^Facts:\n- fact_.*Prefers TypeScript.*\n- fact_.*Lives in Lisbon/);

    const block = await client.readResource({ uri: "memory://desk/block" });
    assert.match(
      block.contents[0].text,
      /^<memory>[\s\S]*Prefers TypeScript over JavaScript[\s\S]*Lives in Lisbon[\s\S]*<\/memory>$/,
    );
    const doc = JSON.parse((await client.readResource({ uri: "memory://desk/document" })).contents[0].text);
    assert.equal(doc.version, "1.0");
    assert.equal(doc.facts.length, 2);

    assert.match(text(await call("forget", { id })), /^Forgot: fact_.*Prefers TypeScript/);
    assert.doesNotMatch(text(await call("get_profile")), /TypeScript/);
    // Errors are results the model can read, not protocol failures.
    const unknown = await call("forget", { id });
    assert.equal(unknown.isError, true);
    assert.match(text(unknown), /^NOT_FOUND: /);
    const empty = await call("remember", { content: "  " });
    assert.equal(empty.isError, true);
    assert.match(text(empty), /^INVALID_INPUT: remember needs a non-empty `content`/);
    for (const bad of [
      { content: "x", confidence: 7 },
      { content: "x", category: "gossip" },
    ]) {
      const r = await call("remember", bad);
      assert.equal(r.isError, true, text(r));
      assert.match(text(r), /^INVALID_INPUT: /);
    }
    assert.equal((await call("search_memory", { query: "x", limit: 0 })).isError, true);
    // A 100 000-character "fact" is refused, and nothing is stored.
    const huge = await call("remember", { content: "word ".repeat(20_000) });
    assert.equal(huge.isError, true);
    assert.match(text(huge), /^INVALID_INPUT: `content` is 100000 characters long; .* at most 1000 characters/);
    assert.doesNotMatch(text(await call("get_profile")), /word word/);
    // The protocol error reads "MCP error -32602: unknown resource …", its prefix once.
    const failed = await client.readResource({ uri: "memory://desk/nothing" }).then(
      () => null,
      (e) => e,
    );
    assert.equal(failed?.code, -32602);
    assert.equal(failed.message, "MCP error -32602: unknown resource memory://desk/nothing");
  } finally {
    await client.close();
  }
});

test("facts another process writes while the server runs are found without a restart", async () => {
  const dir = join(scratch, "shared");
  const { client } = await connect(["--dir", dir]);
  try {
    assert.equal(
      text(await client.callTool({ name: "search_memory", arguments: { query: "bees" } })),
      "No fact in memory matches.",
    );
    await cli(["add", "--dir", dir, "Keeps three hives of bees"]);
    assert.match(
      text(await client.callTool({ name: "search_memory", arguments: { query: "bees" } })),
      /Keeps three hives of bees/,
    );
    await client.callTool({ name: "remember", arguments: { content: "Sells honey at the market" } });
    assert.match(
      await cli(["show", "--dir", dir]),
      /Keeps three hives of bees[\s\S]*Sells honey|Sells honey[\s\S]*Keeps three hives/,
      "and the CLI sees what the server wrote",
    );
  } finally {
    await client.close();
  }
});

test(
  "a Postgres store from USER_MEMORY_STORE; the password appears in nothing the server prints",
  { timeout: 60_000 },
  async () => {
    const { client, stderr } = await connect([], { USER_MEMORY_STORE: postgres.url });
    try {
      await client.callTool({ name: "remember", arguments: { content: "Deploys on Fridays" } });
      assert.match(text(await client.callTool({ name: "get_profile", arguments: {} })), /Deploys on Fridays/);
    } finally {
      await client.close();
    }
    assert.match(stderr(), /memory "default" in postgres:\/\/postgres:\*\*\*@127\.0\.0\.1/);
    assert.ok(!stderr().includes(postgres.password));
  },
);

test("the server process exits with status 0 when the client disconnects", async () => {
  const { client, transport } = await connect(["--dir", join(scratch, "exit")]);
  const pid = transport.pid;
  assert.ok(pid > 0);
  const exited = new Promise((resolve) => {
    const poll = setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(poll);
        resolve(true);
      }
    }, 50);
  });
  await client.close();
  assert.equal(
    // fixed wait: a hang detector: a server that does not exit fails the test
    await Promise.race([exited, new Promise((r) => setTimeout(() => r(false), 30_000))]),
    true,
    "exited within 30 s",
  );
});

test(
  "from the packed package with the SDK installed next to it (what npx -p user-memory -p @modelcontextprotocol/sdk does)",
  { timeout: 180_000 },
  async () => {
    const { freshProject } = await import("../helpers/pack.mjs");
    const project = freshProject({ extra: ["@modelcontextprotocol/sdk"] });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(project, "node_modules/.bin/user-memory"), "mcp", "--dir", "memory"],
      cwd: project,
      stderr: "pipe",
    });
    const client = new Client({ name: "test-client", version: "1.0.0" });
    await client.connect(transport);
    try {
      await client.callTool({ name: "remember", arguments: { content: "Installed with npx" } });
      assert.match(
        text(await client.callTool({ name: "search_memory", arguments: { query: "npx" } })),
        /Installed with npx/,
      );
    } finally {
      await client.close();
    }
  },
);
