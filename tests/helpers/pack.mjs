// Packs the package once per test process (`npm pack`) and installs the tarball into fresh
// temporary projects, as a user would install it from the registry.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
let tarball;

/** The path of `user-memory-<version>.tgz` (built and packed on first use). */
export function packOnce() {
  if (tarball) return tarball;
  const dir = mkdtempSync(join(tmpdir(), "um-pack-"));
  execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  const file = readdirSync(dir).find((f) => /^user-memory-.*\.tgz$/.test(f));
  if (!file) throw new Error(`npm pack produced no user-memory-*.tgz in ${dir}`);
  tarball = join(dir, file);
  return tarball;
}

/** A fresh project with `user-memory` installed from the tarball (plus `extra` packages
 * copied from this repository's node_modules by path, so nothing is downloaded). */
export function freshProject({ type = "module", extra = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "um-consumer-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type }, null, 2));
  const specs = [packOnce(), ...extra.map((name) => join(ROOT, "node_modules", name))];
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", "--loglevel=error", ...specs], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  return dir;
}
