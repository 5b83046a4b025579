import type { StorageAdapter } from "./index.js";

/** A bound D1 statement (the part this store uses). */
export interface D1PreparedStatementLike {
  bind(...values: unknown[]): D1PreparedStatementLike;
  first<T = Record<string, unknown>>(): Promise<T | null>;
  all<T = Record<string, unknown>>(): Promise<{ results: T[] }>;
  run(): Promise<{ meta: { changes: number } }>;
}

/** A D1 database binding (`env.DB`; `D1Database` in `@cloudflare/workers-types`). */
export interface D1DatabaseLike {
  prepare(query: string): D1PreparedStatementLike;
  batch(statements: D1PreparedStatementLike[]): Promise<unknown[]>;
}

/** Options of {@link d1Store}. */
export interface D1StoreOptions {
  /** The table (letters, digits, underscores). Default `"user_memory"`. */
  table?: string;
  /** Create the table on first use if missing (default `true`; once per binding and isolate). */
  createTable?: boolean;
}

/**
 * A storage adapter over a Cloudflare D1 table (`key TEXT PRIMARY KEY NOT NULL, value TEXT NOT
 * NULL`). `compareAndSet` is one statement, atomic in D1's single writer. A value over 1.9 MB
 * (D1 stores 2 MB a row) is split into rows `<key>\u001fpart:<i>` written in one `batch()` (a
 * transaction) and checked (length, SHA-256) on read; over 16 rows it is `STORAGE_QUOTA`.
 *
 * ```ts
 * import { d1Store } from "user-memory/workers";
 * const memory = await UserMemory.open({ agent: userId, storage: d1Store(env.DB), autoProcess: false, llm });
 * ```
 */
export declare class D1Store implements StorageAdapter {
  constructor(db: D1DatabaseLike, options?: D1StoreOptions);
  /** Shown in error messages: `D1 table "user_memory"`. */
  readonly name: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
}

/** Creates a {@link D1Store} over a D1 binding. */
export declare function d1Store(db: D1DatabaseLike, options?: D1StoreOptions): D1Store;
