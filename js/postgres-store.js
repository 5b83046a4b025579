// `user-memory/postgres`: a storage adapter over a Postgres table, with node-postgres (`pg`).
//
//   import pg from "pg";
//   import { UserMemory } from "user-memory";
//   import { postgresStore } from "user-memory/postgres";
//   const store = postgresStore(new pg.Pool({ connectionString: process.env.DATABASE_URL }));
//   const memory = await UserMemory.open({ agent: userId, storage: store, llm });
//
// One table (default `user_memory`): `key text COLLATE "C" PRIMARY KEY, value text NOT NULL`.
// The store creates it on first use unless `createTable: false` (then create it yourself with
// createTableSql()). Every operation is one statement, so each is atomic on its own and no
// transaction is held across a round trip:
//
//   compareAndSet(key, null, v)  INSERT … ON CONFLICT (key) DO NOTHING      — wins if absent
//   compareAndSet(key, old, v)   UPDATE … SET value = v WHERE key AND value = old
//
// Under READ COMMITTED an UPDATE that waits for a concurrent writer of the same row re-checks
// its WHERE clause against the row that writer left, and a concurrent INSERT of the same key
// waits for the first one's outcome: of several writers expecting the same value, exactly one
// succeeds. `keys(prefix)` is a range scan of the primary key ("C" order = code point order).
//
// Errors: an unreachable or restarting server, a refused login, a missing database or table
// reject with code STORAGE_UNAVAILABLE, a full disk with STORAGE_QUOTA, anything else with
// STORAGE_FAILED; the driver's error is the `cause`, and no message carries the password.
import { DEFAULT_TABLE, quoteTable } from "./sql-store.js";
import { errorCode, invalidInput, userMemoryError } from "./errors.js";
import {
  keepErrorsFromEndingProcess,
  messageOf,
  NETWORK_CODES,
  prefixEnd,
  redact,
  retryingOnce,
  urlPassword,
} from "./store-util.js";

/** node-postgres's own messages for a lost or closed connection (they carry no code). */
const LOST =
  /Connection terminated|not queryable|timeout exceeded when trying to connect|Cannot use a pool after calling end|Client was closed|connection is closed/i;

/** What the loser of two concurrent `CREATE TABLE IF NOT EXISTS` of one table may see. */
const CREATE_RACE_CODES = new Set(["42P07", "42710", "23505"]);

/**
 * The statement that creates the store's table (what `createTable: true` runs once).
 * @param {string} [table]
 */
export function createTableSql(table = DEFAULT_TABLE) {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(table, "createTableSql()")} (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)`;
}

/**
 * Creates a store over `pool` (a `pg.Pool`, or a connected `pg.Client`). See {@link PostgresStore}.
 * @param {import("./postgres-store.js").PgQueryable} pool
 * @param {import("./postgres-store.js").PostgresStoreOptions} [options]
 */
export function postgresStore(pool, options) {
  return new PostgresStore(pool, options);
}

/** A {@link StorageAdapter} over one Postgres table. Every method may be called concurrently. */
export class PostgresStore {
  #pool;
  #table;
  #tableName;
  #createTable;
  #ready = retryingOnce(() => this.#ensureTable());
  #secrets;
  #sql;

  /**
   * @param {import("./postgres-store.js").PgQueryable} pool
   * @param {import("./postgres-store.js").PostgresStoreOptions} [options]
   */
  constructor(pool, { table = DEFAULT_TABLE, createTable = true } = {}) {
    if (typeof pool?.query !== "function") {
      throw invalidInput("postgresStore(pool) needs a pg.Pool or a connected pg.Client (an object with query())");
    }
    this.#tableName = table;
    this.#table = quoteTable(table, "postgresStore()");
    this.#createTable = createTable !== false;
    this.#pool = pool;
    this.#secrets = secretsOf(pool);
    // node-postgres emits "error" on the pool when an idle connection dies (the server
    // restarted); the pool replaces the connection by itself.
    keepErrorsFromEndingProcess(pool);
    const t = this.#table;
    this.#sql = {
      get: `SELECT value FROM ${t} WHERE key = $1`,
      set: `INSERT INTO ${t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      delete: `DELETE FROM ${t} WHERE key = $1`,
      keysFrom: `SELECT key FROM ${t} WHERE key >= $1`,
      keysRange: `SELECT key FROM ${t} WHERE key >= $1 AND key < $2`,
      insert: `INSERT INTO ${t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
      update: `UPDATE ${t} SET value = $3 WHERE key = $1 AND value = $2`,
    };
  }

  /** Shown in error messages. */
  get name() {
    return `postgres table "${this.#tableName}"`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    const r = await this.#query(this.#sql.get, [key]);
    return r.rows.length > 0 ? /** @type {{ value: string }} */ (r.rows[0]).value : null;
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#query(this.#sql.set, [key, value]);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#query(this.#sql.delete, [key]);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    const end = prefixEnd(prefix);
    const r =
      end === null
        ? await this.#query(this.#sql.keysFrom, [prefix])
        : await this.#query(this.#sql.keysRange, [prefix, end]);
    return r.rows.map((row) => /** @type {{ key: string }} */ (row).key);
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one statement.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    const r =
      expected === null
        ? await this.#query(this.#sql.insert, [key, value])
        : await this.#query(this.#sql.update, [key, expected, value]);
    return r.rowCount === 1;
  }

  /** @param {string} text @param {string[]} values */
  async #query(text, values) {
    if (this.#createTable) await this.#ready(); // a failure is tried again on the next call
    try {
      return await this.#pool.query(text, values);
    } catch (e) {
      throw this.#error(e);
    }
  }

  /** Creates the table if it does not exist. A role without CREATE rights on the schema is
   * fine when the table is there already (CREATE … IF NOT EXISTS would be refused). */
  async #ensureTable() {
    try {
      const r = await this.#pool.query("SELECT to_regclass($1) IS NOT NULL AS present", [this.#table]);
      if (/** @type {{ present?: boolean } | undefined} */ (r.rows[0])?.present) return;
      await this.#pool.query(createTableSql(this.#tableName));
    } catch (e) {
      // Two processes creating the table at the same moment: the loser sees a duplicate,
      // of the table (42P07), of its row type (42710) or of a catalog row (23505).
      if (CREATE_RACE_CODES.has(String(errorCode(e)))) return;
      throw this.#error(e);
    }
  }

  /** @param {unknown} e */
  #error(e) {
    const c = errorCode(e);
    const code = typeof c === "string" ? c : "";
    // an AggregateError (every address of the host refused) has no message of its own
    const errors = /** @type {{ errors?: unknown[] } | null | undefined} */ (e)?.errors ?? [];
    const detail = redact(messageOf(e) || code || errors.map(messageOf).join("; "), this.#secrets);
    if (code === "53100" || code === "54000")
      return userMemoryError("STORAGE_QUOTA", `Postgres is out of space (${detail})`, e);
    if (code === "42P01" || code === "3F000") {
      return userMemoryError(
        "STORAGE_UNAVAILABLE",
        `${detail}: create it (createTableSql() in user-memory/postgres gives the statement) or leave createTable on`,
        e,
      );
    }
    if (/^(08|28|57P|3D)/.test(code) || code === "53300" || NETWORK_CODES.has(code) || LOST.test(detail)) {
      return userMemoryError("STORAGE_UNAVAILABLE", `Postgres is unreachable or refused the connection (${detail})`, e);
    }
    return userMemoryError("STORAGE_FAILED", `Postgres failed (${detail})`, e);
  }
}

/**
 * The passwords a pool or client was configured with, to keep them out of messages.
 * @param {unknown} pool
 */
function secretsOf(pool) {
  const out = [];
  const p = /** @type {{ options?: unknown, connectionParameters?: unknown }} */ (pool);
  for (const o of /** @type {Array<{ password?: unknown, connectionString?: unknown } | undefined>} */ ([
    p.options,
    p.connectionParameters,
    p,
  ])) {
    if (typeof o?.password === "string") out.push(o.password);
    if (typeof o?.connectionString === "string") out.push(urlPassword(o.connectionString));
  }
  return out.filter((s) => s && s.length >= 3);
}
