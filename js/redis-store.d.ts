import type { StorageAdapter } from "./index.js";

/** A connected node-redis client (`createClient()` of `redis` v4 or later). */
export interface NodeRedisClientLike {
  readonly isReady: boolean;
  sendCommand(args: string[]): Promise<unknown>;
}

/** An ioredis client (`new Redis()`). */
export interface IoRedisClientLike {
  readonly status: string;
  call(command: string, ...args: string[]): Promise<unknown>;
}

/** A client of either library. */
export type RedisClientLike = NodeRedisClientLike | IoRedisClientLike;

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * Put before every key (default `""`), e.g. `"memory:"`. For Redis Cluster use a hash tag
   * (`"{memory}:"`) so a key and the store's index share a slot.
   */
  prefix?: string;
  /**
   * How long the first call waits for a client still on its first connect (`new Redis(url)`,
   * or a node-redis `connect()` not awaited) to become ready, in ms (default 5000). Once the
   * client has been ready, calls never wait: while it is disconnected they reject at once.
   */
  connectTimeoutMs?: number;
}

/**
 * A storage adapter over Redis: each key is a string `<prefix><key>`, and a sorted set
 * `<prefix>` + byte 0xFF + `keys` indexes them, so `keys(prefix)` is one range lookup (no SCAN
 * of the database). Writes and `compareAndSet` are Lua scripts, atomic in Redis.
 *
 * A client still on its first connect is waited for (up to `connectTimeoutMs`). Once it has
 * been ready, while it is disconnected every call rejects at once with `STORAGE_UNAVAILABLE`
 * (nothing waits in the client's offline queue to happen later). Out of memory →
 * `STORAGE_QUOTA`; else `STORAGE_FAILED`. Messages never contain the password.
 *
 * ```ts
 * import { createClient } from "redis";
 * import { redisStore } from "user-memory/redis";
 * const client = await createClient({ url: process.env.REDIS_URL }).connect();
 * const memory = await UserMemory.open({ agent: userId, storage: redisStore(client, { prefix: "memory:" }), llm });
 * ```
 */
export declare class RedisStore implements StorageAdapter {
  constructor(client: RedisClientLike, options?: RedisStoreOptions);
  /** Shown in error messages: `redis prefix "memory:"`. */
  readonly name: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
}

/** Creates a {@link RedisStore} over a connected node-redis or ioredis client. */
export declare function redisStore(client: RedisClientLike, options?: RedisStoreOptions): RedisStore;
