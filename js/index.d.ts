export * from "./wasm/user_memory.js";

/**
 * The JSON schema of the memory delta the extraction answers with, in OpenAI's strict
 * dialect (every property required): `userSaid` first (the user's own sentences about
 * themselves, which the library cuts to statements and checks as it checks facts), `newFacts`,
 * then `factsToRemove`, `factsToReinforce`
 * and `sections` (a list of the summaries that changed), each a list that may be empty.
 * `jsonMode: "schema"` sends it for you; with a JS-function LLM pass it to your SDK, e.g.
 * `response_format: { type: "json_schema", json_schema: { name: "memory_delta", strict: true, schema: DELTA_SCHEMA } }`
 * or the AI SDK's `generateObject({ schema: jsonSchema(DELTA_SCHEMA), … })`. Read-only.
 */
export const DELTA_SCHEMA: {
  readonly type: "object";
  readonly properties: Readonly<
    Record<"userSaid" | "newFacts" | "factsToRemove" | "factsToReinforce" | "sections", unknown>
  >;
  readonly required: readonly string[];
  readonly additionalProperties: false;
};

/**
 * Loads the WebAssembly module. Browsers fetch it on first use (`UserMemory.open()` calls
 * this for you); in Node.js and Workers it is loaded at import time and this is a no-op.
 * Pass the URL of the `.wasm` (e.g. from `import wasmUrl from "user-memory/wasm"` with a
 * bundler's file loader), a `Response`, its bytes or a compiled `WebAssembly.Module` to load
 * it from somewhere else.
 */
export function init(input?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<unknown>;

/**
 * Instantiates the WebAssembly module synchronously from its bytes or a compiled module
 * (for custom loaders). Node.js and Workers entries have already done it; a second call
 * does nothing.
 */
export function initSync(
  module: { module: BufferSource | WebAssembly.Module } | BufferSource | WebAssembly.Module,
): InitOutput;

/** The instantiated module's exports (internal; only `memory` is meant to be read). */
export interface InitOutput {
  readonly memory: WebAssembly.Memory;
}

// `UserMemory` has a `[Symbol.dispose]()` method (so `using memory = …` frees it). Declaring
// `Symbol.dispose` here lets projects compile whose `lib` predates it (ES2022 and older),
// without `skipLibCheck`; with `lib: ["esnext"]` the two declarations merge.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
}
