// Headless Chromium for tests: the installed Chrome/Chromium (scripts/browsers.mjs finds it:
// CHROME_PATH, PATH, common locations) driven by playwright-core (no browser download). The
// flags keep Chromium off the network (this machine has none).
//
// Tests written once for every engine use tests/helpers/engines.mjs instead; this is for the
// Chromium-only tests (the demo's details, bundles, packaging).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test as nodeTest } from "node:test";
import { chromium } from "playwright-core";
import { findBrowsers, missingReason, skipReason } from "../../scripts/browsers.mjs";

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
  "--disable-dev-shm-usage",
];

/** `node:test`'s `test`, skipped (loudly) where no Chrome or Chromium is installed. */
export function chromiumTest(name, options, fn) {
  if (typeof options === "function") [options, fn] = [{}, options];
  const skip = skipReason("chromium");
  return nodeTest(name, skip ? { ...options, skip } : options, fn);
}

/** A persistent context (so storage survives reloads) in a fresh profile directory. */
export async function launchBrowser() {
  const reason = missingReason("chromium");
  if (reason) throw new Error(`cannot start Chromium: ${reason}`);
  const dir = mkdtempSync(join(tmpdir(), "um-chromium-"));
  const executablePath = findBrowsers().chromium.binary;
  const context = await chromium.launchPersistentContext(dir, { executablePath, headless: true, args: CHROMIUM_ARGS });
  const close = async () => {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { context, close };
}
