// Opens the store a command line names (the CLI and the MCP server): a file-store folder, or a
// store URL — `postgres://…` / `postgresql://…` (pg), `redis://…` / `rediss://…` (redis, else
// ioredis), `sqlite:path` (the runtime's SQLite). The database clients are optional peer
// dependencies, loaded only when their URL is used; a missing one is a clear error saying what
// to install. Nothing returned or thrown carries the URL's password.
import { fileStore } from "./file-store.js";
import { errorCode, userMemoryError } from "./errors.js";
import { messageOf, redact } from "./store-util.js";

/**
 * @param {{ dir?: string, url?: string, table?: string, prefix?: string }} spec
 * @returns {Promise<{ storage: import("./index.js").StorageAdapter, label: string, close(): Promise<void> }>}
 */
export async function openStore({ dir, url, table, prefix }) {
  if (dir !== undefined && url !== undefined)
    throw userMemoryError("INVALID_INPUT", "give either a folder (--dir) or a store URL, not both");
  if (url === undefined) {
    if (dir === undefined || dir === "")
      throw userMemoryError(
        "INVALID_INPUT",
        "no store: pass --dir <folder> or a store URL (postgres://…, redis://…, sqlite:<file>)",
      );
    return { storage: fileStore(dir), label: `folder ${dir}`, close: async () => {} };
  }
  const label = redact(url);
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === "postgres" || scheme === "postgresql") {
    const pg = await peer("pg", url);
    const { postgresStore } = await import("./postgres-store.js");
    const pool = new (pg.default ?? pg).Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000 });
    pool.on("error", () => {}); // an idle connection lost; the next query reconnects
    return {
      storage: postgresStore(pool, table === undefined ? {} : { table }),
      label,
      close: () => pool.end().catch(() => {}),
    };
  }
  if (scheme === "redis" || scheme === "rediss") {
    const { redisStore } = await import("./redis-store.js");
    const client = await connectRedis(url, label);
    return {
      storage: redisStore(client, prefix === undefined ? {} : { prefix }),
      label,
      close: () =>
        Promise.resolve(client.quit()).then(
          () => {},
          () => {},
        ),
    };
  }
  if (scheme === "sqlite") {
    const path = url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw userMemoryError("INVALID_INPUT", "sqlite: needs a file path (sqlite:./memory.db)");
    const { sqliteStore } = await import("./sqlite-store.js");
    const store = sqliteStore(path, table === undefined ? {} : { table });
    return { storage: store, label: `sqlite ${path}`, close: () => store.close() };
  }
  throw userMemoryError(
    "INVALID_INPUT",
    `unknown store URL ${JSON.stringify(label)}: use postgres://…, redis://…, sqlite:<file>, or --dir <folder>`,
  );
}

/**
 * Imports an optional peer dependency, or says how to install it.
 * @param {string} name @param {string} url the store URL (for the message, its password masked)
 * @returns {Promise<any>} the module (its types are the peer's, which need not be installed)
 */
async function peer(name, url) {
  try {
    return await import(name);
  } catch (e) {
    if (errorCode(e) === "ERR_MODULE_NOT_FOUND" || errorCode(e) === "MODULE_NOT_FOUND") {
      throw userMemoryError(
        "STORAGE_UNAVAILABLE",
        `${redact(url).split(":")[0]}: URLs need the \`${name}\` package: npm install ${name}`,
        e,
      );
    }
    throw e;
  }
}

/** A connected node-redis client (or ioredis when only that is installed). It gives up after a
 * few tries while connecting for the first time (a wrong URL fails fast), and reconnects for as
 * long as it takes after that (a long-running MCP server outlives a Redis restart).
 * @param {string} url @param {string} label the URL with its password masked
 */
async function connectRedis(url, label) {
  let redis;
  try {
    // The client alone loads in about half the time of `redis`, which also loads its modules
    // (JSON, search, …); it is there wherever `redis` is installed with hoisting.
    redis = await import("@redis/client").catch(() => peer("redis", url));
  } catch (e) {
    const ioredis = await peer("ioredis", url).catch(() => null);
    if (!ioredis)
      throw userMemoryError(
        "STORAGE_UNAVAILABLE",
        "redis:// URLs need the `redis` package (or `ioredis`): npm install redis",
        e,
      );
    const Redis = ioredis.default ?? ioredis.Redis;
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 10_000 });
    client.on("error", () => {});
    try {
      await client.connect();
    } catch (err) {
      client.disconnect();
      throw userMemoryError("STORAGE_UNAVAILABLE", `Redis at ${label} is unreachable (${redact(messageOf(err))})`, err);
    }
    return client;
  }
  let connected = false;
  let lastError;
  const client = redis.createClient({
    url,
    socket: {
      connectTimeout: 10_000,
      /** @param {number} retries @param {Error} cause */
      reconnectStrategy: (retries, cause) => (connected || retries < 3 ? Math.min(100 * 2 ** retries, 2000) : cause),
    },
  });
  client.on("error", (/** @type {unknown} */ e) => (lastError = e));
  client.on("ready", () => (connected = true));
  try {
    await client.connect();
  } catch (e) {
    throw userMemoryError(
      "STORAGE_UNAVAILABLE",
      `Redis at ${label} is unreachable (${redact(messageOf(lastError ?? e))})`,
      e,
    );
  }
  return client;
}
