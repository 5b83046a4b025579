// A bounded cache of open UserMemory instances, for a server that keeps one memory per
// user (`agent: userId`): the least recently used idle instance is closed once more than
// `max` are open. Closing keeps its queued conversations in storage; the next open resumes
// them. An evicted instance is also freed (`free()`), so its share of the wasm heap is
// reused at once instead of when the garbage collector gets to the JS object. Store-agnostic:
// `open(key)` decides the storage and the llm.
//
//   const pool = memoryPool({ max: 500, open: (userId) => UserMemory.open({ agent: userId, storage, llm }) });
//   app.post("/chat", (req, res) => pool.use(req.user.id, async (memory) => { … }));
import { invalidInput, userMemoryError } from "./errors.js";

/** @param {import("./pool.js").MemoryPoolOptions} options */
export function memoryPool(options) {
  return new MemoryPool(options);
}

/**
 * Closes an instance the pool let go of, then frees it (a failed close still frees).
 * @param {import("./index.js").UserMemory} memory
 */
async function shutDown(memory) {
  try {
    await memory.close();
  } catch {}
  memory.free?.();
}

export class MemoryPool {
  /** key → { opening: Promise<UserMemory>, users }, in order of last use (oldest first). */
  #entries = new Map();
  /** key → the close() of an evicted instance, which a reopen of the key waits for. */
  #closing = new Map();
  #open;
  #max;
  #closed = false;

  /** @param {import("./pool.js").MemoryPoolOptions} options */
  constructor({ open, max = 100 }) {
    if (typeof open !== "function")
      throw invalidInput("memoryPool({ open }) needs a function (key) => UserMemory.open({ … })");
    if (!Number.isInteger(max) || max < 1)
      throw invalidInput(`memoryPool: \`max\` must be an integer ≥ 1, found ${JSON.stringify(max)}`);
    this.#open = open;
    this.#max = max;
  }

  /** Instances open or opening. */
  get size() {
    return this.#entries.size;
  }

  /**
   * The memory of `key`, opened if needed, with `release()` to call when done; until then it
   * is never closed to make room (hold it until a stream that observes has ended).
   * @param {string} key
   */
  async acquire(key) {
    if (this.#closed) throw userMemoryError("CLOSED", "the memory pool is closed");
    if (typeof key !== "string" || !key)
      throw invalidInput("memoryPool: the key must be a non-empty string (a user id)");
    let entry = this.#entries.get(key);
    if (entry) {
      this.#entries.delete(key); // re-inserted below: now the most recently used
    } else {
      const closing = this.#closing.get(key) ?? Promise.resolve();
      entry = { users: 0, opening: closing.then(() => this.#open(key)) };
      const failed = entry;
      // A failed open is not kept: the next acquire tries again.
      entry.opening.catch(() => this.#entries.get(key) === failed && this.#entries.delete(key));
    }
    this.#entries.set(key, entry);
    entry.users += 1;
    this.#trim();
    let memory;
    try {
      memory = await entry.opening;
    } catch (e) {
      entry.users -= 1;
      throw e;
    }
    let released = false;
    return {
      memory,
      release: () => {
        if (released) return;
        released = true;
        entry.users -= 1;
        this.#trim();
      },
    };
  }

  /**
   * Runs `fn(memory)` with the memory of `key` and returns what it returns; the instance
   * stays open while `fn` runs.
   * @template T
   * @param {string} key
   * @param {(memory: import("./index.js").UserMemory) => T | Promise<T>} fn
   * @returns {Promise<T>}
   */
  async use(key, fn) {
    const { memory, release } = await this.acquire(key);
    try {
      return await fn(memory);
    } finally {
      release();
    }
  }

  /** Closes the least recently used idle instances while more than `max` are open. */
  #trim() {
    for (const [key, entry] of this.#entries) {
      if (this.#entries.size <= this.#max) return;
      if (entry.users > 0) continue;
      this.#entries.delete(key);
      const closing = entry.opening.then(shutDown, () => {});
      this.#closing.set(key, closing);
      closing.then(() => this.#closing.get(key) === closing && this.#closing.delete(key));
    }
  }

  /** Closes every instance (queued conversations stay in storage); later acquire() rejects with CLOSED. */
  async close() {
    this.#closed = true;
    const all = [...this.#entries.values()].map((e) => e.opening.then(shutDown, () => {}));
    this.#entries.clear();
    await Promise.all([...all, ...this.#closing.values()]);
  }
}
