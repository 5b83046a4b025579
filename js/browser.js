// Browser entry (also bundlers and plain <script type="module">): the .wasm is fetched
// relative to this file the first time it is needed. No top-level await, so bundlers
// with any target accept it.
import wbgInit, { UserMemory } from "./wasm/user_memory.js";

export * from "./wasm/user_memory.js";
export { DELTA_SCHEMA } from "./delta-schema.js";

let ready;

/**
 * Loads the wasm once. Optional: `UserMemory.open()` calls it. Pass a URL, Response or
 * WebAssembly.Module to load the .wasm from somewhere else. A failed load (offline, a
 * wrong URL) is not remembered: the next call tries again.
 * @param {Parameters<typeof import("./index.js").init>[0]} [input]
 */
export function init(input) {
  ready ??= wbgInit(input === undefined ? undefined : { module_or_path: input }).catch((e) => {
    ready = undefined;
    throw e;
  });
  return ready;
}

// Every static method (open, inspect, encrypt, reset, …) waits for the wasm: each is a way in
// before any instance exists. Found on the class rather than listed, so a static added in Rust
// cannot be missed; wasm-bindgen's own (`__wrap`, …) are internal and called synchronously.
const statics = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (UserMemory));
for (const name of Object.getOwnPropertyNames(UserMemory)) {
  const original = statics[name];
  if (typeof original !== "function" || name.startsWith("__")) continue;
  /** @param {unknown[]} args */
  statics[name] = async function (...args) {
    await init();
    return original.apply(UserMemory, args);
  };
}
