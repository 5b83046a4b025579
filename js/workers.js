// Cloudflare Workers / workerd entry: Workers may not compile wasm from bytes at runtime,
// so the .wasm is imported as a module (wrangler and miniflare treat it as CompiledWasm).
import wasmModule from "./wasm/user_memory_bg.wasm";
import { initSync } from "./wasm/user_memory.js";

initSync({ module: wasmModule });

export * from "./wasm/user_memory.js";
export { DELTA_SCHEMA } from "./delta-schema.js";

/** Already initialised in Workers; kept so the same code runs in every runtime. */
export async function init() {}
