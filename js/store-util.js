// What the storage adapters share: the error helpers (an `Error` with `code`
// STORAGE_UNAVAILABLE, STORAGE_QUOTA or STORAGE_FAILED is made by errors.js; the messages here
// never carry a password: URLs in them are masked, and so is every secret the adapter knows
// of), Node's socket error codes, the guard for clients that emit "error", the retrying
// one-time set-up, and the key range of a prefix.

/**
 * `text` with the credentials of every URL in it masked (`scheme://user:***@host`), and each
 * of `secrets` (non-empty strings) replaced by `***`.
 * @param {unknown} text @param {Array<string | undefined | null>} [secrets]
 */
export function redact(text, secrets = []) {
  let out = String(text).replace(/([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):[^\s/@]*@/gi, "$1$2:***@");
  out = out.replace(/\b(password|pass|pwd)=[^\s&;]*/gi, "$1=***");
  for (const s of secrets) if (typeof s === "string" && s.length > 0) out = out.split(s).join("***");
  return out;
}

/** The message of a thrown value (an Error's, else its string form). @param {unknown} e */
export function messageOf(e) {
  if (e instanceof Error) return e.message;
  const message = /** @type {{ message?: unknown } | null | undefined} */ (e)?.message;
  return typeof message === "string" ? message : String(e);
}

/** The password of a connection URL (decoded), or "". @param {string} url */
export function urlPassword(url) {
  try {
    return decodeURIComponent(new URL(url).password);
  } catch {
    return "";
  }
}

/** Node's socket error codes that mean "the server cannot be reached". */
export const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "EAI_AGAIN",
  "ECONNABORTED",
]);

/**
 * Gives `emitter` (a database pool or client) a listener for "error" if it has none. Such
 * clients emit "error" when a connection drops (an idle connection died, the server
 * restarted); with no listener Node ends the process. They reconnect by themselves and the
 * calls meanwhile reject, so an application that listens for nothing loses nothing; one that
 * listens keeps its own listener alone.
 * @param {unknown} emitter
 */
export function keepErrorsFromEndingProcess(emitter) {
  const e = /** @type {{ on?: unknown, listenerCount?: unknown }} */ (emitter);
  if (typeof e?.on === "function" && typeof e.listenerCount === "function" && e.listenerCount("error") === 0) {
    e.on("error", () => {});
  }
}

/**
 * A one-time set-up (create a table, open a file, check a folder) that every caller waits
 * for: `start` runs on the first call and its promise is shared. A rejection is not kept: the
 * next call runs `start` again (the server may be back, the folder fixed). `forget()` drops
 * the kept promise and returns it (closing a store).
 * @template T
 * @param {() => Promise<T>} start
 * @returns {{ (): Promise<T>, forget(): Promise<T> | null }}
 */
export function retryingOnce(start) {
  /** @type {Promise<T> | null} */
  let kept = null;
  const get = () => {
    if (kept) return kept;
    /** @type {Promise<T>} */
    const p = start().catch((e) => {
      if (kept === p) kept = null;
      throw e;
    });
    return (kept = p);
  };
  get.forget = () => {
    const p = kept;
    kept = null;
    return p;
  };
  return get;
}

/**
 * The smallest string above every string that starts with `prefix`, in code point order; null
 * when there is none (an empty prefix, or one of only U+10FFFF). The keys starting with a
 * prefix are exactly those in [prefix, prefixEnd): a range scan (SQL's primary key index,
 * Redis's ZRANGEBYLEX), never a pattern match that would need escaping or scan everything.
 * @param {string} prefix
 */
export function prefixEnd(prefix) {
  const chars = [...prefix];
  for (let last = chars.pop(); last !== undefined; last = chars.pop()) {
    const code = /** @type {number} */ (last.codePointAt(0));
    if (code < 0x10ffff) {
      // Surrogate code points cannot be stored as UTF-8: the next character after U+D7FF is U+E000.
      return chars.join("") + String.fromCodePoint(code === 0xd7ff ? 0xe000 : code + 1);
    }
  }
  return null;
}
