import type { Fact, MemoryDocument, QueueStatus, UserMemory, UserMemoryError } from "./index.js";

/** What `useUserMemory` takes: an instance, the promise `UserMemory.open()` returned (keep it stable: module scope, `useMemo` or state), or nothing yet. */
export type MemoryLike = UserMemory | PromiseLike<UserMemory> | null | undefined;

/** The live state of one memory. */
export interface UserMemoryState {
  /** The memory document, re-read after every `update` (here or in another tab); `null` until first read. */
  document: MemoryDocument | null;
  /** `document.facts`, or `[]` before the first read. */
  facts: readonly Fact[];
  /** The queue (`memory.status()`), re-read on `update`, `queued`, `processed` and `error`; `null` until the instance is there. */
  status: QueueStatus | null;
  /** The last failure (an `error` event's error, a failed read, or the rejection of the `open()` promise); cleared by the next `processed` event. */
  error: UserMemoryError | null;
}

/**
 * The live document, facts, queue status and last error of a memory, re-rendering the
 * component on `update`, `queued`, `processed` and `error`. Unsubscribes on unmount or when
 * `memory` changes.
 *
 * ```tsx
 * const { facts, status, error } = useUserMemory(memory);
 * ```
 */
export declare function useUserMemory(memory: MemoryLike): UserMemoryState;
