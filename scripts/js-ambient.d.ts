// Declarations for `tsc --checkJs` over js/ (scripts/check-js.mjs) of what js/ imports but
// this repository has no types for: the optional peers' parts js/ uses, and the runtime
// modules of Bun and Workers. Never published (pkg/ gets js/*.d.ts only).

/** Workers (wrangler, miniflare) import a .wasm file as a compiled module. */
declare module "*.wasm" {
  const module: WebAssembly.Module;
  export default module;
}

/** Bun's built-in SQLite (js/sqlite-store.js loads it only under Bun). */
declare module "bun:sqlite" {
  export class Database {
    constructor(path: string, options?: { create?: boolean });
    prepare(sql: string): {
      get(...params: string[]): unknown;
      all(...params: string[]): unknown[];
      run(...params: string[]): { changes: number };
    };
    exec(sql: string): void;
    close(): void;
  }
}

/** The two hooks js/react.js uses (react is an optional peer, not installed here). */
declare module "react" {
  export function useState<S>(initial: S): [S, (next: S | ((previous: S) => S)) => void];
  export function useEffect(effect: () => void | (() => void), deps?: readonly unknown[]): void;
}
