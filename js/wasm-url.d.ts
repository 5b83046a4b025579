/**
 * `user-memory/wasm`: the package's `.wasm` file. Imported through a bundler's file or URL
 * loader (esbuild `--loader:.wasm=file`, webpack `asset/resource`, Vite `?url`), the default
 * export is the URL the bundler emitted it under; pass it to `init()`:
 *
 * ```ts
 * import wasmUrl from "user-memory/wasm";
 * import { init, UserMemory } from "user-memory";
 * await init(wasmUrl);
 * ```
 */
declare const wasmUrl: string;
export default wasmUrl;
