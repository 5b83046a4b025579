import type { StorageAdapter } from "./index.js";

/** What the store needs of a `pg.Pool` or a connected `pg.Client` (node-postgres). */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions {
  /** The table (`name` or `schema.name`: letters, digits, underscores). Default `"user_memory"`. */
  table?: string;
  /**
   * Create the table on first use if it does not exist (default `true`). With `false`, create
   * it yourself (`createTableSql()`); a missing table then rejects with `STORAGE_UNAVAILABLE`.
   */
  createTable?: boolean;
}

/**
 * A storage adapter over one Postgres table (`key text COLLATE "C" PRIMARY KEY, value text
 * NOT NULL`) through node-postgres. Every operation is one statement; `compareAndSet` is an
 * `INSERT … ON CONFLICT DO NOTHING` (expected `null`) or an `UPDATE … WHERE key = $1 AND
 * value = $2`, so of several processes expecting the same value exactly one wins.
 *
 * Errors: an unreachable server, a refused login, a missing database or table →
 * `STORAGE_UNAVAILABLE`; a full disk → `STORAGE_QUOTA`; else `STORAGE_FAILED`. The driver's
 * error is the `cause`; messages never contain the password.
 *
 * ```ts
 * import pg from "pg";
 * import { postgresStore } from "user-memory/postgres";
 * const storage = postgresStore(new pg.Pool({ connectionString: process.env.DATABASE_URL }));
 * const memory = await UserMemory.open({ agent: userId, storage, llm });
 * ```
 */
export declare class PostgresStore implements StorageAdapter {
  constructor(pool: PgQueryable, options?: PostgresStoreOptions);
  /** Shown in error messages: `postgres table "user_memory"`. */
  readonly name: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
}

/** Creates a {@link PostgresStore} over a `pg.Pool` (or a connected `pg.Client`). */
export declare function postgresStore(pool: PgQueryable, options?: PostgresStoreOptions): PostgresStore;

/** The `CREATE TABLE IF NOT EXISTS` statement of the store's table (default `"user_memory"`). */
export declare function createTableSql(table?: string): string;
