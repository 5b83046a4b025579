// workerd (through miniflare) from the packed tarball: examples/worker/worker.js bundled the
// way wrangler does it, with Durable Objects, the Durable Object storage adapter, the
// debounce driven by an alarm set from nextDueAt(), and fetch to a scripted
// OpenAI-compatible server on 127.0.0.1 (workerd reaches loopback directly here).
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { freshProject, ROOT } from "../helpers/pack.mjs";
import { startLlmServer } from "../helpers/llm-server.mjs";

let project;
let Miniflare;
const persist = mkdtempSync(join(tmpdir(), "um-do-"));
const chats = [];
const extractions = [];
let llm;
/** Where extraction requests are redirected to, when set: a host that must hear nothing. */
let redirectExtractionsTo = null;
let other;

before(async () => {
  project = freshProject({ extra: ["esbuild", "miniflare"] });
  copyFileSync(join(ROOT, "examples/worker/worker.js"), join(project, "worker.js"));
  const { build } = await import(join(project, "node_modules/esbuild/lib/main.js"));
  // What wrangler does: the workerd condition, cloudflare:* left to the runtime, the .wasm
  // kept as a module of its own.
  await build({
    entryPoints: [join(project, "worker.js")],
    bundle: true,
    format: "esm",
    outdir: join(project, "dist"),
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    loader: { ".wasm": "copy" },
    logLevel: "error",
  });
  ({ Miniflare } = await import(join(project, "node_modules/miniflare/dist/src/index.js")));
  llm = await startLlmServer({
    fallback: (req) => {
      const text = JSON.stringify(req.body?.messages ?? []);
      if (!text.includes("factsToRemove")) {
        chats.push(req);
        return { content: `answer ${chats.length}` };
      }
      extractions.push(req);
      if (redirectExtractionsTo)
        return { status: 307, headers: { location: `${redirectExtractionsTo}/v1/chat/completions` } };
      const facts = [];
      if (/User: I write Go microservices/.test(text)) facts.push("Writes Go microservices at Acme");
      if (/User: I live in Lisbon/.test(text)) facts.push("Lives in Lisbon");
      return { json: { newFacts: facts.map((content) => ({ content, category: "context", confidence: 0.9 })) } };
    },
  });
});

after(async () => {
  await llm?.close();
  await other?.close();
  rmSync(persist, { recursive: true, force: true });
});

/** Runs the bundled example worker; `debounceMs` is the memory debounce. */
async function startWorker(debounceMs, { persistTo = persist, bindings = {} } = {}) {
  const wasm = readdirSync(join(project, "dist")).find((f) => f.endsWith(".wasm"));
  const mf = new Miniflare({
    modulesRoot: join(project, "dist"),
    modules: [
      { type: "ESModule", path: join(project, "dist/worker.js") },
      { type: "CompiledWasm", path: join(project, "dist", wasm) },
    ],
    compatibilityDate: "2026-04-01",
    durableObjects: { MEMORY_AGENT: "MemoryAgent" },
    durableObjectsPersist: persistTo,
    bindings: {
      OPENAI_BASE_URL: llm.baseUrl,
      OPENAI_API_KEY: "test-key",
      MODEL: "test-model",
      MEMORY_DEBOUNCE_MS: String(debounceMs),
      ...bindings,
    },
    host: "127.0.0.1",
    port: 0,
  });
  const url = await mf.ready;
  const call = async (path, body) => {
    const res = await fetch(
      new URL(path, url),
      body ? { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {},
    );
    assert.equal(res.status, 200, `${path}: ${res.status} ${await res.clone().text()}`);
    return res.json();
  };
  return { mf, call };
}

test(
  "workerd: chats observed in a Durable Object are extracted by its alarm, then injected",
  { timeout: 120_000 },
  async () => {
    const debounceMs = 300;
    const { mf, call } = await startWorker(debounceMs);
    try {
      // Two chats of one user at the same time, in two threads: both are queued.
      const [a, b] = await Promise.all([
        call("/chat?user=alice", {
          threadId: "t1",
          messages: [{ role: "user", content: "I write Go microservices at Acme." }],
        }),
        call("/chat?user=alice", { threadId: "t2", messages: [{ role: "user", content: "I live in Lisbon." }] }),
      ]);
      assert.deepEqual([a.reply, b.reply].sort(), ["answer 1", "answer 2"]);
      assert.equal(chats[0].headers.authorization, "Bearer test-key");
      const status = await call("/status?user=alice");
      assert.equal(status.alarm, status.nextDueAt, "the alarm is set to nextDueAt()");
      if (status.alarm !== null) assert.deepEqual(status.pending.sort(), ["t1", "t2"]);

      // The alarm fires after the debounce and extracts both threads.
      let doc;
      do {
        await new Promise((r) => setTimeout(r, 50));
        doc = await call("/memory?user=alice");
      } while (doc.facts.length < 2);
      assert.deepEqual(doc.facts.map((f) => f.content).sort(), ["Lives in Lisbon", "Writes Go microservices at Acme"]);
      assert.equal(extractions.length, 2, "one extraction call per thread");
      for (const e of extractions) {
        assert.ok(
          e.at - chats[0].at >= debounceMs,
          "extracted by the alarm, after the debounce, not during the request",
        );
      }
      const after = await call("/status?user=alice");
      assert.deepEqual(
        [after.pending, after.nextDueAt, after.alarm],
        [[], null, null],
        "nothing left; the alarm is cleared",
      );

      // The next chat carries the memory in its system prompt.
      await call("/chat?user=alice", {
        threadId: "t3",
        messages: [{ role: "user", content: "Which language should I use for the new service?" }],
      });
      const system = chats.at(-1).body.messages[0];
      assert.equal(system.role, "system");
      assert.match(system.content, /<memory>[\s\S]*Writes Go microservices at Acme[\s\S]*<\/memory>/);
      // Another user has a memory of their own.
      assert.deepEqual((await call("/memory?user=bob")).facts, []);
    } finally {
      await mf.dispose();
    }
  },
);

test(
  "workerd: with MEMORY_PASSPHRASE the Durable Object stores only ciphertext and reads it back after a restart",
  { timeout: 120_000 },
  async () => {
    const encPersist = mkdtempSync(join(tmpdir(), "um-do-enc-"));
    const options = { persistTo: encPersist, bindings: { MEMORY_PASSPHRASE: "worker passphrase" } };
    try {
      const first = await startWorker(100, options);
      try {
        await first.call("/chat?user=dora", {
          threadId: "d1",
          messages: [{ role: "user", content: "I live in Lisbon." }],
        });
        let doc;
        do {
          await new Promise((r) => setTimeout(r, 50));
          doc = await first.call("/memory?user=dora");
        } while (doc.facts.length < 1);
        assert.deepEqual(
          doc.facts.map((f) => f.content),
          ["Lives in Lisbon"],
        );
      } finally {
        await first.mf.dispose();
      }
      const stored = readdirSync(encPersist, { recursive: true })
        .map((f) => join(encPersist, String(f)))
        .filter((f) => statSync(f).isFile())
        .map((f) => readFileSync(f).toString("latin1"))
        .join("");
      assert.ok(stored.includes("umenc2:"), "the values are sealed");
      assert.ok(
        !stored.includes("Lisbon") && !stored.includes("worker passphrase"),
        "no plaintext in the Durable Object's storage",
      );
      const second = await startWorker(100, options);
      try {
        assert.deepEqual(
          (await second.call("/memory?user=dora")).facts.map((f) => f.content),
          ["Lives in Lisbon"],
        );
      } finally {
        await second.mf.dispose();
      }
    } finally {
      rmSync(encPersist, { recursive: true, force: true });
    }
  },
);

test(
  "workerd: a queued conversation and its alarm survive a restart of the runtime",
  { timeout: 120_000 },
  async () => {
    const debounceMs = 120_000; // long enough that nothing runs before the restart (below maxWaitMs)
    const first = await startWorker(debounceMs);
    const before = Date.now();
    try {
      await first.call("/chat?user=carol", {
        threadId: "c1",
        messages: [{ role: "user", content: "I live in Lisbon." }],
      });
    } finally {
      await first.mf.dispose();
    }
    const second = await startWorker(debounceMs);
    try {
      const status = await second.call("/status?user=carol");
      assert.deepEqual(status.pending, ["c1"], "the entry was persisted before the response");
      assert.ok(status.nextDueAt >= before + debounceMs, JSON.stringify({ status, before }));
      assert.equal(status.alarm, status.nextDueAt, "the alarm survived the restart");
    } finally {
      await second.mf.dispose();
    }
  },
);

test(
  "workerd: an extraction answered with a 307 to another origin is not followed; that origin receives nothing",
  { timeout: 120_000 },
  async () => {
    other = await startLlmServer({
      fallback: () => ({ json: { newFacts: [{ content: "Planted", category: "context", confidence: 0.9 }] } }),
    });
    redirectExtractionsTo = other.origin;
    const { mf, call } = await startWorker(100);
    try {
      const seen = extractions.length;
      await call("/chat?user=dave", { threadId: "d1", messages: [{ role: "user", content: "I live in Lisbon." }] });
      while (extractions.length === seen) await new Promise((r) => setTimeout(r, 50));
      // The alarm's attempt failed; the entry stays queued for the next one.
      let status;
      do {
        await new Promise((r) => setTimeout(r, 50));
        status = await call("/status?user=dave");
      } while (status.processing);
      assert.deepEqual(status.pending, ["d1"]);
      assert.equal(other.requests.length, 0, "the other origin received nothing");
      assert.deepEqual((await call("/memory?user=dave")).facts, []);
    } finally {
      redirectExtractionsTo = null;
      await mf.dispose();
    }
  },
);
