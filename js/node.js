// Node.js entry (Node >= 18): reads the .wasm beside this file and instantiates it
// synchronously, so `import { UserMemory } from "user-memory"` is ready at once.
import { readFileSync } from "node:fs";
import { webcrypto } from "node:crypto";
import { initSync } from "./wasm/user_memory.js";

// Node 18 has no global Web Crypto; fact ids come from crypto.getRandomValues.
globalThis.crypto ??= /** @type {Crypto} */ (/** @type {unknown} */ (webcrypto));
initSync({ module: readFileSync(new URL("./wasm/user_memory_bg.wasm", import.meta.url)) });

export * from "./wasm/user_memory.js";
export { DELTA_SCHEMA } from "./delta-schema.js";

/** Already initialised in Node; kept so the same code runs in every runtime. */
export async function init() {}
