// Every code block of README.md runs as written, against the packed tarball installed into a
// fresh project, so an example that stops working fails the suite: the JavaScript ones in Node
// with a scripted OpenAI-compatible server on 127.0.0.1 wherever they call an LLM (and a real
// Postgres for the server example), the browser page in Chromium (served with the app's own
// /api/extract), the shell ones with `npx user-memory` as the installed
// CLI, the MCP client configuration by starting the server it names and listing its tools
// with the official SDK client. The test adds only what a snippet leaves to the reader
// (`messages`, `threadId`, `callModel`, `app`, …: the PRELUDE) and, after it, what shows that
// it did its job (CHECKS, keyed by the README heading the block is under).
//
// A block that cannot run here is preceded by `<!-- not run: <reason> -->`, and the reason
// must name the file of this repository that runs it instead (checked to exist). The
// JavaScript blocks of docs/*.md (js, jsx, ts, html) follow the same rule, with
// `<!-- runnable -->` for the ones that run: under a heading the README's CHECKS know (the
// same example), with that check; otherwise a JavaScript block with the same prelude (and
// the AI SDK's project when it imports `ai`), checked to exit 0, and a shell block line by
// line like the README's.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { consumerProject, freshProject, ROOT } from "../helpers/pack.mjs";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { startPostgres } from "../helpers/servers.mjs";
import { launchBrowser } from "../helpers/browser.mjs";
import { startStaticServer } from "../helpers/static-server.mjs";
import { assertNamesFiles, fencedBlocks } from "../helpers/markdown.mjs";

const README = readFileSync(join(ROOT, "README.md"), "utf8");
const BLOCKS = fencedBlocks(README);
const ALL_DOC_BLOCKS = readdirSync(join(ROOT, "docs"))
  .filter((f) => f.endsWith(".md"))
  .sort()
  .flatMap((f) => fencedBlocks(readFileSync(join(ROOT, "docs", f), "utf8")).map((b) => ({ ...b, file: `docs/${f}` })));
const DOC_BLOCKS = ALL_DOC_BLOCKS.filter((b) => b.marker === "runnable");
/** The languages of the docs' blocks that must run or say why not. */
const JS_LANGS = new Set(["js", "jsx", "ts", "tsx", "html", "mjs"]);

/** What the snippets leave to the reader: each name the snippet (or the check's code after it) uses and does not declare. */
const PRELUDE = {
  // A finished turn (what observe() learns from), as the snippets pass it after the answer.
  messages: `const messages = [{ role: "user", content: "I always write my projects in TypeScript." }, { role: "assistant", content: "Noted." }];`,
  threadId: `const threadId = "readme-thread";`,
  apiKey: `const apiKey = process.env.OPENAI_API_KEY;`,
  callModel: `async function callModel() { return "Noted: TypeScript."; }`,
  app: `const app = { routes: [], post(path, handler) { this.routes.push([path, handler]); } };`,
  // The docs' shorter snippets start from an open memory, as the pages before them do.
  UserMemory: `import { UserMemory } from "user-memory";`,
  llm: `const llm = { baseUrl: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, model: "doc-model" };`,
  memory: `const memory = await (await import("user-memory")).UserMemory.open({ storage: "memory", llm: { baseUrl: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, model: "doc-model" } });`,
};
const declares = (code, name) =>
  new RegExp(`\\b(const|let|var|function|class)\\s+${name}\\b|import\\s*\\{[^}]*\\b${name}\\b[^}]*\\}`).test(code);
// A use of the name itself (`...messages` included): not part of "user-memory", nor a
// property such as `this.memory`.
const uses = (code, name) => new RegExp(`(?<![\\w$-])(?<!\\w\\.)${name}\\b(?!-)`).test(code);
const prelude = (code) =>
  Object.entries(PRELUDE)
    .filter(([name]) => uses(code, name) && !declares(code, name))
    .map(([, line]) => line)
    .join("\n");

/** Prints one JSON line `README-RESULT {…}` of what the snippet's `memory` holds after a flush. */
const REPORT_MEMORY = `
await memory.flush();
console.log("README-RESULT " + JSON.stringify({ facts: (await memory.get()).facts.map((f) => f.content) }));
await memory.close();`;

let llm;
let postgres;
let project;
let aiProject;
const scratch = mkdtempSync(join(tmpdir(), "um-readme-"));
const made = [];
before(async () => {
  // Extraction requests (they carry the delta's schema) learn one fact; any other chat
  // completion (the AI SDK example's own model call) gets a short answer.
  llm = await startLlmServer({
    fallback: (r) => (r.raw.includes("newFacts") ? factsReply("Prefers TypeScript") : { content: "Noted." }),
  });
  postgres = await startPostgres();
  project = freshProject({ extra: ["pg", "@modelcontextprotocol/sdk"] });
  aiProject = consumerProject("ai-sdk-7");
});
after(async () => {
  await Promise.all([llm?.close(), postgres?.close()]);
  for (const dir of [scratch, ...made]) rmSync(dir, { recursive: true, force: true });
});

/** Runs `node file` (or `sh file`) in `cwd`; resolves to `{ code, out, err }`. */
function run(cmd, args, { cwd, env = {} }) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (err += d));
    // fixed wait: a hang detector: a snippet that never ends fails instead of hanging the run
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("error", reject);
    child.on("exit", (code, signal) => (clearTimeout(timer), resolve({ code: code ?? signal, out, err })));
  });
}

/** Writes the block (with prelude and `after`) as an ES module in `cwd` and runs it in Node. */
async function runJs(block, { cwd = project, dir, env = {}, replace = [], after = "" } = {}) {
  let code = block.code;
  for (const [from, to] of replace) {
    assert.ok(code.includes(from), `the block no longer contains ${from}`);
    code = code.split(from).join(to);
  }
  dir ??= mkdtempSync(join(cwd, ".readme-"));
  made.push(dir);
  const file = join(dir, "snippet.mjs");
  writeFileSync(file, `${prelude(`${code}\n${after}`)}\n${code}\n${after}\n`);
  const env2 = { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: "sk-readme-test", ...env };
  const r = await run(process.execPath, [file], { cwd: dir, env: env2 });
  assert.equal(
    r.code,
    0,
    `${block.file ?? "README.md"} line ${block.line} (${block.heading}) failed:\n${r.err}\n${r.out}`,
  );
  const line = r.out.split("\n").find((l) => l.startsWith("README-RESULT "));
  return { ...r, dir, result: line ? JSON.parse(line.slice("README-RESULT ".length)) : null };
}

/** Runs a shell block in a fresh folder, `npx user-memory` being the installed CLI. */
async function runSh(block, cwd) {
  const dir = mkdtempSync(join(cwd, ".readme-sh-"));
  made.push(dir);
  const file = join(dir, "snippet.sh");
  // npx of an installed package runs its bin; -y / -p only matter when it is not installed.
  writeFileSync(
    file,
    `set -e\nnpx() { while [ "$1" = -y ] || [ "$1" = -p ]; do [ "$1" = -p ] && shift; shift; done; "$@"; }\n${block.code}\n`,
  );
  const r = await run("sh", [file], {
    cwd: dir,
    env: { PATH: `${join(cwd, "node_modules/.bin")}:${process.env.PATH}` },
  });
  assert.equal(
    r.code,
    0,
    `${block.file ?? "README.md"} line ${block.line} (${block.heading}) failed:\n${r.err}\n${r.out}`,
  );
  return { ...r, dir };
}

/** What each README block must do, by the heading it is under (one block per heading). */
const CHECKS = {
  "user-memory": {
    js: async (b) => {
      const r = await runJs(b, {
        replace: [["https://api.openai.com/v1", llm.baseUrl]],
        after: `${REPORT_MEMORY}\nconsole.log("README-SYSTEM " + JSON.stringify(system));`,
      });
      assert.deepEqual(r.result.facts, ["Prefers TypeScript"], "observe() → one extraction → the fact");
      assert.match(r.out, /README-SYSTEM "You are a helpful assistant\./);
      assert.match(r.err, /kept in this process only/, "the one-time warning that memory is ephemeral");
    },
  },
  "Node.js agent with a file store": {
    js: async (b) => {
      const r = await runJs(b, { after: REPORT_MEMORY });
      assert.deepEqual(r.result.facts, ["Prefers TypeScript"]);
      assert.doesNotMatch(r.err, /kept in this process only/, "with a file store there is no warning");
      // The same script's open() in a new process finds the fact in ./memory.
      const again = await runJs(
        { ...b, code: b.code.replace(/const block[\s\S]*$/, "") },
        { after: REPORT_MEMORY, dir: r.dir },
      );
      assert.deepEqual(again.result.facts, ["Prefers TypeScript"], "./memory kept it");
    },
  },
  Browser: {
    // In Chromium, served from the project (its node_modules/user-memory is the tarball), with
    // the page's own /api/extract answering as the app's server would (the model's reply).
    html: async (b) => {
      const dir = mkdtempSync(join(project, ".readme-html-"));
      made.push(dir);
      const at = b.code.lastIndexOf("</script>");
      assert.ok(at > 0, "the block ends with its module script");
      const page = `${b.code.slice(0, at)}
  ${PRELUDE.messages}
  ${PRELUDE.callModel}
  try {
    await send(messages, "readme-thread");
    await memory.flush();
    window.result = { facts: (await memory.get()).facts.map((f) => f.content), kept: memory.options().storage };
  } catch (e) { window.result = { error: String(e) }; }
${b.code.slice(at)}`;
      writeFileSync(join(dir, "index.html"), page);
      const extractions = [];
      const server = await startStaticServer([["/", project]], {
        "/api/extract": async (req, res) => {
          let body = "";
          for await (const c of req) body += c;
          extractions.push(JSON.parse(body));
          res.writeHead(200, { "content-type": "text/plain" });
          res.end(JSON.stringify(factsReply("Prefers TypeScript").json));
        },
      });
      const { context, close } = await launchBrowser();
      try {
        const tab = await context.newPage();
        const logs = [];
        tab.on("console", (m) => logs.push(m.text()));
        await tab.goto(`${server.url}/${dir.slice(project.length + 1)}/index.html`);
        const result = await tab
          .waitForFunction(() => window.result, null, { timeout: 60_000 })
          .then((h) => h.jsonValue());
        assert.deepEqual(result, { facts: ["Prefers TypeScript"], kept: "indexeddb" });
        assert.equal(extractions.length, 1, "one extraction through the page's own server");
        assert.ok(extractions[0].system && extractions[0].prompt.includes("TypeScript"), "it sent { system, prompt }");
        assert.ok(
          logs.some((l) => l.includes("learned") && l.includes("Prefers TypeScript")),
          logs.join("\n"),
        );
      } finally {
        await close();
        await server.close();
      }
    },
  },
  "A server: one memory per user in Postgres, Redis or SQLite": {
    js: async (b) => {
      const r = await runJs(b, {
        env: { DATABASE_URL: postgres.url },
        after: `
const [[path, handler]] = app.routes;
let sent;
await handler({ user: { id: "alice" }, body: { threadId: "t1", messages } }, { json: (v) => (sent = v) });
const check = await UserMemory.open({ agent: "alice", storage, llm });
console.log("README-RESULT " + JSON.stringify({ path, sent, pending: (await check.status()).pending.length }));
await check.flush();
console.log("README-RESULT2 " + JSON.stringify((await check.get()).facts.map((f) => f.content)));
await check.close();
await storage.close?.();
process.exit(0);`,
      });
      assert.deepEqual(r.result, { path: "/chat", sent: { reply: "Noted: TypeScript." }, pending: 1 });
      assert.match(r.out, /README-RESULT2 \["Prefers TypeScript"\]/, "the queued conversation is extracted");
    },
  },
  "Command line": {
    sh: async (b) => {
      assert.match(b.code, /search --dir \.\/memory "which language\?"/, "the README asks in words");
      const r = await runSh(b, project);
      const lines = r.out.split("\n");
      assert.match(r.out, /Prefers TypeScript/);
      const search = lines.findIndex((l) => /match|Prefers TypeScript/.test(l));
      assert.ok(search >= 0, r.out);
      assert.doesNotMatch(r.out, /no fact matches/, `"which language?" finds "Prefers TypeScript":\n${r.out}`);
      const exported = JSON.parse(readFileSync(join(r.dir, "memory.json"), "utf8"));
      assert.deepEqual(exported.facts, [], "forget removed it, and export wrote memory.json");
    },
  },
  "MCP server for desktop and coding agents": {
    json: async (b) => {
      const { command, args } = JSON.parse(b.code).mcpServers.memory;
      assert.equal(command, "npx");
      const at = args.lastIndexOf("user-memory");
      const dir = mkdtempSync(join(scratch, "mcp-"));
      const serverArgs = args.slice(at + 1).map((a) => (a === "/home/me/.user-memory" ? dir : a));
      assert.deepEqual(serverArgs.slice(0, 2), ["mcp", "--dir"]);
      const client = new Client({ name: "readme-test", version: "1.0.0" });
      await client.connect(
        new StdioClientTransport({
          command: join(project, "node_modules/.bin/user-memory"),
          args: serverArgs,
          cwd: project,
          stderr: "pipe",
        }),
      );
      try {
        const names = (await client.listTools()).tools.map((t) => t.name).sort();
        const named = [...README.matchAll(/tools\s+`search_memory`[^)]*\)/g)][0][0];
        for (const n of names) assert.ok(named.includes(`\`${n}\``), `the README names tool ${n}`);
        assert.deepEqual(names, ["forget", "get_profile", "remember", "search_memory"]);
      } finally {
        await client.close();
      }
    },
  },
  // docs/pipeline.md: the debug line the page shows is the one the library prints.
  "What `observe()` keeps": {
    js: async (b) => {
      const r = await runJs(b, { after: "await memory.close();" });
      assert.match(r.out, /NOT_QUEUED no-answer observe\("t1"\) queued nothing: no final assistant answer/);
    },
  },
  "Vercel AI SDK": {
    js: async (b) => {
      const r = await runJs(b, {
        cwd: aiProject,
        after: `console.log("README-TEXT " + JSON.stringify(text));\n${REPORT_MEMORY}`,
      });
      assert.match(r.out, /README-TEXT "Noted\."/, "the wrapped model answered");
      assert.deepEqual(r.result.facts, ["Prefers TypeScript"], "the middleware observed the conversation");
      const system = llm.requests.find((q) => q.body?.messages && !q.raw.includes("newFacts"));
      assert.ok(system, "the model call reached the scripted server");
    },
  },
};

/** The docs' own runnable blocks that differ from the README's example under the same heading. */
const DOC_CHECKS = {
  "docs/cli.md": {
    "Command line": {
      sh: async (b) => {
        const r = await runSh(b, project);
        assert.doesNotMatch(r.out, /no fact matches/, `"which language?" finds "Prefers TypeScript":\n${r.out}`);
        assert.match(
          r.out,
          /removeFact: -1 fact\n\s+- \S+ \[[^\]]*\] Prefers TypeScript/,
          `history names the removed fact:\n${r.out}`,
        );
        // undo took the forget back: the fact is in the folder again.
        const show = await run(
          join(project, "node_modules/.bin/user-memory"),
          ["show", "--dir", "./memory", "--json"],
          {
            cwd: r.dir,
          },
        );
        assert.equal(show.code, 0, show.err);
        assert.deepEqual(
          JSON.parse(show.out).document.facts.map((f) => f.content),
          ["Prefers TypeScript"],
          "undo restored the fact",
        );
      },
    },
  },
};

describe("README.md code blocks", () => {
  test("every block either has a check here or a not-run reason that names the file running it instead", () => {
    assert.ok(BLOCKS.length >= 8, `found ${BLOCKS.length} blocks`);
    for (const b of BLOCKS) {
      const where = `README.md line ${b.line} (${b.heading}, ${b.lang})`;
      if (b.marker?.startsWith("not run:")) {
        assertNamesFiles(where, b.marker);
        assert.equal(CHECKS[b.heading]?.[b.lang], undefined, `${where}: not run, yet checked`);
      } else {
        assert.ok(CHECKS[b.heading]?.[b.lang], `${where}: no check in tests/packaging/readme.test.mjs`);
      }
    }
    const keys = BLOCKS.map((b) => `${b.heading}/${b.lang}`);
    assert.equal(new Set(keys).size, keys.length, "one block per heading and language");
  });

  for (const b of BLOCKS) {
    const check = CHECKS[b.heading]?.[b.lang];
    if (!check) continue;
    test(`README line ${b.line}: ${b.heading} (${b.lang}) runs as written`, { timeout: 240_000 }, () => check(b));
  }
});

describe("docs/*.md code blocks", () => {
  test("every JavaScript block of docs/*.md is runnable or has a not-run reason that names the file running it instead", () => {
    const js = ALL_DOC_BLOCKS.filter((b) => JS_LANGS.has(b.lang));
    assert.ok(js.length >= 20, `found ${js.length} JavaScript blocks in docs/`);
    const unmarked = js.filter((b) => !b.marker).map((b) => `${b.file} line ${b.line} (${b.heading}, ${b.lang})`);
    assert.deepEqual(unmarked, [], "mark each <!-- runnable --> or <!-- not run: why, `the file that runs it` -->");
    for (const b of js.filter((b) => b.marker.startsWith("not run:")))
      assertNamesFiles(`${b.file} line ${b.line} (${b.heading}, ${b.lang})`, b.marker);
  });

  for (const b of DOC_BLOCKS) {
    test(`${b.file} line ${b.line}: ${b.heading} (${b.lang}) runs as written`, { timeout: 240_000 }, async () => {
      const check = DOC_CHECKS[b.file]?.[b.heading]?.[b.lang] ?? CHECKS[b.heading]?.[b.lang];
      if (check) await check(b);
      else if (b.lang === "sh") await runSh(b, project);
      else if (b.lang === "js") {
        const ai = /from "(ai|@ai-sdk\/[\w-]+)"/.test(b.code);
        // The snippets end with their memory open, as a reader's program goes on from there.
        const after = `if (typeof memory !== "undefined") await memory.close();`;
        await runJs(b, { after, ...(ai ? { cwd: aiProject } : {}) });
      } else
        assert.fail(`${b.file} line ${b.line}: only js and sh blocks (or a README heading's) can be marked runnable`);
    });
  }
});
