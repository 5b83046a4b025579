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
  e.code = code;
  return e;
}

/** A `TypeError` with code INVALID_INPUT, for wrong arguments to a function of this package. */
export function invalidInput(message) {
  return Object.assign(new TypeError(message), { name: "UserMemoryError", code: "INVALID_INPUT" });
}
