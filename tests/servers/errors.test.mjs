// How the database stores fail: a server that is down or refuses the login is
// STORAGE_UNAVAILABLE (at once, not after a hang), a full store is STORAGE_QUOTA, and no
// message, through the store or through UserMemory, ever contains the password. The
// driver's error is kept as `cause`. Real servers (tests/helpers/servers.mjs), real SQLite
// files under Node 22.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { createClient } from "redis";
import Redis from "ioredis";
import { UserMemory } from "user-memory";
import { createTableSql, postgresStore } from "user-memory/postgres";
import { redisStore } from "user-memory/redis";
import { sqliteStore } from "user-memory/sqlite";
import { freePort, startPostgres, startRedis } from "../helpers/servers.mjs";
import { nodeBinary, NODE_VERSIONS } from "../helpers/runtimes.mjs";
import { ROOT } from "../helpers/pack.mjs";
import { eventually } from "../helpers/wait.mjs";

const noLlm = async () => "{}";
let postgres;
let redis;
const scratch = mkdtempSync(join(tmpdir(), "um-errors-"));
before(async () => ([postgres, redis] = await Promise.all([startPostgres(), startRedis()])));
after(async () => {
  await Promise.all([postgres?.close(), redis?.close()]);
  rmSync(scratch, { recursive: true, force: true });
});

/** Asserts `promise` rejects with `code` (within 60 s: only a hang fails it) and without `secret` in the message; returns the error. */
async function rejectsWith(promise, code, secret) {
  // fixed wait: a hang detector: fails the test instead of hanging it
  const hang = new Promise((_, reject) => setTimeout(() => reject(new Error("no answer within 60 s")), 60_000).unref());
  const e = await Promise.race([promise, hang]).then(
    () => assert.fail(`expected ${code}, but it succeeded`),
    (err) => err,
  );
  assert.equal(e.code, code, `${e.code}: ${e.message}`);
  if (secret) assert.ok(!e.message.includes(secret), `the message leaks the password: ${e.message}`);
  return e;
}

test("postgres: a stopped server is STORAGE_UNAVAILABLE from the store and from open(), with the driver's error as cause and no password", async () => {
  const pool = new pg.Pool({ connectionString: postgres.url });
  const store = postgresStore(pool, { table: "errors_down" });
  await store.set("k", "v");
  await postgres.stop();
  try {
    const e = await rejectsWith(store.get("k"), "STORAGE_UNAVAILABLE", postgres.password);
    assert.match(e.message, /Postgres is unreachable/);
    assert.ok(e.cause, "the driver's error is the cause");
    const open = await rejectsWith(
      UserMemory.open({ agent: "down", storage: store, llm: noLlm }),
      "STORAGE_UNAVAILABLE",
      postgres.password,
    );
    assert.equal(open.name, "UserMemoryError");
    assert.match(open.message, /postgres table "errors_down"/, "the library's message names the store");
  } finally {
    await postgres.start();
  }
  assert.equal(await store.get("k"), "v", "the same pool works again once the server is back");
  await pool.end();
});

test("postgres: a wrong password is STORAGE_UNAVAILABLE and the message contains neither password", async () => {
  const wrong = "not-the-Secret-42";
  const url = postgres.url.replace(encodeURIComponent(postgres.password), wrong);
  const pool = new pg.Pool({ connectionString: url });
  const e = await rejectsWith(postgresStore(pool).get("k"), "STORAGE_UNAVAILABLE", wrong);
  assert.ok(!e.message.includes(postgres.password));
  assert.match(e.message, /password authentication failed/);
  await pool.end();
});

test("postgres: with createTable: false a missing table is STORAGE_UNAVAILABLE saying how to create it; createTableSql() creates it", async () => {
  const pool = new pg.Pool({ connectionString: postgres.url });
  const store = postgresStore(pool, { table: "errors_missing", createTable: false });
  const e = await rejectsWith(store.get("k"), "STORAGE_UNAVAILABLE");
  assert.match(e.message, /errors_missing.*does not exist.*createTableSql/);
  await pool.query(createTableSql("errors_missing"));
  await store.set("k", "v");
  assert.equal(await store.get("k"), "v");
  // A role without CREATE rights on the schema can still use a store whose table exists.
  await pool.query(
    "CREATE ROLE reader LOGIN PASSWORD 'reader-pass'; GRANT SELECT, INSERT, UPDATE, DELETE ON errors_missing TO reader; REVOKE CREATE ON SCHEMA public FROM PUBLIC",
  );
  const limited = new pg.Pool({
    connectionString: postgres.url.replace(/\/\/postgres:[^@]*@/, "//reader:reader-pass@"),
  });
  assert.equal(await postgresStore(limited, { table: "errors_missing" }).get("k"), "v");
  await limited.end();
  await pool.end();
});

test("postgres: stores on a new table, each on its own connection, all start at once (the CREATE race's losers go on)", async () => {
  // Every store sees no table and sends CREATE TABLE IF NOT EXISTS at the same moment; the
  // loser of that race gets a duplicate-table, duplicate-type or unique-violation error
  // (which of them depends on timing), and must go on with the table the winner made. A
  // code not taken as a lost race fails one of the stores with STORAGE_FAILED.
  const pools = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: postgres.url, max: 1 }));
  try {
    await Promise.all(pools.map((p) => p.query("SELECT 1"))); // connected, so they start together
    for (let round = 0; round < 25; round++) {
      const table = `errors_race_${round}`;
      const results = await Promise.allSettled(pools.map((p, i) => postgresStore(p, { table }).set(`k${i}`, `v${i}`)));
      const failed = results.flatMap((r) => (r.status === "rejected" ? [`${r.reason.code}: ${r.reason.message}`] : []));
      assert.deepEqual(failed, [], `round ${round}: every store writes`);
      const { rows } = await pools[0].query(`SELECT count(*)::int AS n FROM ${table}`);
      assert.equal(rows[0].n, pools.length, `round ${round}: every value is there`);
    }
  } finally {
    await Promise.all(pools.map((p) => p.end()));
  }
});

test("postgres: invalid table names and arguments are INVALID_INPUT at construction", () => {
  assert.throws(() => postgresStore({}), { code: "INVALID_INPUT" });
  for (const table of ["", "a;drop table x", "1abc", 'x"y', "a.b.c", 42])
    assert.throws(() => postgresStore({ query() {} }, { table }), { code: "INVALID_INPUT" }, String(table));
  assert.match(
    createTableSql("app.memory"),
    /^CREATE TABLE IF NOT EXISTS "app"\."memory" \(key text COLLATE "C" PRIMARY KEY, value text NOT NULL\)$/,
  );
});

test("redis: a disconnected client is STORAGE_UNAVAILABLE at once (nothing waits to happen later), and works again after reconnecting", async () => {
  const client = createClient({ url: redis.url, socket: { reconnectStrategy: () => 100 } });
  client.on("error", () => {});
  await client.connect();
  const store = redisStore(client, { prefix: "errors:" });
  await store.set("k", "v");
  await redis.stop();
  try {
    const started = Date.now();
    const e = await rejectsWith(store.compareAndSet("k", "v", "late"), "STORAGE_UNAVAILABLE", redis.password);
    assert.ok(Date.now() - started < 2000, "rejected at once");
    assert.match(e.message, /Redis is unreachable: the client lost its connection and is reconnecting/);
    await rejectsWith(
      UserMemory.open({ agent: "down", storage: store, llm: noLlm }),
      "STORAGE_UNAVAILABLE",
      redis.password,
    );
  } finally {
    await redis.start();
  }
  await eventually(() => client.isReady, "the client to reconnect");
  assert.equal(await store.get("k"), "v", "the refused compareAndSet never happened");
  await client.quit();
  const unconnected = redisStore(createClient({ url: redis.url }));
  const e = await rejectsWith(unconnected.get("k"), "STORAGE_UNAVAILABLE");
  assert.match(e.message, /connect it first/);
});

test("redis: out of memory (maxmemory, noeviction) is STORAGE_QUOTA and the previous value stays", async () => {
  const admin = await createClient({ url: redis.url }).connect();
  const store = redisStore(admin, { prefix: "quota:" });
  await store.set("doc", "small");
  await admin.sendCommand(["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
  const used = Number(/used_memory:(\d+)/.exec(await admin.sendCommand(["INFO", "memory"]))[1]);
  await admin.sendCommand(["CONFIG", "SET", "maxmemory", String(used + 512 * 1024)]);
  try {
    const e = await rejectsWith(
      store.compareAndSet("doc", "small", "x".repeat(2 << 20)),
      "STORAGE_QUOTA",
      redis.password,
    );
    assert.match(e.message, /out of memory/);
    const viaLibrary = await UserMemory.open({ agent: "full", storage: store, llm: noLlm }).then(async (m) => {
      const doc = await m.export();
      doc.facts.push({ content: "y".repeat(2 << 20) });
      return m.import(doc).finally(() => m.close());
    });
    assert.fail(`import succeeded: ${viaLibrary}`);
  } catch (e) {
    assert.equal(e.code, "STORAGE_QUOTA", e.message);
  } finally {
    await admin.sendCommand(["CONFIG", "SET", "maxmemory", "0"]);
  }
  assert.equal(await store.get("doc"), "small");
  await admin.quit();
});

test("redis: a client of neither library, a wrong prefix or connectTimeoutMs are INVALID_INPUT", () => {
  assert.throws(() => redisStore({ get() {} }), { code: "INVALID_INPUT" });
  assert.throws(() => redisStore(createClient(), { prefix: 3 }), { code: "INVALID_INPUT" });
  for (const connectTimeoutMs of [-1, "5000", NaN, 1e9])
    assert.throws(
      () => redisStore(createClient(), { connectTimeoutMs }),
      { code: "INVALID_INPUT" },
      String(connectTimeoutMs),
    );
});

test("redis: a client on its first connect is waited for (ioredis `new Redis(url)`, node-redis connect() not awaited), as the README writes it", async () => {
  const io = new Redis(redis.url);
  assert.notEqual(io.status, "ready", "ioredis is still connecting when the store is made");
  const ioStore = redisStore(io, { prefix: "first:" });
  await ioStore.set("k", "io");
  const io2 = new Redis(redis.url);
  const memory = await UserMemory.open({ agent: "first", storage: redisStore(io2), llm: noLlm });
  await memory.addFact({ content: "Prefers TypeScript" });
  assert.equal((await memory.get()).facts.length, 1);
  await memory.close();
  const node = createClient({ url: redis.url });
  const connecting = node.connect();
  assert.equal(node.isReady, false);
  assert.equal(await redisStore(node, { prefix: "first:" }).get("k"), "io");
  await connecting;
  await Promise.all([io.quit(), io2.quit(), node.quit()]);
});

test("redis: the not-connected errors say what the client is doing: cannot connect (with the client's error), was closed, reconnecting", async () => {
  const port = await freePort();
  const nobody = new Redis({ port, host: "127.0.0.1", password: "hunter2-secret", retryStrategy: () => 50 });
  const e = await rejectsWith(
    redisStore(nobody, { connectTimeoutMs: 300 }).get("k"),
    "STORAGE_UNAVAILABLE",
    "hunter2-secret",
  );
  assert.match(e.message, /the client did not connect within 300 ms \(.*ECONNREFUSED/);
  nobody.disconnect();
  const closed = new Redis(redis.url);
  const closedStore = redisStore(closed);
  await closedStore.get("k");
  await closed.quit();
  assert.match((await rejectsWith(closedStore.get("k"), "STORAGE_UNAVAILABLE")).message, /the client was closed/);
  const node = await createClient({ url: redis.url }).connect();
  const nodeStore = redisStore(node);
  await node.quit();
  assert.match((await rejectsWith(nodeStore.get("k"), "STORAGE_UNAVAILABLE")).message, /the client was closed/);
});

test("sqlite: in Node 20 (no node:sqlite) the store says which runtimes have SQLite, as STORAGE_UNAVAILABLE", async () => {
  if (Number(process.versions.node.split(".")[0]) >= 22) return; // this runner has SQLite
  const e = await rejectsWith(sqliteStore(join(scratch, "x.db")).get("k"), "STORAGE_UNAVAILABLE");
  assert.match(e.message, /Node 20\.\d+\.\d+ has no built-in SQLite.*Node ≥ 22\.5.*Bun/);
  await rejectsWith(
    UserMemory.open({ storage: sqliteStore(join(scratch, "y.db")), llm: noLlm }),
    "STORAGE_UNAVAILABLE",
  );
  assert.throws(() => sqliteStore(""), { code: "INVALID_INPUT" });
  assert.throws(() => sqliteStore("x.db", { busyTimeoutMs: -1 }), { code: "INVALID_INPUT" });
});

test(
  "sqlite (Node 22): a full database is STORAGE_QUOTA with the old document intact; a file that is not a database or sits in a missing folder is STORAGE_UNAVAILABLE",
  { timeout: 120_000 },
  (t) => {
    const node22 = nodeBinary(NODE_VERSIONS.node22);
    if (!node22) return t.skip("no Node 22 binary for this platform");
    const script = `
    import { writeFileSync } from "node:fs";
    import { DatabaseSync } from "node:sqlite";
    import { UserMemory } from "user-memory";
    import { sqliteStore } from "user-memory/sqlite";
    const dir = process.argv[1];
    const out = {};
    const db = new DatabaseSync(dir + "/full.db");
    const store = sqliteStore(db);
    const m = await UserMemory.open({ storage: store, llm: async () => "{}" });
    await m.addFact({ content: "Kept before the disk filled up" });
    db.exec("PRAGMA max_page_count = " + db.prepare("PRAGMA page_count").get().page_count);
    const doc = await m.export();
    doc.facts.push(...Array.from({ length: 300 }, (_, i) => ({ content: "fact " + i + " " + "z".repeat(500) })));
    out.full = await m.import(doc).then(() => "ok", (e) => e.code);
    out.kept = (await m.get()).facts.map((f) => f.content);
    await m.close();
    writeFileSync(dir + "/not-a-db.db", "this is a text file, not SQLite, ".repeat(200));
    out.notDb = await sqliteStore(dir + "/not-a-db.db").get("k").then(() => "ok", (e) => e.code + " " + e.message);
    out.missing = await sqliteStore(dir + "/no/such/folder/m.db").get("k").then(() => "ok", (e) => e.code + " " + e.message);
    console.log(JSON.stringify(out));`;
    const out = JSON.parse(
      execFileSync(node22.path, ["--input-type=module", "-e", script, scratch], {
        cwd: ROOT,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }).trim(),
    );
    assert.equal(out.full, "STORAGE_QUOTA");
    assert.deepEqual(out.kept, ["Kept before the disk filled up"], "the previous document stays");
    assert.match(out.notDb, /^STORAGE_UNAVAILABLE .*not a database/);
    assert.match(out.missing, /^STORAGE_UNAVAILABLE .*unable to open/);
  },
);

test("a port nobody listens on is STORAGE_UNAVAILABLE for postgres, at once", async () => {
  const port = await freePort();
  const pool = new pg.Pool({ connectionString: `postgres://postgres:hunter2-secret@127.0.0.1:${port}/postgres` });
  const e = await rejectsWith(postgresStore(pool).get("k"), "STORAGE_UNAVAILABLE", "hunter2-secret");
  assert.match(e.message, /ECONNREFUSED/);
  await pool.end();
});
