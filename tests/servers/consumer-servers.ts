// A TypeScript consumer of the database stores against the clients' own types (pg with
// @types/pg, redis, ioredis, node:sqlite from @types/node), compiled with `tsc --strict` from
// the packed tarball by tests/servers/types.test.mjs: a real Pool, node-redis client, ioredis
// client and DatabaseSync are accepted as they are typed there, and misuse is refused.
import pg from "pg";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { DatabaseSync } from "node:sqlite";
import { UserMemory, type StorageAdapter } from "user-memory";
import { createTableSql, PostgresStore, postgresStore, type PostgresStoreOptions } from "user-memory/postgres";
import { RedisStore, redisStore } from "user-memory/redis";
import { SqliteStore, sqliteStore } from "user-memory/sqlite";

const options: PostgresStoreOptions = { table: "app.user_memory", createTable: false };
const pool = new pg.Pool({ connectionString: "postgres://localhost/app" });
const pgStore: PostgresStore = postgresStore(pool, options);
const client = new pg.Client();
const pgClientStore: StorageAdapter = new PostgresStore(client);
const sql: string = createTableSql("user_memory");

const nodeRedis = createClient({ url: "redis://localhost" });
const redis: RedisStore = redisStore(nodeRedis, { prefix: "memory:" });
const ioredis: StorageAdapter = redisStore(new Redis("redis://localhost"));

const file: SqliteStore = sqliteStore("./memory.db", { busyTimeoutMs: 2000 });
const own: StorageAdapter = new SqliteStore(new DatabaseSync(":memory:"), { table: "memory" });
await file.close();

export async function perRequest(userId: string): Promise<string> {
  const memory = await UserMemory.open({ agent: userId, storage: pgStore, llm: async () => "{}" });
  try {
    return await memory.inject([{ role: "user", content: "hi" }]);
  } finally {
    await memory.close();
  }
}

// @ts-expect-error a connection string is not a pool
postgresStore("postgres://localhost/app");
// @ts-expect-error the prefix is a string
redisStore(nodeRedis, { prefix: 1 });
// @ts-expect-error busyTimeoutMs is a number
sqliteStore("x.db", { busyTimeoutMs: "5s" });

export { pgClientStore, sql, redis, ioredis, own };
