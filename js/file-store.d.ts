import type { RollbackMark, StorageAdapter } from "./index.js";

/** Options of {@link fileStore}. */
export interface FileStoreOptions {
  /**
   * A lock held longer than this (ms) is considered abandoned and broken. A lock whose
   * holder is a dead process on this host is broken at once. Default 10 000.
   */
  staleLockMs?: number;
  /**
   * The folder, outside the store folder, where encrypted memory keeps its rollback marks
   * (one small file per memory: the highest revision this device saw, sealed under the data
   * key), so that a process started after the whole store was put back from an older backup
   * reports `ROLLBACK`. Default {@link defaultMarkDir}; `false`: none.
   */
  markDir?: string | false;
}

/** The default `markDir`: `user-memory/marks` in the user's cache folder (`$XDG_CACHE_HOME`, `~/.cache`, `~/Library/Caches`, `%LOCALAPPDATA%`); `null` without a home folder. */
export declare function defaultMarkDir(): string | null;

/**
 * A storage adapter that keeps memory in files of one directory (Node.js).
 *
 * - Each key is one file; keys are percent-encoded into portable file names.
 * - Writes go to a temp file, are fsynced, renamed over the target, and the directory is
 *   fsynced: after a crash a file holds the old or the new value, never a torn one.
 * - `compareAndSet` holds a lock file (`.lock`, created exclusively) so that several
 *   processes can share one directory without losing updates.
 * - The directory is created if missing when its parent exists. A missing parent, a file
 *   in its place or a read-only directory rejects with code `STORAGE_UNAVAILABLE`, naming
 *   the path.
 *
 * ```ts
 * import { UserMemory } from "user-memory";
 * import { fileStore } from "user-memory/node";
 * const memory = await UserMemory.open({ storage: fileStore("./memory"), llm });
 * ```
 */
export declare class FileStore implements StorageAdapter {
  constructor(dir: string, options?: FileStoreOptions);
  /** The absolute directory path. */
  readonly dir: string;
  /** Shown in error messages: `fileStore("/abs/dir")`. */
  readonly name: string;
  /** The rollback mark files of `markDir` (undefined with `markDir: false`). */
  readonly rollbackMark?: RollbackMark;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  compareAndSet(key: string, expected: string | null, value: string): Promise<boolean>;
}

/** Creates a {@link FileStore} over `dir`. */
export declare function fileStore(dir: string, options?: FileStoreOptions): FileStore;

/** The file name (inside the directory) that `key` is stored under. */
export declare function fileName(key: string): string;

export { memoryPool, MemoryPool, type MemoryLease, type MemoryPoolOptions } from "./pool.js";
