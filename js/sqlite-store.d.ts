import type { StorageAdapter } from "./index.js";

/** A prepared statement of `node:sqlite` or `bun:sqlite`. */
export interface SqliteStatementLike {
  get(...params: string[]): unknown;
  all(...params: string[]): unknown[];
  run(...params: string[]): { changes: number | bigint };
}

/** An open database of `node:sqlite` (`DatabaseSync`) or `bun:sqlite` (`Database`). */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
  close(): unknown;
}

/** Options of {@link sqliteStore}. */
export interface SqliteStoreOptions {
  /** The table (letters, digits, underscores). Default `"user_memory"`. */
  table?: string;
  /** How long (ms) a write waits for another process's write before failing. Default 5000. */
  busyTimeoutMs?: number;
}

/**
 * A storage adapter over an SQLite file with the runtime's own SQLite (`node:sqlite` in Node
 * ≥ 22.5, `bun:sqlite` in Bun). WAL mode and a busy timeout: several processes on one host can
 * share the file. `compareAndSet` is one statement (`INSERT … ON CONFLICT DO NOTHING` or
 * `UPDATE … WHERE key = ? AND value = ?`).
 *
 * Errors: a file that cannot be opened or is not a database, a lock held past the busy timeout,
 * or a runtime without SQLite → `STORAGE_UNAVAILABLE`; a full disk → `STORAGE_QUOTA`; else
 * `STORAGE_FAILED`.
 *
 * ```ts
 * import { sqliteStore } from "user-memory/sqlite";
 * const storage = sqliteStore("./memory.db");
 * const memory = await UserMemory.open({ agent: userId, storage, llm });
 * ```
 */
export declare class SqliteStore implements StorageAdapter {
  constructor(database: string | SqliteDatabaseLike, options?: SqliteStoreOptions);
  /** Shown in error messages: `sqlite "./memory.db" table "user_memory"`. */
  readonly name: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
  /** Closes the database if the store opened it from a path (a database passed in stays open). */
  close(): Promise<void>;
}

/** Creates a {@link SqliteStore} over a file path or an open database. */
export declare function sqliteStore(database: string | SqliteDatabaseLike, options?: SqliteStoreOptions): SqliteStore;
