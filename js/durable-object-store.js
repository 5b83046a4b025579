// `user-memory/workers`: a storage adapter over a Cloudflare Durable Object's storage.
//
//   import { UserMemory } from "user-memory";
//   import { durableObjectStore } from "user-memory/workers";
//   // inside a Durable Object class:
//   const memory = await UserMemory.open({ storage: durableObjectStore(this.ctx.storage), autoProcess: false, llm });
//
// Why compareAndSet is safe here: a Durable Object is a single instance worldwide, and all of
// its storage calls go through it. compareAndSet runs its read, comparison and write inside
// `storage.transaction()`, which is atomic against every other request and alarm of the
// object (and the object's input/output gates already keep other events out while a
// storage call is pending). So two requests committing at once cannot both win.
//
// Values are strings. SQLite-backed Durable Objects (`new_sqlite_classes`, the default for
// new classes) accept values up to 2 MB; the older key-value backend only 128 KiB, which
// a queue of very long conversations can exceed.
import { invalidInput } from "./errors.js";

/**
 * Creates a store over `storage` (a Durable Object's `ctx.storage`). See
 * {@link DurableObjectStore}.
 * @param {DurableObjectStorageLike} storage
 */
export function durableObjectStore(storage) {
  return new DurableObjectStore(storage);
}

/** A {@link StorageAdapter} over Durable Object storage. */
export class DurableObjectStore {
  /** @type {DurableObjectStorageLike} */ #storage;

  /** @param {DurableObjectStorageLike} storage the object's `ctx.storage` (or `state.storage`) */
  constructor(storage) {
    for (const m of ["get", "put", "delete", "list", "transaction"]) {
      if (typeof storage?.[m] !== "function") {
        throw invalidInput(`durableObjectStore(storage) needs a Durable Object's ctx.storage; \`${m}\` is missing`);
      }
    }
    this.#storage = storage;
  }

  /** Shown in error messages. */
  get name() {
    return "Durable Object storage";
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    return (await this.#storage.get(key)) ?? null;
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#storage.put(key, value);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#storage.delete(key);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    return [...(await this.#storage.list({ prefix })).keys()];
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one transaction.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  compareAndSet(key, expected, value) {
    return this.#storage.transaction(async (txn) => {
      if (((await txn.get(key)) ?? null) !== expected) return false;
      await txn.put(key, value);
      return true;
    });
  }
}

// The D1 adapter is exported here too: `user-memory/workers` holds the Cloudflare stores.
export { D1Store, d1Store } from "./d1-store.js";
