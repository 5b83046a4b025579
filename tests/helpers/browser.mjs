// Headless Chromium for tests: Debian's /usr/bin/chromium driven by playwright-core (no
// browser download). The flags keep Chromium off the network (this machine has none).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
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

/** A persistent context (so storage survives reloads) in a fresh profile directory. */
export async function launchBrowser() {
  const dir = mkdtempSync(join(tmpdir(), "um-chromium-"));
  const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const close = async () => {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { context, close };
}
