import type { UserMemory } from "./index.js";

/** Options of {@link memoryPool}. */
export interface MemoryPoolOptions {
  /** Opens the memory of one key (a user id), e.g. `(userId) => UserMemory.open({ agent: userId, storage, llm })`. */
  open: (key: string) => Promise<UserMemory> | UserMemory;
  /** Instances kept open; beyond it the least recently used idle one is closed. Default 100. */
  max?: number;
}

/** One use of a pooled memory: call `release()` when done (it is not closed before). */
export interface MemoryLease {
  memory: UserMemory;
  release(): void;
}

/**
 * A bounded cache of open `UserMemory` instances, one per key (user): at most `max` stay
 * open; the least recently used idle one is closed and freed to make room (its queued
 * conversations stay in storage and are resumed by the next open of that key, which waits
 * for the close). Keep no reference to an instance past `release()`: once evicted, it is gone.
 */
export declare class MemoryPool {
  constructor(options: MemoryPoolOptions);
  /** Instances open or opening. */
  readonly size: number;
  /** The memory of `key`, opened if needed, held until `release()`. A failed open is not kept. */
  acquire(key: string): Promise<MemoryLease>;
  /** Runs `fn` with the memory of `key`, held while it runs; returns what it returns. */
  use<T>(key: string, fn: (memory: UserMemory) => T | Promise<T>): Promise<T>;
  /** Closes every instance (queued conversations stay in storage); later `acquire()` rejects with `CLOSED`. */
  close(): Promise<void>;
}

/** A {@link MemoryPool}: `memoryPool({ max: 500, open: (userId) => UserMemory.open({ agent: userId, storage, llm }) })`. */
export declare function memoryPool(options: MemoryPoolOptions): MemoryPool;
