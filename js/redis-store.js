// `user-memory/redis`: a storage adapter over Redis, with node-redis (`redis`, v4 and later)
// or ioredis.
//
//   import { createClient } from "redis";
//   import { UserMemory } from "user-memory";
//   import { redisStore } from "user-memory/redis";
//   const client = await createClient({ url: process.env.REDIS_URL }).connect();
//   const memory = await UserMemory.open({ agent: userId, storage: redisStore(client, { prefix: "memory:" }), llm });
//
// Layout: each key is a Redis string `<prefix><key>`. Beside them one sorted set,
// `<prefix>` + byte 0xFF + `keys`, lists the keys (a 0xFF byte never occurs in UTF-8, so it
// cannot clash with any key): `keys(prefix)` is one ZRANGEBYLEX range lookup instead of a SCAN
// of the whole database, which would make every open() cost grow with the number of users.
// Every write is one Lua script (SET or DEL plus the index update, atomic in Redis), and so
// is compareAndSet: GET, compare, SET, in one script that no other command can interleave.
//
// node-redis must be connected (`await client.connect()`); ioredis connects by itself. A client
// still on its first connect (`new Redis(url)`, or a connect() not awaited) is waited for, up
// to `connectTimeoutMs` (5 s), before the first command is sent. Once it has been ready, a
// disconnected client makes every call reject at once with STORAGE_UNAVAILABLE instead of
// waiting in the client's offline queue (a write that was reported as failed must not happen
// later; a command sent only after `ready` cannot be the late copy of a failed one). Redis Cluster: put a hash tag in the prefix (`{memory}:`) so that a key
// and the index live in one slot.
import { errorCode, invalidInput, userMemoryError } from "./errors.js";
import { keepErrorsFromEndingProcess, messageOf, NETWORK_CODES, prefixEnd, redact, urlPassword } from "./store-util.js";

const SET = `redis.call('SET', KEYS[1], ARGV[1]) redis.call('ZADD', KEYS[2], 0, ARGV[2]) return 1`;
const DELETE = `redis.call('DEL', KEYS[1]) redis.call('ZREM', KEYS[2], ARGV[1]) return 1`;
// ARGV: [1] "1" = expect absent, else expect ARGV[2]; [3] the new value; [4] the key for the index.
const COMPARE_AND_SET = `local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if cur then return 0 end
elseif cur ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[4])
return 1`;

/** Replies and client messages that mean the server cannot serve us now. */
const UNAVAILABLE =
  /^(NOAUTH|WRONGPASS|LOADING|MASTERDOWN|READONLY|NOPERM)\b|client is closed|socket closed|connection is closed|connection timeout|not ready|offline queue|stream isn't writeable|Connection lost/i;

/** @typedef {string | Buffer} RedisArg */
/**
 * What the store reads of either client besides its commands.
 * @typedef {{ isOpen?: boolean, status?: string, options?: { password?: unknown, url?: unknown },
 *   on?: (event: string, listener: (e?: unknown) => void) => unknown,
 *   off?: (event: string, listener: (e?: unknown) => void) => unknown }} RedisClientState
 */

/**
 * Creates a store over a connected node-redis or ioredis client. See {@link RedisStore}.
 * @param {import("./redis-store.js").RedisClientLike} client
 * @param {import("./redis-store.js").RedisStoreOptions} [options]
 */
export function redisStore(client, options) {
  return new RedisStore(client, options);
}

/** A {@link StorageAdapter} over Redis strings under a key prefix. */
export class RedisStore {
  /** @type {RedisClientState} */
  #client;
  #prefix;
  #index;
  /** @type {(args: RedisArg[]) => Promise<unknown>} */
  #send;
  /** @type {() => boolean} */
  #ready;
  #secrets;
  #connectTimeoutMs;
  /** Whether the client has been ready since the store was made (then no call waits). */
  #wasReady = false;
  /** The client's last error while the store waited for its first connect. */
  #lastError = "";

  /**
   * @param {import("./redis-store.js").RedisClientLike} client
   * @param {import("./redis-store.js").RedisStoreOptions} [options]
   */
  constructor(client, { prefix = "", connectTimeoutMs = 5000 } = {}) {
    if (typeof prefix !== "string")
      throw invalidInput(`redisStore(client, { prefix }) needs a string prefix, got ${typeof prefix}`);
    if (typeof connectTimeoutMs !== "number" || !(connectTimeoutMs >= 0) || connectTimeoutMs > 600_000)
      throw invalidInput(
        `redisStore(client, { connectTimeoutMs }) needs a number of milliseconds from 0 to 600000, got ${String(connectTimeoutMs)}`,
      );
    this.#connectTimeoutMs = connectTimeoutMs;
    // Both clients take Buffers as well as strings (the index key is not UTF-8).
    const io = /** @type {{ call?: (...args: RedisArg[]) => Promise<unknown>, status?: unknown }} */ (client);
    const nr = /** @type {{ sendCommand?: (args: RedisArg[]) => Promise<unknown>, isReady?: unknown }} */ (client);
    if (typeof io?.call === "function" && typeof io.status === "string") {
      // ioredis
      const call = io.call.bind(io);
      this.#send = (args) => call(...args);
      this.#ready = () => io.status === "ready";
    } else if (typeof nr?.sendCommand === "function" && "isReady" in nr) {
      // node-redis v4+
      const send = nr.sendCommand.bind(nr);
      this.#send = (args) => send(args);
      this.#ready = () => nr.isReady === true;
    } else {
      throw invalidInput(
        "redisStore(client) needs a connected client of `redis` (node-redis, createClient()) or `ioredis`",
      );
    }
    this.#client = /** @type {RedisClientState} */ (client);
    this.#prefix = prefix;
    this.#wasReady = this.#ready();
    this.#index = Buffer.concat([Buffer.from(prefix), Buffer.from([0xff]), Buffer.from("keys")]);
    const o = this.#client.options ?? {};
    this.#secrets = [o.password, typeof o.url === "string" ? urlPassword(o.url) : ""].filter(
      /** @returns {s is string} */ (s) => typeof s === "string" && s.length >= 3,
    );
    // Both clients emit "error" when the connection drops; they reconnect by themselves.
    keepErrorsFromEndingProcess(client);
  }

  /** Shown in error messages. */
  get name() {
    return `redis prefix ${JSON.stringify(this.#prefix)}`;
  }

  /** @param {string} key @returns {Promise<string | null>} */
  async get(key) {
    const v = await this.#command(["GET", this.#prefix + key]);
    return v === null || v === undefined ? null : String(v);
  }

  /** @param {string} key @param {string} value */
  async set(key, value) {
    await this.#command(["EVAL", SET, "2", this.#prefix + key, this.#index, value, key]);
  }

  /** @param {string} key */
  async delete(key) {
    await this.#command(["EVAL", DELETE, "2", this.#prefix + key, this.#index, key]);
  }

  /** @param {string} prefix @returns {Promise<string[]>} */
  async keys(prefix) {
    const end = prefixEnd(prefix);
    const keys = await this.#command([
      "ZRANGEBYLEX",
      this.#index,
      prefix === "" ? "-" : `[${prefix}`,
      end === null ? "+" : `(${end}`,
    ]);
    return /** @type {unknown[]} */ (keys).map(String);
  }

  /**
   * Sets `key` to `value` if it holds `expected` (`null`: absent), in one Lua script.
   * @param {string} key @param {string | null} expected @param {string} value
   * @returns {Promise<boolean>}
   */
  async compareAndSet(key, expected, value) {
    const absent = expected === null ? "1" : "0";
    const r = await this.#command([
      "EVAL",
      COMPARE_AND_SET,
      "2",
      this.#prefix + key,
      this.#index,
      absent,
      expected ?? "",
      value,
      key,
    ]);
    return Number(r) === 1;
  }

  /** @param {RedisArg[]} args */
  async #command(args) {
    if (!this.#wasReady) {
      if (!this.#ready() && this.#connecting()) await this.#firstConnect();
      this.#wasReady = this.#ready();
    }
    if (!this.#ready()) throw this.#notConnected();
    try {
      return await this.#send(args);
    } catch (e) {
      // A client closed while the command was on its way (ioredis right after quit()).
      // (A reply of the server, `ERR …`, `OOM …`, `NOAUTH …`, is about the command instead.)
      if (!this.#ready() && !/^[A-Z]{2,}\b/.test(messageOf(e))) throw this.#notConnected(e);
      throw this.#error(e);
    }
  }

  /** Whether the client is trying to connect (not closed, not waiting for connect()). */
  #connecting() {
    const c = this.#client;
    if (typeof c.status === "string")
      return c.status === "connecting" || c.status === "connect" || c.status === "reconnecting";
    return c.isOpen === true;
  }

  /** Waits for the client's first `ready`, up to connectTimeoutMs; resolves either way. */
  #firstConnect() {
    const c = this.#client;
    const { on, off } = c;
    if (typeof on !== "function" || typeof off !== "function") return Promise.resolve();
    return new Promise((resolve) => {
      const failed = (/** @type {unknown} */ e) =>
        (this.#lastError = redact(messageOf(e) || errorCode(e), this.#secrets));
      const done = () => {
        clearTimeout(timer);
        off.call(c, "ready", done);
        off.call(c, "end", done);
        off.call(c, "error", failed);
        resolve(undefined);
      };
      const timer = setTimeout(done, this.#connectTimeoutMs);
      on.call(c, "ready", done);
      on.call(c, "end", done);
      on.call(c, "error", failed);
    });
  }

  /** The STORAGE_UNAVAILABLE error of a client that is not ready, saying what it is doing. @param {unknown} [cause] */
  #notConnected(cause) {
    const c = this.#client;
    const status = typeof c.status === "string" ? c.status : c.isOpen ? "connecting" : "closed";
    let why;
    if (status === "wait" || (c.isOpen === false && !this.#wasReady))
      why = "is not connected (connect it first: await client.connect())";
    else if (status === "end" || status === "close" || status === "closed") why = "was closed (quit() or disconnect())";
    else if (!this.#wasReady)
      why = `did not connect within ${this.#connectTimeoutMs} ms (${this.#lastError || "is the server running, is the URL right?"})`;
    else why = "lost its connection and is reconnecting";
    return userMemoryError("STORAGE_UNAVAILABLE", `Redis is unreachable: the client ${why}`, cause);
  }

  /** @param {unknown} e */
  #error(e) {
    const c = errorCode(e);
    const code = typeof c === "string" ? c : "";
    const detail = redact(messageOf(e) || code, this.#secrets);
    if (/^OOM\b/.test(detail)) return userMemoryError("STORAGE_QUOTA", `Redis is out of memory (${detail})`, e);
    if (NETWORK_CODES.has(code) || UNAVAILABLE.test(detail))
      return userMemoryError("STORAGE_UNAVAILABLE", `Redis is unreachable or refused the command (${detail})`, e);
    return userMemoryError("STORAGE_FAILED", `Redis failed (${detail})`, e);
  }
}
