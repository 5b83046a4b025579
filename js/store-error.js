// Errors of the storage adapters, in the shape the library maps to its own codes: an `Error`
// with `code` STORAGE_UNAVAILABLE (the database is down, unreachable, refuses the login, the
// table is missing), STORAGE_QUOTA (full) or STORAGE_FAILED (anything else), and the driver's
// own error as `cause` (made by errors.js). Messages never carry a password: URLs in them are masked, and so is
// every secret the adapter knows of (the pool's or client's configured password).

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

/** The message of a thrown value (an Error's, else its string form). */
export function messageOf(e) {
  return e instanceof Error || (e && typeof e.message === "string") ? e.message : String(e);
}

/** The password of a connection URL (decoded), or "". @param {string} url */
export function urlPassword(url) {
  try {
    return decodeURIComponent(new URL(url).password);
  } catch {
    return "";
  }
}
