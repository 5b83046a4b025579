import type { StorageAdapter } from "./index.js";

/** The part of a Durable Object transaction this adapter uses. */
export interface DurableObjectTransactionLike {
  get(key: string): Promise<unknown>;
  get(keys: string[]): Promise<Map<string, unknown>>;
  put(key: string, value: string): Promise<void>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(key: string): Promise<boolean>;
  delete(keys: string[]): Promise<number>;
}

/**
 * The part of a Durable Object's storage (`ctx.storage`, type `DurableObjectStorage` in
 * `@cloudflare/workers-types`) this adapter uses.
 */
export interface DurableObjectStorageLike {
  get(key: string): Promise<unknown>;
  get(keys: string[]): Promise<Map<string, unknown>>;
  put(key: string, value: string): Promise<void>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(key: string): Promise<boolean>;
  delete(keys: string[]): Promise<number>;
  list(options: { prefix: string }): Promise<Map<string, unknown>>;
  transaction<T>(closure: (txn: DurableObjectTransactionLike) => Promise<T>): Promise<T>;
}

/**
 * A storage adapter over a Cloudflare Durable Object's storage. `compareAndSet` runs in
 * `storage.transaction()`: a Durable Object is one instance worldwide, so commits from
 * concurrent requests and alarms of the object never overwrite each other.
 *
 * A value over 130 000 bytes is split into parts under `<key>\u0000part:<i>`, written with the
 * small header kept at `key` in one atomic `put`, and joined and checked on read: so values
 * stay within the 128 KiB per-value limit of key-value-backed objects (and the 2 MB of
 * SQLite-backed ones). A value over 127 parts (about 16 MB) is `STORAGE_QUOTA`, nothing
 * written; a missing or altered part is `CORRUPT_MEMORY`.
 *
 * ```ts
 * import { UserMemory } from "user-memory";
 * import { durableObjectStore } from "user-memory/workers";
 * const memory = await UserMemory.open({ storage: durableObjectStore(this.ctx.storage), autoProcess: false, llm });
 * ```
 */
export declare class DurableObjectStore implements StorageAdapter {
  constructor(storage: DurableObjectStorageLike);
  /** `"Durable Object storage"`, shown in error messages. */
  readonly name: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
}

/** Creates a {@link DurableObjectStore} over a Durable Object's `ctx.storage`. */
export declare function durableObjectStore(storage: DurableObjectStorageLike): DurableObjectStore;

export {
  D1Store,
  d1Store,
  type D1DatabaseLike,
  type D1PreparedStatementLike,
  type D1StoreOptions,
} from "./d1-store.js";
