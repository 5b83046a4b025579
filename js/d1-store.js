// A storage adapter over a Cloudflare D1 database (exported by `user-memory/workers`).
//
//   import { UserMemory } from "user-memory";
//   import { d1Store } from "user-memory/workers";
//   // in a Worker's fetch(request, env):
//   const memory = await UserMemory.open({ agent: userId, storage: d1Store(env.DB), autoProcess: false, llm });
//
// One table (default `user_memory`): `key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL`,
// created on first use unless `createTable: false` (once per database binding and isolate).
// D1 is SQLite with one writer: each statement is atomic, so compareAndSet is one statement,
// `INSERT … ON CONFLICT (key) DO NOTHING` when absence is expected, else
// `UPDATE … WHERE key = ? AND value = ?`; it succeeded when it changed one row. D1 stores
// strings of up to 2 MB (a value above that rejects with STORAGE_QUOTA).
import { DEFAULT_TABLE, quoteTable, sqliteStatements } from "./sql-store.js";
import { invalidInput, userMemoryError } from "./errors.js";
import { messageOf, prefixEnd, retryingOnce } from "./store-util.js";

const QUOTA = /SQLITE_FULL|SQLITE_TOOBIG|too big|maximum (DB|database) size|exceeded .*(size|storage)/i;
const UNAVAILABLE =
  /Network connection lost|overloaded|object to be reset|Cannot resolve D1|internal error|no such table|D1 DB is unavailable|SQLITE_BUSY|SQLITE_CANTOPEN/i;

/**
 * The creation of each table, per database binding (a Worker opens a store per request).
 * @type {WeakMap<object, Map<string, () => Promise<unknown>>>}
 */
const created = new WeakMap();

/**
 * Creates a store over a D1 database binding (`env.DB`). See {@link D1Store}.
 * @param {import("./d1-store.js").D1DatabaseLike} db
 * @param {import("./d1-store.js").D1StoreOptions} [options]
 */
export function d1Store(db, options) {
  return new D1Store(db, options);
}

/** A {@link StorageAdapter} over one D1 table. */
export class D1Store {
  #db;
  #tableName;
  #sql;
  #createTable;

  constructor(db, { table = DEFAULT_TABLE, createTable = true } = {}) {
    if (typeof db?.prepare !== "function" || typeof db.batch !== "function") {
      throw invalidInput("d1Store(db) needs a D1 database binding (env.DB)");
    }
    this.#db = db;
    this.#tableName = table;
    this.#sql = sqliteStatements(quoteTable(table, "d1Store()"));
    this.#createTable = createTable !== false;
  }

  /** Shown in error messages. */
  get name() {
    return `D1 table "${this.#tableName}"`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    const row = await this.#call("get", [key], (s) => s.first());
    return row ? row.value : null;
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#call("set", [key, value], (s) => s.run());
  }

  /** @param {string} key */
  async delete(key) {
    await this.#call("delete", [key], (s) => s.run());
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    const end = prefixEnd(prefix);
    const r =
      end === null
        ? await this.#call("keysFrom", [prefix], (s) => s.all())
        : await this.#call("keysRange", [prefix, end], (s) => s.all());
    return r.results.map((row) => row.key);
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one statement.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    const r =
      expected === null
        ? await this.#call("insert", [key, value], (s) => s.run())
        : await this.#call("update", [value, key, expected], (s) => s.run());
    return r.meta.changes === 1;
  }

  async #call(statement, params, run) {
    try {
      if (this.#createTable) await this.#ensureTable();
      return await run(this.#db.prepare(this.#sql[statement]).bind(...params));
    } catch (e) {
      throw e?.code && String(e.code).startsWith("STORAGE_") ? e : this.#error(e);
    }
  }

  async #ensureTable() {
    let tables = created.get(this.#db);
    if (!tables) created.set(this.#db, (tables = new Map()));
    let create = tables.get(this.#tableName);
    if (!create) {
      const db = this.#db;
      const schema = this.#sql.schema;
      create = retryingOnce(() => db.prepare(schema).run());
      tables.set(this.#tableName, create);
    }
    await create();
  }

  #error(e) {
    const detail = messageOf(e);
    if (QUOTA.test(detail))
      return userMemoryError("STORAGE_QUOTA", `D1 is full or the value is too big (${detail})`, e);
    if (UNAVAILABLE.test(detail)) return userMemoryError("STORAGE_UNAVAILABLE", `D1 cannot be used now (${detail})`, e);
    return userMemoryError("STORAGE_FAILED", `D1 failed (${detail})`, e);
  }
}
