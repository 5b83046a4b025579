// A storage adapter over a Cloudflare D1 database (exported by `user-memory/workers`).
//
//   import { UserMemory } from "user-memory";
//   import { d1Store } from "user-memory/workers";
//   // in a Worker's fetch(request, env):
//   const memory = await UserMemory.open({ agent: userId, storage: d1Store(env.DB), autoProcess: false, llm });
//
// One table (default `user_memory`): `key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL`,
// created on first use unless `createTable: false` (once per database binding and isolate).
// D1 is SQLite with one writer: each statement is atomic, so compareAndSet is one statement,
// `INSERT … ON CONFLICT (key) DO NOTHING` when absence is expected, else
// `UPDATE … WHERE key = ? AND value = ?`; it succeeded when it changed one row.
//
// Value size. D1 stores strings of up to 2 MB; memory of 10 000 facts is more (2.3 MB plain,
// 3.1 MB encrypted: docs/storage.md#value-size-limits). So a value over PART_BYTES is split:
// its parts go in rows `<key>\u001fpart:<i>` and the key's row holds a header (a marker,
// then { parts, length, sha256 }), all written by ONE `db.batch()`, which D1 runs as a
// transaction: readers see the old value or the new one. A read takes the header and the
// parts in one batch (one snapshot) and checks length and SHA-256: a missing or altered part
// is CORRUPT_MEMORY, never a wrong value. Over MAX_PARTS: STORAGE_QUOTA, nothing written.
// compareAndSet compares a split value by its header (the SHA-256 of the whole value).
import { DEFAULT_TABLE, quoteTable, sqliteStatements } from "./sql-store.js";
import { errorCode, invalidInput, userMemoryError } from "./errors.js";
import { messageOf, prefixEnd, retryingOnce } from "./store-util.js";

/** The most UTF-8 bytes a row's value gets: under D1's 2 MB. */
const PART_BYTES = 1_900_000;
/** The most parts of one value (≈30 MB of ASCII). */
const MAX_PARTS = 16;
/** Starts a header value; no value of this package starts so (they are JSON). */
const MARK = "\u001fuser-memory/parts ";
/** Separates a key from its parts' suffix. */
const PART = "\u001fpart:";

const QUOTA = /SQLITE_FULL|SQLITE_TOOBIG|too big|maximum (DB|database) size|exceeded .*(size|storage)/i;
const UNAVAILABLE =
  /Network connection lost|overloaded|object to be reset|Cannot resolve D1|internal error|no such table|D1 DB is unavailable|SQLITE_BUSY|SQLITE_CANTOPEN/i;

/**
 * The creation of each table, per database binding (a Worker opens a store per request).
 * @type {WeakMap<object, Map<string, () => Promise<unknown>>>}
 */
const created = new WeakMap();

/** @typedef {import("./d1-store.js").D1PreparedStatementLike} Statement */
/** @typedef {keyof ReturnType<typeof sqliteStatements> | "dropParts" | "dropPartsIf" | "setIf"} StatementName */

/**
 * Creates a store over a D1 database binding (`env.DB`). See {@link D1Store}.
 * @param {import("./d1-store.js").D1DatabaseLike} db
 * @param {import("./d1-store.js").D1StoreOptions} [options]
 */
export function d1Store(db, options) {
  return new D1Store(db, options);
}

/** A {@link StorageAdapter} over one D1 table. */
export class D1Store {
  #db;
  #tableName;
  #sql;
  #createTable;

  /**
   * @param {import("./d1-store.js").D1DatabaseLike} db
   * @param {import("./d1-store.js").D1StoreOptions} [options]
   */
  constructor(db, { table = DEFAULT_TABLE, createTable = true } = {}) {
    if (typeof db?.prepare !== "function" || typeof db.batch !== "function") {
      throw invalidInput("d1Store(db) needs a D1 database binding (env.DB)");
    }
    this.#db = db;
    this.#tableName = table;
    const t = quoteTable(table, "d1Store()");
    this.#sql = {
      ...sqliteStatements(t),
      dropParts: `DELETE FROM ${t} WHERE key >= ? AND key < ?`,
      dropPartsIf: `DELETE FROM ${t} WHERE key >= ? AND key < ? AND EXISTS (SELECT 1 FROM ${t} WHERE key = ? AND value = ?)`,
      setIf: `INSERT INTO ${t} (key, value) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM ${t} WHERE key = ? AND value = ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    };
    this.#createTable = createTable !== false;
  }

  /** Shown in error messages. */
  get name() {
    return `D1 table "${this.#tableName}"`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    for (let attempt = 0; ; attempt++) {
      const row = await this.#call("get", [key], (s) => s.first());
      const value = row ? /** @type {string} */ (row.value) : null;
      if (value === null || !value.startsWith(MARK)) return value;
      const header = parseHeader(key, value);
      // The header again and every part, in one batch: one snapshot, so a value replaced
      // since the first read shows as a changed header (read again), never as mixed parts.
      const reads = [this.#statement("get", [key])];
      for (let i = 0; i < header.parts; i++) reads.push(this.#statement("get", [partKey(key, i)]));
      const rows = /** @type {Array<{ results: Array<{ value?: unknown }> }>} */ (await this.#batch(reads));
      const now = rows[0].results[0]?.value ?? null;
      if (now !== value) {
        if (attempt < 4) continue;
        throw userMemoryError("STORAGE_FAILED", `${this.name}: "${key}" kept changing while it was read`);
      }
      let joined = "";
      for (let i = 1; i <= header.parts; i++) {
        const part = rows[i].results[0]?.value;
        if (typeof part !== "string") throw corrupt(this.name, key, `is missing its part ${i - 1}`);
        joined += part;
      }
      if (joined.length !== header.length || (await sha256(joined)) !== header.sha256)
        throw corrupt(
          this.name,
          key,
          `has parts that do not match its header (${joined.length} of ${header.length} characters)`,
        );
      return joined;
    }
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    const parts = this.#split(key, value);
    if (parts.length === 1) {
      await this.#batch([this.#statement("set", [key, value]), this.#dropParts(key)]);
      return;
    }
    await this.#batch([
      this.#statement("set", [key, await header(value, parts.length)]),
      ...this.#writeParts(key, parts),
    ]);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#batch([this.#statement("delete", [key]), this.#dropParts(key)]);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    const end = prefixEnd(prefix);
    const r =
      end === null
        ? await this.#call("keysFrom", [prefix], (s) => s.all())
        : await this.#call("keysRange", [prefix, end], (s) => s.all());
    return r.results.map((row) => /** @type {string} */ (row.key)).filter((k) => !k.includes(PART));
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one statement (one
   * batch when a value is split).
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    const before = expected === null ? null : this.#split(key, expected).length;
    const stored = expected === null || before === null || before === 1 ? expected : await header(expected, before);
    const parts = this.#split(key, value);
    const written = parts.length === 1 ? value : await header(value, parts.length);
    const swap =
      stored === null ? this.#statement("insert", [key, written]) : this.#statement("update", [written, key, stored]);
    if (parts.length === 1 && (stored === null || !stored.startsWith(MARK))) {
      const r = await this.#call(
        stored === null ? "insert" : "update",
        stored === null ? [key, written] : [written, key, stored],
        (s) => s.run(),
      );
      return r.meta.changes === 1;
    }
    // The parts are written (and stale ones dropped) only if the key now holds the new
    // header: that is, if the swap changed it (or it already held the very same value).
    const holds = [key, written];
    const [r] = /** @type {Array<{ meta: { changes: number } }>} */ (
      await this.#batch([swap, ...this.#writeParts(key, parts.length === 1 ? [] : parts, holds)])
    );
    return r.meta.changes === 1;
  }

  /**
   * `value` in parts of at most PART_BYTES UTF-8 bytes (one part: stored as it is).
   * @param {string} key @param {string} value
   */
  #split(key, value) {
    if (value.length <= PART_BYTES / 3) return [value];
    /** @type {string[]} */
    const parts = [];
    for (let at = 0; at < value.length;) {
      let end = Math.min(value.length, at + PART_BYTES);
      // Beyond ASCII a code unit takes up to 3 bytes of UTF-8.
      if (/[^\u0000-\u007f]/.test(value.slice(at, end))) end = Math.min(value.length, at + Math.floor(PART_BYTES / 3));
      const c = value.charCodeAt(end - 1);
      if (end < value.length && c >= 0xd800 && c <= 0xdbff) end -= 1; // never between a surrogate pair
      parts.push(value.slice(at, end));
      at = end;
    }
    if (parts.length > MAX_PARTS)
      throw userMemoryError(
        "STORAGE_QUOTA",
        `${this.name}: a value of ${value.length} characters for "${key}" needs ${parts.length} rows of at most ${PART_BYTES} bytes; a value may take ${MAX_PARTS} (D1 stores at most 2 MB a row). Nothing was written`,
      );
    return parts;
  }

  /**
   * Deletes the part rows of `key` (only while it holds `holds[1]`, when given).
   * @param {string} key @param {string[]} [holds] [key, the value it must hold]
   */
  #dropParts(key, holds) {
    const lo = `${key}${PART}`;
    const hi = /** @type {string} */ (prefixEnd(lo)); // lo ends in ":", so there is one
    return holds ? this.#statement("dropPartsIf", [lo, hi, ...holds]) : this.#statement("dropParts", [lo, hi]);
  }

  /**
   * Statements dropping the old parts of `key` and writing `parts` (conditional on `holds`).
   * @param {string} key @param {string[]} parts @param {string[]} [holds]
   */
  #writeParts(key, parts, holds) {
    const out = [this.#dropParts(key, holds)];
    parts.forEach((p, i) =>
      out.push(
        holds ? this.#statement("setIf", [partKey(key, i), p, ...holds]) : this.#statement("set", [partKey(key, i), p]),
      ),
    );
    return out;
  }

  /** @param {StatementName} name @param {string[]} params @returns {Statement} */
  #statement(name, params) {
    return this.#db.prepare(this.#sql[name]).bind(...params);
  }

  /**
   * Runs `statements` as one transaction (creating the table first if needed).
   * @param {Statement[]} statements
   */
  async #batch(statements) {
    try {
      if (this.#createTable) await this.#ensureTable();
      return await this.#db.batch(statements);
    } catch (e) {
      throw String(errorCode(e) ?? "").startsWith("STORAGE_") ? e : this.#error(e);
    }
  }

  /**
   * Runs one statement (creating the table first if needed), its errors mapped to codes.
   * @template T
   * @param {StatementName} statement @param {string[]} params
   * @param {(s: Statement) => Promise<T>} run
   * @returns {Promise<T>}
   */
  async #call(statement, params, run) {
    try {
      if (this.#createTable) await this.#ensureTable();
      return await run(this.#db.prepare(this.#sql[statement]).bind(...params));
    } catch (e) {
      throw String(errorCode(e) ?? "").startsWith("STORAGE_") ? e : this.#error(e);
    }
  }

  async #ensureTable() {
    let tables = created.get(this.#db);
    if (!tables) created.set(this.#db, (tables = new Map()));
    let create = tables.get(this.#tableName);
    if (!create) {
      const db = this.#db;
      const schema = this.#sql.schema;
      create = retryingOnce(() => db.prepare(schema).run());
      tables.set(this.#tableName, create);
    }
    await create();
  }

  /** @param {unknown} e */
  #error(e) {
    const detail = messageOf(e);
    if (QUOTA.test(detail))
      return userMemoryError("STORAGE_QUOTA", `D1 is full or the value is too big (${detail})`, e);
    if (UNAVAILABLE.test(detail)) return userMemoryError("STORAGE_UNAVAILABLE", `D1 cannot be used now (${detail})`, e);
    return userMemoryError("STORAGE_FAILED", `D1 failed (${detail})`, e);
  }
}

const partKey = (/** @type {string} */ key, /** @type {number} */ i) => `${key}${PART}${String(i).padStart(3, "0")}`;

/** The header row of a value split into `parts`: `<MARK><parts> <length> <sha256>`. @param {string} value @param {number} parts */
async function header(value, parts) {
  return `${MARK}${parts} ${value.length} ${await sha256(value)}`;
}

/** The parts, length and SHA-256 a header row names. @param {string} key @param {string} raw */
function parseHeader(key, raw) {
  const m = /^(\d+) (\d+) ([0-9a-f]{64})$/.exec(raw.slice(MARK.length));
  const parts = m ? Number(m[1]) : 0;
  if (!m || parts < 2 || parts > MAX_PARTS) throw corrupt("D1", key, "holds an unreadable header of parts");
  return { parts, length: Number(m[2]), sha256: m[3] };
}

/** The SHA-256 of the UTF-16 code units of `text`, as hex (WebCrypto: Workers and Node). @param {string} text */
async function sha256(text) {
  const units = new Uint16Array(text.length);
  for (let i = 0; i < text.length; i++) units[i] = text.charCodeAt(i);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", units));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** @param {string} name @param {string} key @param {string} what */
function corrupt(name, key, what) {
  return userMemoryError("CORRUPT_MEMORY", `${name}: "${key}" ${what}; it was left as it is`);
}
