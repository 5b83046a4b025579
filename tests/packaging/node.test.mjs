// Node.js from the packed tarball: require() of the ESM package, the file store shared by
// two processes, the file store under kill -9, and examples/node-agent.mjs driven through
// its stdin against a scripted OpenAI-compatible server. (The timeouts only stop a hung
// child from hanging the run; nothing asserts how fast anything is.)
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { freshProject, ROOT } from "../helpers/pack.mjs";
import { startLlmServer } from "../helpers/llm-server.mjs";

let project;
const scratch = mkdtempSync(join(tmpdir(), "um-node-"));
const children = new Set();
before(() => {
  project = freshProject();
});
after(() => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

/** The installed package's entries, loaded from the consumer project. */
async function installed() {
  const base = join(project, "node_modules/user-memory/pkg");
  const { UserMemory } = await import(pathToFileURL(join(base, "node.js")).href);
  const { fileStore } = await import(pathToFileURL(join(base, "file-store.js")).href);
  return { UserMemory, fileStore };
}

/** Starts `node file args…` in the consumer project; output is collected in `out`/`err`. */
function start(file, args = [], env = {}) {
  const child = spawn(process.execPath, [file, ...args], {
    cwd: project,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.add(child);
  child.out = "";
  child.err = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (child.out += d));
  child.stderr.setEncoding("utf8").on("data", (d) => (child.err += d));
  child.exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => (children.delete(child), resolve({ code, signal }))),
  );
  return child;
}

/** Resolves when the child's stdout matches `re` (rejects if it exits first). */
async function waitFor(child, re) {
  for (;;) {
    const m = child.out.match(re);
    if (m) return m;
    // fixed wait: the tick of an open-ended poll for the child's output
    const ended = await Promise.race([child.exited, new Promise((r) => setTimeout(() => r(null), 10))]);
    if (ended && !re.test(child.out))
      throw new Error(`exited (${JSON.stringify(ended)}) before printing ${re}:\n${child.out}\n${child.err}`);
  }
}

test("require('user-memory') from CommonJS, where Node can require() an ES module", (t) => {
  if (!process.features.require_module) {
    return t.skip(`Node ${process.version} cannot require() an ES module (Node 20.19+ or 22.12+ can); use import()`);
  }
  writeFileSync(
    join(project, "main.cjs"),
    `const { UserMemory } = require("user-memory");
     const { fileStore } = require("user-memory/node");
     (async () => {
       const m = await UserMemory.open({ storage: fileStore(process.argv[2]), llm: async () => "{}" });
       const f = await m.addFact({ content: "Loaded with require()" });
       await m.close();
       console.log(JSON.stringify({ id: f.id, store: typeof fileStore }));
     })();`,
  );
  const out = JSON.parse(
    execFileSync(process.execPath, ["main.cjs", join(scratch, "cjs")], {
      cwd: project,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }),
  );
  assert.match(out.id, /^fact_[0-9a-f]{8}$/);
  assert.equal(out.store, "function");
});

test(
  "two processes sharing one file-store directory commit different facts at once: both survive",
  { timeout: 120_000 },
  async (t) => {
    const dir = join(scratch, "shared");
    writeFileSync(
      join(project, "writer.mjs"),
      `import { UserMemory } from "user-memory";
     import { fileStore } from "user-memory/node";
     const [dir, name, count] = process.argv.slice(2);
     const store = fileStore(dir);
     let conflicts = 0;
     const cas = store.compareAndSet.bind(store);
     store.compareAndSet = async (...a) => { const ok = await cas(...a); if (!ok) conflicts++; return ok; };
     const facts = Array.from({ length: Number(count) }, (_, i) => name + " fact " + i);
     const m = await UserMemory.open({ storage: store, agent: "shared", debounceMs: 60000,
       // Either process may extract either thread: the fact names whoever the conversation is about.
       llm: async ({ prompt }) => JSON.stringify({ newFacts: [{ content: /I am (\\w+)/.exec(prompt)[1] + " extracted fact", confidence: 0.9 }] }) });
     console.log("ready");
     await new Promise((r) => process.stdin.once("data", r));
     const first = Date.now();
     for (const content of facts) await m.addFact({ content });
     m.observe(name + "-thread", [{ role: "user", content: "I am " + name }, { role: "assistant", content: "Hi " + name }]);
     await m.flush();
     const last = Date.now();
     await m.close();
     console.log(JSON.stringify({ first, last, conflicts }));`,
    );
    const { UserMemory, fileStore } = await installed();
    // Start from a document that both will extend.
    const seed = await UserMemory.open({ storage: fileStore(dir), agent: "shared", llm: async () => "{}" });
    await seed.addFact({ content: "seed fact" });
    await seed.close();

    const count = 30;
    const a = start("writer.mjs", [dir, "alice", String(count)]);
    const b = start("writer.mjs", [dir, "bob", String(count)]);
    await Promise.all([waitFor(a, /ready/), waitFor(b, /ready/)]);
    a.stdin.end("go\n");
    b.stdin.end("go\n");
    const [ra, rb] = await Promise.all([a.exited, b.exited]);
    assert.deepEqual([ra.code, rb.code], [0, 0], a.err + b.err);
    const [sa, sb] = [a, b].map((c) => JSON.parse(c.out.trim().split("\n").at(-1)));
    t.diagnostic(
      `compareAndSet conflicts: alice ${sa.conflicts}, bob ${sb.conflicts}; windows overlapped: ${sa.first < sb.last && sb.first < sa.last}`,
    );

    const m = await UserMemory.open({ storage: fileStore(dir), agent: "shared", llm: async () => "{}" });
    const contents = (await m.get()).facts.map((f) => f.content).sort();
    await m.close();
    const expected = ["seed fact", "alice extracted fact", "bob extracted fact"];
    for (let i = 0; i < count; i++) expected.push(`alice fact ${i}`, `bob fact ${i}`);
    assert.deepEqual(contents, expected.sort());
    assert.ok(!readdirSync(dir).some((f) => f.startsWith(".")), "no lock or temp file is left");
  },
);

test("kill -9 in the middle of file writes: every key still holds one whole value", { timeout: 120_000 }, async () => {
  const dir = join(scratch, "raw");
  writeFileSync(
    join(project, "raw-writer.mjs"),
    `import { fileStore } from "user-memory/node";
     const s = fileStore(process.argv[2]);
     for (let i = 1; ; i++) {
       const value = JSON.stringify({ i, pad: String(i % 10).repeat(300_000 + (i % 7) * 10_000) });
       await s.set("doc", value);
       await s.compareAndSet("pointer", i === 1 ? null : String(i - 1), String(i));
       console.log("wrote " + i);
     }`,
  );
  const { fileStore } = await installed();
  for (const stopAt of [2, 5, 9]) {
    const w = start("raw-writer.mjs", [dir]);
    const [, at] = await waitFor(w, new RegExp(`wrote (${stopAt})\\b`));
    w.kill("SIGKILL");
    await w.exited;
    const lock = join(dir, ".lock");
    if (existsSync(lock)) {
      // Killed while holding the lock: it names its holder (never empty), so the next writer
      // can see the holder is dead and break it at once.
      assert.equal(JSON.parse(readFileSync(lock, "utf8")).pid, w.pid);
    }
    const s = fileStore(dir);
    const doc = JSON.parse(await s.get("doc")); // throws if torn
    assert.equal(doc.pad.length, 300_000 + (doc.i % 7) * 10_000, "the value is complete");
    assert.ok(doc.pad === String(doc.i % 10).repeat(doc.pad.length));
    assert.ok(doc.i >= Number(at), `the last completed write (${at}) or a later one is visible, found ${doc.i}`);
    const pointer = Number(await s.get("pointer"));
    assert.ok(pointer >= Number(at) && pointer <= doc.i, `pointer ${pointer}`);
    // The next writer finds no stale lock or temp file in its way.
    await s.set("probe", "ok");
    assert.equal(await s.compareAndSet("pointer", String(pointer), String(pointer)), true);
    assert.ok(!readdirSync(dir).some((f) => f.startsWith(".tmp-")), "temp files of the killed writer are removed");
    rmSync(dir, { recursive: true });
  }
});

test(
  "kill -9 in the middle of memory commits: the next open() finds the previous or the next document",
  { timeout: 120_000 },
  async () => {
    const dir = join(scratch, "commits");
    writeFileSync(
      join(project, "committer.mjs"),
      `import { UserMemory } from "user-memory";
     import { fileStore } from "user-memory/node";
     const m = await UserMemory.open({ storage: fileStore(process.argv[2]), agent: "crash", maxFacts: 1000, llm: async () => "{}" });
     for (let i = (await m.get()).facts.length; ; i++) {
       await m.addFact({ content: "fact number " + i + " " + "detail ".repeat(200) });
       console.log("committed " + i);
     }`,
    );
    const { UserMemory, fileStore } = await installed();
    let known = 0;
    for (const extra of [1, 4, 8, 3]) {
      const c = start("committer.mjs", [dir]);
      const target = known + extra;
      await waitFor(c, new RegExp(`committed ${target}\\b`));
      c.kill("SIGKILL");
      await c.exited;
      const m = await UserMemory.open({
        storage: fileStore(dir),
        agent: "crash",
        maxFacts: 1000,
        llm: async () => "{}",
      });
      const facts = (await m.get()).facts.map((f) => Number(f.content.split(" ")[2]));
      await m.close();
      // Committed 0..target were acknowledged; more may have landed between that line reaching
      // us and the kill (the child keeps committing while the pipe delivers the line).
      assert.ok(facts.length >= target + 1, `found ${facts.length} facts after "committed ${target}"`);
      assert.deepEqual(
        facts,
        facts.map((_, i) => i),
        "every acknowledged commit is there, in order, none torn",
      );
      known = facts.length - 1;
    }
  },
);

test(
  "examples/node-agent.mjs: chats through stdin, remembers in MEMORY_DIR, injects it in the next session",
  { timeout: 120_000 },
  async () => {
    copyFileSync(join(ROOT, "examples/node-agent.mjs"), join(project, "node-agent.mjs"));
    const chats = [];
    const llm = await startLlmServer({
      fallback: (req) => {
        const text = JSON.stringify(req.body?.messages ?? []);
        if (text.includes("factsToRemove")) {
          const fact =
            text.includes("Go microservices") && !text.includes("Lisbon")
              ? "Writes Go microservices at Acme"
              : "Lives in Lisbon";
          return { json: { newFacts: [{ content: fact, category: "context", confidence: 0.9 }] } };
        }
        chats.push(req);
        return { content: `answer ${chats.length}` };
      },
    });
    const dir = join(scratch, "agent-memory");
    const env = {
      OPENAI_BASE_URL: `${llm.baseUrl}/`,
      OPENAI_API_KEY: "test-key",
      MODEL: "test-model",
      MEMORY_DIR: dir,
    };
    try {
      // Session 1: one turn, then end of input: the queued conversation is extracted on exit.
      const s1 = start("node-agent.mjs", [], env);
      s1.stdin.write("I write Go microservices at Acme.\n");
      await waitFor(s1, /assistant> answer 1/);
      s1.stdin.end();
      assert.equal((await s1.exited).code, 0, s1.err);
      assert.equal(chats[0].headers.authorization, "Bearer test-key");
      assert.equal(chats[0].body.model, "test-model");
      assert.doesNotMatch(JSON.stringify(chats[0].body.messages), /<memory>/, "nothing to inject yet");

      // Session 2: the memory is in the system prompt; Ctrl-C (SIGINT) still saves the new turn.
      const s2 = start("node-agent.mjs", [], env);
      s2.stdin.write("I moved to Lisbon last month.\n");
      await waitFor(s2, /assistant> answer 2/);
      const system = chats[1].body.messages[0];
      assert.equal(system.role, "system");
      assert.match(system.content, /<memory>[\s\S]*Writes Go microservices at Acme[\s\S]*<\/memory>/);
      // Right after chatting, "/memory" shows the known fact and that the new turn is queued.
      s2.stdin.write("/memory\n");
      const [, due] = await waitFor(s2, /\(1 conversation queued: extraction due in (\d+) s \(or when you leave\)\)/);
      assert.ok(Number(due) > 0 && Number(due) <= 30, `due in ${due} s`);
      assert.match(s2.out, /- \[context \| 0\.90\] Writes Go microservices at Acme/);
      s2.kill("SIGINT");
      assert.equal((await s2.exited).code, 0, s2.err);

      // Session 3: "/memory" lists both facts; end of input with nothing queued exits at once.
      const s3 = start("node-agent.mjs", [], env);
      s3.stdin.end("/memory\n");
      assert.equal((await s3.exited).code, 0, s3.err);
      assert.match(s3.out, /Writes Go microservices at Acme/);
      assert.match(s3.out, /Lives in Lisbon/);
      assert.match(s3.out, /\(nothing waiting to be learned\)/);
      assert.equal(chats.length, 2, "/memory is not sent to the model");
    } finally {
      await llm.close();
    }
  },
);

test(
  "examples/node-agent.mjs: a second Ctrl-C while a slow extraction runs on exit leaves at once, and the turn stays queued in MEMORY_DIR",
  { timeout: 120_000 },
  async () => {
    copyFileSync(join(ROOT, "examples/node-agent.mjs"), join(project, "node-agent.mjs"));
    const llm = await startLlmServer({
      // Chat answers come back; the extraction never does (a stuck endpoint).
      fallback: (req) =>
        JSON.stringify(req.body?.messages ?? []).includes("factsToRemove") ? { hang: true } : { content: "noted" },
    });
    const dir = join(scratch, "agent-memory-stuck");
    const env = { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: "test-key", MODEL: "test-model", MEMORY_DIR: dir };
    try {
      const s = start("node-agent.mjs", [], env);
      s.stdin.write("I keep bees.\n");
      await waitFor(s, /assistant> noted/);
      s.kill("SIGINT");
      while (!/Ctrl-C again to skip/.test(s.err)) await new Promise((r) => setTimeout(r, 10));
      s.kill("SIGINT");
      assert.equal((await s.exited).code !== null, true, "the process ended by itself");
      assert.match(s.out + s.err, /kept for the next run/);
      const queued = readdirSync(dir)
        .filter((f) => f.includes("queue"))
        .map((f) => readFileSync(join(dir, f), "utf8"))
        .join("\n");
      assert.match(
        queued,
        /I keep bees/,
        `the turn is still queued on disk (${readdirSync(dir)}): ${queued}\n${s.err}`,
      );
    } finally {
      await llm.close();
    }
  },
);
