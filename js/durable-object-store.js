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
// Value size. Key-value-backed Durable Objects (the older backend) refuse a value whose V8
// serialization is over 128 KiB; SQLite-backed ones (`new_sqlite_classes`) a key and value
// over 2 MB together. Encrypted memory with its history passes 128 KiB at about 160 facts.
// So a value over SPLIT_BYTES is split: its parts go under `<key>\u0000part:<i>` and the key
// itself holds a small header object ({ parts, length, hash }), all written by ONE
// `storage.put({...})` of several keys, which Durable Objects apply atomically: a reader sees
// the old value or the new one, never a mix. A read joins the parts and checks the header's
// length and hash, so a missing or stale part is CORRUPT_MEMORY, never a wrong value. The
// split lives here, below encryption, so it works the same for plain and encrypted memory.
// The header is an object and values are strings, so an old unsplit value reads as before.
// Limits are in docs/storage.md#value-size-limits.
import { invalidInput, userMemoryError } from "./errors.js";

/** The V8-serialized size a part may reach: under the 128 KiB (131 072 bytes) limit. */
const SPLIT_BYTES = 130_000;
/** Keys per `put`/`get`/`delete` call, the Durable Object limit: the header + 127 parts. */
const MAX_KEYS = 128;
/** What separates a key from its parts' suffix; keys of this package never contain it. */
const PART = "\u0000part:";
/** Marks a header object. */
const HEADER = "user-memory/parts";

/** @typedef {import("./durable-object-store.js").DurableObjectStorageLike} DurableObjectStorageLike */
/** Storage or a transaction of it: what reads and writes need. */
/** @typedef {import("./durable-object-store.js").DurableObjectTransactionLike} Storage */
/** The stored header of a split value. */
/** @typedef {{ [HEADER]: 1, parts: number, length: number, hash: string }} Header */

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
    for (const m of /** @type {const} */ (["get", "put", "delete", "list", "transaction"])) {
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
  get(key) {
    return read(this.#storage, key);
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await write(this.#storage, key, value, await this.#storage.get(key));
  }

  /** @param {string} key */
  async delete(key) {
    const old = await this.#storage.get(key);
    // The key and its parts in one call (atomic for up to 128 keys).
    if (isHeader(old)) await this.#storage.delete([key, ...partKeys(key, 0, old.parts)]);
    else await this.#storage.delete(key);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    return [...(await this.#storage.list({ prefix })).keys()].filter((k) => !k.includes(PART));
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one transaction.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  compareAndSet(key, expected, value) {
    return this.#storage.transaction(async (txn) => {
      const old = await txn.get(key);
      if ((await read(txn, key, old)) !== expected) return false;
      await write(txn, key, value, old);
      return true;
    });
  }
}

/**
 * The parts of `value`, each within SPLIT_BYTES serialized (a lone string if it fits).
 * @param {string} value
 */
function split(value) {
  /** @type {string[]} */
  const parts = [];
  for (let at = 0; at < value.length;) {
    // A string with a character over U+00FF is serialized as UTF-16: 2 bytes a code unit.
    let end = Math.min(value.length, at + SPLIT_BYTES);
    if (/[^\u0000-\u00ff]/.test(value.slice(at, end))) end = Math.min(value.length, at + SPLIT_BYTES / 2);
    // Never between the two halves of a surrogate pair.
    if (end < value.length && isHigh(value.charCodeAt(end - 1)) && isLow(value.charCodeAt(end))) end -= 1;
    parts.push(value.slice(at, end));
    at = end;
  }
  return parts;
}

const isHigh = (/** @type {number} */ c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (/** @type {number} */ c) => c >= 0xdc00 && c <= 0xdfff;

/** A 32-bit FNV-1a hash of the code units, as 8 hex digits: tells a stale part apart. @param {string} text */
function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

const partKey = (/** @type {string} */ key, /** @type {number} */ i) => `${key}${PART}${i}`;

/**
 * Writes `value` under `key`, split into parts when it is big, in one `put`, and removes the
 * parts of `old` (what `key` held) that the new value does not overwrite. Both calls are made
 * without an await between them, so a Durable Object commits them together (its storage
 * coalesces writes made without an await in between into one atomic write; inside a
 * transaction they are atomic anyway): no stale part is ever left behind.
 * @param {Storage} storage @param {string} key @param {string} value @param {unknown} old
 */
function write(storage, key, value, old) {
  const parts = value.length <= SPLIT_BYTES / 2 ? [value] : split(value);
  if (parts.length > MAX_KEYS - 1) {
    throw userMemoryError(
      "STORAGE_QUOTA",
      `Durable Object storage: a value of ${value.length} characters for "${key}" needs ${parts.length} parts of at most ${SPLIT_BYTES} bytes; one atomic write holds ${MAX_KEYS - 1} (about ${Math.floor(((MAX_KEYS - 1) * SPLIT_BYTES) / 1e6)} MB of ASCII). Nothing was written`,
    );
  }
  /** @type {Promise<unknown>[]} */
  const writes = [];
  if (parts.length === 1) writes.push(storage.put(key, value));
  else {
    /** @type {Record<string, Header | string>} */
    const entries = { [key]: { [HEADER]: 1, parts: parts.length, length: value.length, hash: hash(value) } };
    parts.forEach((p, i) => (entries[partKey(key, i)] = p));
    writes.push(storage.put(entries));
  }
  const kept = parts.length === 1 ? 0 : parts.length;
  if (isHeader(old) && old.parts > kept) writes.push(storage.delete(partKeys(key, kept, old.parts)));
  return Promise.all(writes);
}

/**
 * The value of `key` (joined from its parts and checked when it was split), or null.
 * @param {Storage} storage @param {string} key @param {unknown} [stored] what `key` holds, if read already
 * @returns {Promise<string | null>}
 */
async function read(storage, key, stored) {
  const v = stored === undefined ? await storage.get(key) : stored;
  if (v === undefined || v === null) return null;
  if (typeof v === "string") return v;
  if (!isHeader(v)) throw corrupt(key, "holds a value that is neither a string nor a header of parts");
  const keys = Array.from({ length: v.parts }, (_, i) => partKey(key, i));
  const got = await storage.get(keys);
  let value = "";
  for (const k of keys) {
    const p = got.get(k);
    if (typeof p !== "string") throw corrupt(key, `is missing its part "${k.replace(PART, "/part:")}"`);
    value += p;
  }
  if (value.length !== v.length || hash(value) !== v.hash)
    throw corrupt(key, `has parts that do not match its header (${value.length} of ${v.length} characters)`);
  return value;
}

/** @param {unknown} value @returns {value is Header} */
function isHeader(value) {
  const v = /** @type {Record<string, unknown>} */ (value);
  return (
    typeof v === "object" &&
    v !== null &&
    v[HEADER] === 1 &&
    typeof v.parts === "number" &&
    Number.isInteger(v.parts) &&
    v.parts > 0 &&
    v.parts < MAX_KEYS &&
    Number.isInteger(v.length) &&
    typeof v.hash === "string"
  );
}

/** The part keys of `key` from index `from` up to `to` (exclusive). @param {string} key @param {number} from @param {number} to */
function partKeys(key, from, to) {
  return Array.from({ length: to - from }, (_, i) => partKey(key, from + i));
}

/** @param {string} key @param {string} what */
function corrupt(key, what) {
  return userMemoryError("CORRUPT_MEMORY", `Durable Object storage: "${key}" ${what}; it was left as it is`);
}

// The D1 adapter is exported here too: `user-memory/workers` holds the Cloudflare stores.
export { D1Store, d1Store } from "./d1-store.js";
