export * from "./wasm/user_memory.js";

/**
 * Loads the WebAssembly module. Browsers fetch it on first use (`UserMemory.open()` calls
 * this for you); in Node.js and Workers it is loaded at import time and this is a no-op.
 */
export function init(input?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<unknown>;
