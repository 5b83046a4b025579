// The errors raised by the JS-side modules (stores, middleware, the pool, the CLI and MCP
// server), made like the ones the wasm core throws: an `Error` named "UserMemoryError" with
// a stable `code` (the `ErrorCode` list of the types) and, when it wraps a failure, that
// failure as `cause`. One home, so that every module's errors look the same.

/**
 * An error with a library code.
 * @param {import("./index.js").ErrorCode} code
 * @param {string} message
 * @param {unknown} [cause] the original error
 */
export function userMemoryError(code, message, cause) {
  const e = new Error(message, cause === undefined ? undefined : { cause });
  e.name = "UserMemoryError";
  return Object.assign(e, { code });
}

/**
 * A `TypeError` with code INVALID_INPUT, for wrong arguments to a function of this package.
 * @param {string} message
 */
export function invalidInput(message) {
  return Object.assign(new TypeError(message), { name: "UserMemoryError", code: "INVALID_INPUT" });
}

/**
 * The `code` of a thrown value (Node's `ECONNREFUSED`, a driver's SQLSTATE or result code, this
 * library's `STORAGE_FAILED`, …), or undefined when it has none.
 * @param {unknown} e
 * @returns {string | number | undefined}
 */
export function errorCode(e) {
  const code = /** @type {{ code?: unknown } | null | undefined} */ (e)?.code;
  return typeof code === "string" || typeof code === "number" ? code : undefined;
}
