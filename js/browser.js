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
 */
export function init(input) {
  ready ??= wbgInit(input === undefined ? undefined : { module_or_path: input }).catch((e) => {
    ready = undefined;
    throw e;
  });
  return ready;
}

// The static entry points wait for the wasm; everything else is reached through an
// instance, which only exists once the wasm is loaded.
for (const name of ["open", "inspect", "reset"]) {
  const original = UserMemory[name];
  UserMemory[name] = async function (options) {
    await init();
    return original.call(UserMemory, options);
  };
}
