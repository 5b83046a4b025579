// The storage adapter contract (tests/helpers/store-contract.mjs) against every adapter, each on
// its real backend: the file store, Postgres and Redis (node-redis 4, 5 and 6, and ioredis) started by
// tests/helpers/servers.mjs, SQLite under Node 22, Node 24 and Bun (child processes: Node 20 has
// no node:sqlite), and the Durable Object and D1 stores inside workerd (miniflare).
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
import { CASES, runCase } from "../helpers/store-contract.mjs";
import { startPostgres, startRedis } from "../helpers/servers.mjs";
import { binary, nodeBinary, NODE_VERSIONS } from "../helpers/runtimes.mjs";
import { ROOT } from "../helpers/pack.mjs";
import { startWorkerd } from "./workerd.mjs";

const scratch = mkdtempSync(join(tmpdir(), "um-contract-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;

/** Registers every contract case as a test of `label` on `backend` (made in a before hook). */
function suite(label, setUp) {
  describe(label, () => {
    let backend;
    before(async () => (backend = await setUp()));
    after(async () => backend?.end?.());
    for (const c of CASES) test(c.name, { timeout: 60_000 }, () => runCase(backend, c));
  });
}

suite("file store", async () => ({
  async fresh() {
    const dir = join(scratch, `files-${++n}`);
    return { client: async () => fileStore(dir), close: async () => rmSync(dir, { recursive: true, force: true }) };
  },
}));

suite("postgres store", async () => {
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
        async close() {
          await pools[0]?.query(`DROP TABLE IF EXISTS ${table}`);
          await Promise.all(pools.map((p) => p.end()));
        },
      };
    },
    end: () => server.close(),
  };
});

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
          close: () => Promise.all(clients.map((c) => c.quit())),
        };
      },
      end: () => server.close(),
    };
  };
}

suite("redis store (node-redis 6)", redisBackend((url) => createClient({ url }).connect()));
suite("redis store (node-redis 5)", redisBackend((url) => createClientV5({ url }).connect()));
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
        execFile(bin.path, [...args, join(ROOT, "tests/servers/sqlite-contract.mjs"), scratch], { cwd: ROOT, timeout: 240_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
          err ? reject(new Error(`${label} failed (${err.code ?? err.signal}): ${stderr || err.message}`)) : resolve(stdout),
        ),
      );
      results = new Map(JSON.parse(out.trim().split("\n").pop()).map((r) => [r.name, r]));
    });
    for (const c of CASES) {
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
  });
}

workerdSuite("durable object store (workerd)", "do");
workerdSuite("d1 store (workerd)", "d1");
