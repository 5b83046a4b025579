// Many users in one process, on each persistent Node store: files, SQLite, Postgres, Redis.
//
//   node scripts/build.mjs && node bench/servers.mjs [users=1000] [backends=files,sqlite,postgres,redis]
//
// For every backend, in a process of its own (SQLite's under Node 22, the others under this
// Node), with `users` users of 20 facts each (one memory per user, `agent: userId`):
//
//   import      open + import(20-fact document) + close, once per user (populating the store)
//   request     open + inject(a 3-message conversation) + close: what a request handler that
//               keeps no instance open pays per request, for every user in random order,
//               one at a time (latency) and 16 at once (throughput)
//   turn        open + observe(one turn) + flush() + close, once per user: the extraction
//               of a queued conversation, against the scripted OpenAI-compatible server on
//               127.0.0.1 (answers at once with one new fact), so it is the library's and the
//               store's cost around one LLM call
//   memory      every user's instance open at once, in a fresh process: RSS and JS heap
//               growth per instance
//
// Postgres (pg.Pool of 16) and Redis (one node-redis client) are the real servers of
// tests/helpers/servers.mjs (Debian packages; data under target/servers/, fsync on, Redis
// with an fsync'ed append-only file). Files: one fileStore folder. SQLite: one file, WAL.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const FACTS = 20;

if (process.env.BENCH_CHILD) await child(JSON.parse(process.env.BENCH_CHILD));
else await parent();

async function parent() {
  const users = Number(process.argv[2] ?? 1000);
  const wanted = (process.argv[3] ?? "files,sqlite,postgres,redis").split(",");
  const { startPostgres, startRedis } = await import("../tests/helpers/servers.mjs");
  const { nodeBinary, NODE_VERSIONS } = await import("../tests/helpers/runtimes.mjs");
  const scratch = mkdtempSync(join(tmpdir(), "um-bench-servers-"));
  const rows = [];
  try {
    for (const backend of wanted) {
      let server = null;
      let spec;
      let node = process.execPath;
      if (backend === "files") spec = { dir: join(scratch, "files") };
      else if (backend === "sqlite") {
        spec = { url: `sqlite:${join(scratch, "memory.db")}` };
        node = nodeBinary(NODE_VERSIONS.node22)?.path;
        if (!node) throw new Error("no Node 22 binary for SQLite on this platform");
      } else if (backend === "postgres") spec = { url: (server = await startPostgres()).url };
      else if (backend === "redis") spec = { url: (server = await startRedis()).url };
      else throw new Error(`unknown backend ${backend}`);
      try {
        process.stderr.write(`${backend}: ${users} users…\n`);
        const run = (phase) =>
          new Promise((resolve, reject) =>
            execFile(
              node,
              ["--expose-gc", SELF],
              {
                env: { ...process.env, BENCH_CHILD: JSON.stringify({ backend, spec, users, phase }) },
                maxBuffer: 1 << 24,
                timeout: 3_600_000,
              },
              (err, stdout, stderr) =>
                err
                  ? reject(new Error(`${backend}: ${stderr || err.message}`))
                  : resolve(JSON.parse(stdout.trim().split("\n").pop())),
            ),
          );
        // The memory of open instances is measured in a fresh process, on the populated store
        // (the wasm heap of a process that has already worked never shrinks).
        const timings = await run("timings");
        rows.push({ ...timings, memory: await run("memory") });
      } finally {
        await server?.close();
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const ms = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
  console.log(`\n${users} users × ${FACTS} facts, medians (p95) in ms; ${process.version} (SQLite: Node 22)\n`);
  console.log(
    "| store | import per user | request: open + inject + close | requests/s, 16 at once | turn: open + observe + flush + close | memory per open instance |",
  );
  console.log("|---|--:|--:|--:|--:|--:|");
  for (const r of rows) {
    console.log(
      `| ${r.backend} | ${ms(r.import.median)} (${ms(r.import.p95)}) | ${ms(r.request.median)} (${ms(r.request.p95)}) | ${r.throughput.toFixed(0)} | ${ms(r.turn.median)} (${ms(r.turn.p95)}) | ${(r.memory.rss / 1024).toFixed(0)} KB RSS, ${(r.memory.heap / 1024).toFixed(1)} KB heap |`,
    );
  }
  console.log(`\n${JSON.stringify(rows)}`);
}

/** One backend: populate, request, turn ("timings"); or memory of open instances ("memory"). Prints one JSON line. */
async function child({ backend, spec, users, phase }) {
  const { UserMemory } = await import("user-memory");
  const { openStore } = await import("../pkg/store-url.js");
  const { startLlmServer } = await import("../tests/helpers/llm-server.mjs");
  const store = await openStore(spec);
  const storage = store.storage;
  const noLlm = async () => "{}";
  const ids = Array.from({ length: users }, (_, i) => `user-${i}`);
  const conversation = [
    { role: "user", content: "I am planning the migration of our billing service" },
    { role: "assistant", content: "Which database does it use today?" },
    { role: "user", content: "Postgres, and we deploy with Kubernetes on Fridays" },
  ];
  const doc = (u) => ({
    version: "1.0",
    user: {
      workContext: { summary: `Backend engineer ${u} at a logistics company`, updatedAt: "2026-01-01T00:00:00Z" },
    },
    history: {},
    facts: Array.from({ length: FACTS }, (_, i) => ({
      id: `fact_${(i + 1).toString(16).padStart(8, "0")}`,
      content: [
        `Writes Go microservices (${i})`,
        `Deploys with Kubernetes on Fridays (${i})`,
        `Prefers Postgres over MySQL (${i})`,
        `喜欢喝茶 (${i})`,
      ][i % 4],
      category: "knowledge",
      confidence: 0.5 + (i % 5) / 10,
      createdAt: "2026-01-01T00:00:00Z",
      source: "import",
    })),
  });
  const time = async (fn) => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  if (phase === "memory") {
    // every user's instance open at once, in this fresh process
    const warm = await UserMemory.open({ agent: ids[0], storage, llm: noLlm, autoProcess: false });
    await warm.close();
    globalThis.gc?.();
    const before = process.memoryUsage();
    const open = [];
    for (const u of ids) open.push(await UserMemory.open({ agent: u, storage, llm: noLlm, autoProcess: false }));
    globalThis.gc?.();
    const during = process.memoryUsage();
    for (const m of open) await m.close();
    await store.close();
    console.log(
      JSON.stringify({ rss: (during.rss - before.rss) / users, heap: (during.heapUsed - before.heapUsed) / users }),
    );
    return;
  }
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)] };
  };

  // import: populate every user
  const imports = [];
  for (const u of ids) {
    imports.push(
      await time(async () => {
        const m = await UserMemory.open({ agent: u, storage, llm: noLlm, autoProcess: false });
        await m.import(doc(u));
        await m.close();
      }),
    );
  }

  // request: open + inject + close, users in random order
  const order = [...ids].sort(() => Math.random() - 0.5);
  const request = async (u) => {
    const m = await UserMemory.open({ agent: u, storage, llm: noLlm, autoProcess: false });
    const block = await m.inject(conversation);
    await m.close();
    if (!block.includes("<memory>")) throw new Error(`no block for ${u}`);
  };
  for (const u of order.slice(0, 50)) await request(u); // warm-up
  const requests = [];
  for (const u of order) requests.push(await time(() => request(u)));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < order.length) await request(order[next++]);
    }),
  );
  const throughput = order.length / ((performance.now() - t0) / 1000);

  // turn: open + observe + flush + close against the scripted LLM server
  const llmServer = await startLlmServer({
    fallback: () => ({
      json: {
        newFacts: [{ content: "Migrates the billing service", category: "goal", confidence: 0.9 }],
        factsToRemove: [],
      },
    }),
  });
  const llm = { baseUrl: llmServer.baseUrl, apiKey: "sk-bench", model: "m", maxRetries: 0 };
  const turns = [];
  for (const u of ids) {
    turns.push(
      await time(async () => {
        const m = await UserMemory.open({ agent: u, storage, llm, autoProcess: false });
        await m.observe("thread-1", conversation);
        const r = await m.flush();
        await m.close();
        if (r.processed.length !== 1) throw new Error(`nothing processed for ${u}`);
      }),
    );
  }
  await llmServer.close();

  await store.close();
  console.log(
    JSON.stringify({
      backend,
      users,
      import: stats(imports),
      request: stats(requests),
      throughput,
      turn: stats(turns),
    }),
  );
}
