// The storage adapter contract (tests/helpers/store-contract.mjs) against every adapter, each on
// its real backend: the file store, Postgres and Redis (node-redis 4, 5 and 6, and ioredis) started by
// tests/helpers/servers.mjs, SQLite under Node 22, Node 24 and Bun (child processes: Node 20 has
// no node:sqlite), and the Durable Object and D1 stores inside workerd (miniflare). Each server
// store also runs encrypted memory with history and undo once (tests/helpers/encrypted-roundtrip.mjs),
// its raw values read with the database client, extraction against the scripted LLM server.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { createClient } from "redis";
import { createClient as createClientV4 } from "redis-v4";
import { createClient as createClientV5 } from "redis-v5";
import Redis from "ioredis";
import { fileStore } from "user-memory/node";
import { postgresStore } from "user-memory/postgres";
import { redisStore } from "user-memory/redis";
import { UserMemory } from "user-memory";
import { CASES, runCase } from "../helpers/store-contract.mjs";
import { ENCRYPTED_CASE, encryptedRoundTrip } from "../helpers/encrypted-roundtrip.mjs";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { startPostgres, startRedis } from "../helpers/servers.mjs";
import { binary, nodeBinary, NODE_VERSIONS } from "../helpers/runtimes.mjs";
import { ROOT } from "../helpers/pack.mjs";
import { startWorkerd } from "./workerd.mjs";

const scratch = mkdtempSync(join(tmpdir(), "um-contract-"));
// Every extraction of the encrypted round trips learns "Keeps bees".
let llm;
before(async () => (llm = await startLlmServer({ fallback: () => factsReply("Keeps bees") })));
after(async () => {
  await llm?.close();
  rmSync(scratch, { recursive: true, force: true });
});
let n = 0;

/**
 * Registers every contract case as a test of `label` on `backend` (made in a before hook); with
 * `encrypted`, also the encrypted round trip on a fresh namespace (whose `raw()` reads the
 * stored values with the database client).
 */
function suite(label, setUp, { encrypted = false } = {}) {
  describe(label, () => {
    let backend;
    before(async () => (backend = await setUp()));
    after(async () => backend?.end?.());
    for (const c of CASES) test(c.name, { timeout: 60_000 }, () => runCase(backend, c));
    if (encrypted) {
      test(ENCRYPTED_CASE, { timeout: 120_000 }, async () => {
        const ns = await backend.fresh();
        try {
          await encryptedRoundTrip({
            UserMemory,
            storage: () => ns.client(),
            raw: () => ns.raw(),
            llmBaseUrl: llm.baseUrl,
          });
        } finally {
          await ns.close();
        }
      });
    }
  });
}

suite("file store", async () => ({
  async fresh() {
    const dir = join(scratch, `files-${++n}`);
    return { client: async () => fileStore(dir), close: async () => rmSync(dir, { recursive: true, force: true }) };
  },
}));

suite(
  "postgres store",
  async () => {
    const server = await startPostgres();
    return {
      async fresh() {
        const table = `contract_${++n}`;
        const pools = [];
        return {
          async client() {
            const pool = new pg.Pool({ connectionString: server.url, max: 2 });
            pools.push(pool);
            return postgresStore(pool, { table });
          },
          raw: async () => (await pools[0].query(`SELECT key, value FROM ${table} ORDER BY key`)).rows,
          async close() {
            await pools[0]?.query(`DROP TABLE IF EXISTS ${table}`);
            await Promise.all(pools.map((p) => p.end()));
          },
        };
      },
      end: () => server.close(),
    };
  },
  { encrypted: true },
);

/** A Redis backend over clients made by `connect(url)`. */
function redisBackend(connect) {
  return async () => {
    const server = await startRedis();
    return {
      async fresh() {
        const prefix = `contract:${++n}:`;
        const clients = [];
        return {
          async client() {
            const c = await connect(server.url);
            clients.push(c);
            return redisStore(c, { prefix });
          },
          async raw() {
            // Every string under the prefix (the key index is a sorted set: not a GET).
            const values = {};
            for (const key of (await clients[0].keys(`${prefix}*`)).sort()) {
              const value = await clients[0].get(key).catch(() => null);
              if (value !== null) values[key] = value;
            }
            return values;
          },
          close: () => Promise.all(clients.map((c) => c.quit())),
        };
      },
      end: () => server.close(),
    };
  };
}

suite(
  "redis store (node-redis 6)",
  redisBackend((url) => createClient({ url }).connect()),
  { encrypted: true },
);
suite(
  "redis store (node-redis 5)",
  redisBackend((url) => createClientV5({ url }).connect()),
);
suite(
  "redis store (node-redis 4)",
  // v4's connect() resolves to nothing, not to the client
  redisBackend(async (url) => {
    const c = createClientV4({ url });
    await c.connect();
    return c;
  }),
);
suite(
  "redis store (ioredis)",
  redisBackend(async (url) => {
    const c = new Redis(url, { lazyConnect: true });
    await c.connect();
    return c;
  }),
);

/** Runs tests/servers/sqlite-contract.mjs in `bin` and registers its results as tests. */
function runtimeSuite(label, find, args = []) {
  describe(label, () => {
    let results = new Map();
    let skip = null;
    before(async () => {
      const bin = find();
      if (!bin) {
        skip = `no ${label} binary for ${process.platform}-${process.arch}`;
        return;
      }
      const out = await new Promise((resolve, reject) =>
        execFile(
          bin.path,
          [...args, join(ROOT, "tests/servers/sqlite-contract.mjs"), scratch, llm.baseUrl],
          { cwd: ROOT, timeout: 240_000, maxBuffer: 16 << 20 },
          (err, stdout, stderr) =>
            err
              ? reject(new Error(`${label} failed (${err.code ?? err.signal}): ${stderr || err.message}`))
              : resolve(stdout),
        ),
      );
      results = new Map(JSON.parse(out.trim().split("\n").pop()).map((r) => [r.name, r]));
    });
    for (const c of [...CASES, { name: ENCRYPTED_CASE }]) {
      test(c.name, (t) => {
        if (skip) return t.skip(skip);
        const r = results.get(c.name);
        assert.ok(r, "the case ran");
        assert.ok(r.ok, r.message);
      });
    }
  });
}

runtimeSuite("sqlite store (Node 22, node:sqlite)", () => nodeBinary(NODE_VERSIONS.node22));
runtimeSuite("sqlite store (Node 24, node:sqlite)", () => nodeBinary(NODE_VERSIONS.node24));
runtimeSuite("sqlite store (Bun, bun:sqlite)", () => binary("bun"));

/** The contract inside workerd: each case runs in a Durable Object of its own, or on a D1 table of its own. */
function workerdSuite(label, backend) {
  describe(label, () => {
    let worker;
    before(async () => (worker = await startWorkerd()));
    after(async () => worker?.dispose());
    for (const c of CASES) {
      test(c.name, { timeout: 60_000 }, async () => {
        const r = await worker.call(`/contract?backend=${backend}&case=${encodeURIComponent(c.name)}`);
        assert.equal(r.length, 1, JSON.stringify(r));
        assert.ok(r[0].ok, r[0].message);
      });
    }
    test(ENCRYPTED_CASE, { timeout: 120_000 }, async () => {
      const r = await worker.call(`/encrypted?backend=${backend}&llm=${encodeURIComponent(llm.baseUrl)}`);
      assert.equal(r.length, 1, JSON.stringify(r));
      assert.ok(r[0].ok, r[0].message);
    });
  });
}

workerdSuite("durable object store (workerd)", "do");
workerdSuite("d1 store (workerd)", "d1");
