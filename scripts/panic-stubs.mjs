// Replaces the bodies of the standard library's panic entry points in the wasm with a plain
// `unreachable` trap, before wasm-opt, so the message formatting behind them (std's panic
// handler and hook, `char`'s Debug with the Unicode `printable` tables, the slice and
// RefCell messages …) becomes dead code and is removed: −3 KB gzip (docs/size.md).
//
// Behaviour is unchanged. The release build has `panic = "abort"`, and on
// wasm32-unknown-unknown std's panic hook writes to a stderr that does not exist, so a panic
// already ends in exactly this trap (`RuntimeError: unreachable`) with its message thrown
// away; the stubs only skip building that message. (Nothing reachable from JS may panic in
// the first place: docs/design.md#errors.) This is what nightly's `panic_immediate_abort`
// does, done after linking so the build stays on stable Rust.
//
// Function names come from the name section, which wasm-bindgen must keep for this step
// (wasm-opt --strip-debug removes it afterwards).
import binaryen from "binaryen";
import { readFileSync, writeFileSync } from "node:fs";

/** Diverging std functions whose only job is to format a panic message and abort. */
const PANIC_PATHS = [
  /^core\[\w+\]::panicking::/, // panic_fmt, panic, panic_bounds_check, panic_const_*, assert_failed*
  /^core\[\w+\]::option::(unwrap|expect)_failed$/,
  /^core\[\w+\]::result::unwrap_failed$/,
  /^core\[\w+\]::cell::(panic_already_borrowed|panic_already_mutably_borrowed|lazy::panic_poisoned)$/,
  /^core\[\w+\]::slice::index::slice_index_fail$/,
  /^core\[\w+\]::slice::copy_from_slice_impl::len_mismatch_fail$/,
  /^core\[\w+\]::str::slice_error_fail(_rt)?$/,
  /^<alloc\[\w+\]::vec::Vec<_, _>>::\w+::assert_failed$/,
  /^std\[\w+\]::thread::local::panic_access_error$/,
  // Allocation failures and capacity overflows: std's hook would print to the same missing
  // stderr and abort.
  /^alloc\[\w+\]::alloc::handle_alloc_error$/,
  /^alloc\[\w+\]::raw_vec::(handle_error|capacity_overflow)$/,
  /^std\[\w+\]::alloc::rust_oom$/,
  /^<hashbrown\[\w+\]::raw::Fallibility>::capacity_overflow$/,
];

/** Stubs the panic paths of the wasm file at `path` in place; returns the stubbed names. */
export function stubPanics(path) {
  const module = binaryen.readBinary(readFileSync(path));
  const found = [];
  for (let i = 0; i < module.getNumFunctions(); i++) {
    const info = binaryen.getFunctionInfo(module.getFunctionByIndex(i));
    if (!info.module && PANIC_PATHS.some((p) => p.test(info.name))) found.push(info);
  }
  // Without the central one the names changed (another toolchain): fail rather than
  // silently ship the larger module.
  if (!found.some((f) => /::panicking::panic_fmt$/.test(f.name))) {
    throw new Error(
      `panic-stubs: core::panicking::panic_fmt not found in ${path} (no name section, or std's names changed)`,
    );
  }
  for (const f of found) {
    module.removeFunction(f.name);
    module.addFunction(f.name, f.params, f.results, f.vars, module.unreachable());
  }
  if (!module.validate()) throw new Error("panic-stubs: the stubbed module does not validate");
  writeFileSync(path, module.emitBinary());
  module.dispose();
  return found.map((f) => f.name);
}
