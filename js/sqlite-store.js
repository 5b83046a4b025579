// `user-memory/sqlite`: a storage adapter over an SQLite file, with the SQLite built into the
// runtime: `node:sqlite` (Node >= 22.5; 22.5–22.12 need --experimental-sqlite) or `bun:sqlite`
// (Bun). No native module to build.
//
//   import { UserMemory } from "user-memory";
//   import { sqliteStore } from "user-memory/sqlite";
//   const store = sqliteStore("./memory.db");
//   const memory = await UserMemory.open({ agent: userId, storage: store, llm });
//
// One table (default `user_memory`): `key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL`,
// created when the store first opens the file. The database is put in WAL mode (readers do
// not wait for a writer) with a busy timeout (a writer waits up to `busyTimeoutMs` for another
// process's write instead of failing), so several processes on one host can share one file.
// Every operation is one autocommit statement, atomic between processes:
//
//   compareAndSet(key, null, v)  INSERT … ON CONFLICT (key) DO NOTHING
//   compareAndSet(key, old, v)   UPDATE … SET value = v WHERE key = ? AND value = old
//
// SQLite's calls are synchronous: each one blocks the thread for its duration (tens of
// microseconds for these statements; up to busyTimeoutMs while another process writes).
//
// Errors: a file that cannot be opened, is read-only or is not a database, or a lock held past
// the busy timeout reject with STORAGE_UNAVAILABLE; a full disk (or `max_page_count`) with
// STORAGE_QUOTA; anything else with STORAGE_FAILED; the driver's error is the `cause`.
import { DEFAULT_TABLE, quoteTable, sqliteStatements } from "./sql-store.js";
import { errorCode, invalidInput, userMemoryError } from "./errors.js";
import { messageOf, prefixEnd, retryingOnce } from "./store-util.js";

/** SQLite's primary result codes, as numbers and names. @type {Set<unknown>} */
const QUOTA = new Set([13, 18, "SQLITE_FULL", "SQLITE_TOOBIG"]);
/** @type {Set<unknown>} */
const UNAVAILABLE = new Set([
  3,
  5,
  6,
  8,
  14,
  23,
  26,
  "SQLITE_PERM",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
  "SQLITE_READONLY",
  "SQLITE_CANTOPEN",
  "SQLITE_AUTH",
  "SQLITE_NOTADB",
]);

/**
 * Creates a store over an SQLite file (a path) or a database the application opened. See
 * {@link SqliteStore}.
 * @param {string | import("./sqlite-store.js").SqliteDatabaseLike} database
 * @param {import("./sqlite-store.js").SqliteStoreOptions} [options]
 */
export function sqliteStore(database, options) {
  return new SqliteStore(database, options);
}

/** A {@link StorageAdapter} over one SQLite table. */
export class SqliteStore {
  #path;
  /** @type {import("./sqlite-store.js").SqliteDatabaseLike | null} */ #db = null;
  #owned;
  #table;
  #tableName;
  #busyTimeoutMs;
  #ready = retryingOnce(() => this.#open());

  /**
   * @param {string | import("./sqlite-store.js").SqliteDatabaseLike} database
   * @param {import("./sqlite-store.js").SqliteStoreOptions} [options]
   */
  constructor(database, { table = DEFAULT_TABLE, busyTimeoutMs = 5000 } = {}) {
    if (typeof database === "string") {
      if (database === "") throw invalidInput("sqliteStore(path) needs a file path (a non-empty string)");
      this.#path = database;
      this.#owned = true;
    } else if (typeof database?.prepare === "function" && typeof database.exec === "function") {
      this.#path = null;
      this.#db = database;
      this.#owned = false;
    } else {
      throw invalidInput(
        "sqliteStore(database) needs a file path or an open database (node:sqlite DatabaseSync, bun:sqlite Database)",
      );
    }
    if (!(Number.isInteger(busyTimeoutMs) && busyTimeoutMs >= 0)) {
      throw invalidInput("sqliteStore(database, { busyTimeoutMs }) needs a whole number of milliseconds ≥ 0");
    }
    this.#tableName = table;
    this.#table = quoteTable(table, "sqliteStore()");
    this.#busyTimeoutMs = busyTimeoutMs;
  }

  /** Shown in error messages. */
  get name() {
    return `sqlite ${this.#path === null ? "database" : JSON.stringify(this.#path)} table "${this.#tableName}"`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    const row = /** @type {{ value: string } | undefined | null} */ (await this.#run("get", "get", [key]));
    return row ? row.value : null;
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#run("set", "run", [key, value]);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#run("delete", "run", [key]);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    const end = prefixEnd(prefix);
    const rows =
      end === null ? await this.#run("keysFrom", "all", [prefix]) : await this.#run("keysRange", "all", [prefix, end]);
    return /** @type {Array<{ key: string }>} */ (rows).map((r) => r.key);
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one statement.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    const r =
      expected === null
        ? await this.#run("insert", "run", [key, value])
        : await this.#run("update", "run", [value, key, expected]);
    return Number(/** @type {{ changes: number | bigint }} */ (r).changes) === 1;
  }

  /** Closes the database if this store opened it (a database passed in is left open). */
  async close() {
    const ready = this.#ready.forget();
    if (ready) await ready.catch(() => {});
    if (this.#owned && this.#db) {
      this.#db.close();
      this.#db = null;
    }
  }

  /**
   * Runs one prepared statement (opening the database first if needed).
   * @param {Exclude<keyof ReturnType<typeof sqliteStatements>, "schema">} statement
   * @param {"get" | "all" | "run"} method
   * @param {string[]} params
   * @returns {Promise<unknown>}
   */
  async #run(statement, method, params) {
    const statements = await this.#ready(); // a failure is tried again on the next call
    try {
      return statements[statement][method](...params);
    } catch (e) {
      throw this.#error(e);
    }
  }

  /** Opens the file (if given a path), sets WAL and the busy timeout, creates the table and
   * prepares the statements. */
  async #open() {
    const db = (this.#db ??= await openDatabase(/** @type {string} */ (this.#path), this.name));
    try {
      // The busy timeout first: switching to WAL needs a moment of exclusive access.
      db.exec(`PRAGMA busy_timeout = ${this.#busyTimeoutMs}`);
      db.exec("PRAGMA journal_mode = WAL");
      const sql = sqliteStatements(this.#table);
      db.exec(sql.schema);
      /** @type {Record<string, import("./sqlite-store.js").SqliteStatementLike>} */
      const out = {};
      for (const [name, text] of Object.entries(sql)) if (name !== "schema") out[name] = db.prepare(text);
      return out;
    } catch (e) {
      throw this.#error(e);
    }
  }

  /** @param {unknown} e */
  #error(e) {
    // node:sqlite: `errcode` (the extended result code); bun:sqlite: `errno`; both and
    // better-sqlite3 may name it in `code` ("SQLITE_BUSY_SNAPSHOT" → "SQLITE_BUSY").
    const err = /** @type {{ errcode?: unknown, errno?: unknown } | null | undefined} */ (e);
    const number = [err?.errcode, err?.errno].find((n) => typeof n === "number");
    const code = errorCode(e);
    const codes = [
      number === undefined ? undefined : number & 0xff,
      typeof code === "string" ? code.match(/^SQLITE_[A-Z]+/)?.[0] : undefined,
    ];
    const detail = messageOf(e);
    if (codes.some((c) => QUOTA.has(c)))
      return userMemoryError("STORAGE_QUOTA", `the SQLite database is full (${detail})`, e);
    if (codes.some((c) => UNAVAILABLE.has(c)))
      return userMemoryError("STORAGE_UNAVAILABLE", `the SQLite database cannot be used (${detail})`, e);
    return userMemoryError("STORAGE_FAILED", `SQLite failed (${detail})`, e);
  }
}

/**
 * Opens `path` with the runtime's SQLite module.
 * @param {string} path @param {string} what the store, for messages
 * @returns {Promise<import("./sqlite-store.js").SqliteDatabaseLike>}
 */
async function openDatabase(path, what) {
  let db;
  try {
    if (typeof (/** @type {{ Bun?: unknown }} */ (globalThis).Bun) !== "undefined") {
      const { Database } = await import("bun:sqlite");
      db = new Database(path, { create: true });
    } else {
      const { DatabaseSync } = await import("node:sqlite");
      db = new DatabaseSync(path);
    }
  } catch (e) {
    if (errorCode(e) === "ERR_UNKNOWN_BUILTIN_MODULE" || /node:sqlite|No such built-in module/i.test(messageOf(e))) {
      const runtime = typeof process !== "undefined" ? `Node ${process.versions?.node}` : "this runtime";
      throw userMemoryError(
        "STORAGE_UNAVAILABLE",
        `${what}: ${runtime} has no built-in SQLite; user-memory/sqlite needs Node ≥ 22.5 (node:sqlite; 22.5–22.12 with --experimental-sqlite) or Bun (bun:sqlite). Use fileStore() from user-memory/node instead, or pass an open database.`,
        e,
      );
    }
    throw userMemoryError("STORAGE_UNAVAILABLE", `${what}: cannot open the database file (${messageOf(e)})`, e);
  }
  return db;
}
