// Packs the package (`npm pack`) and installs the tarball into fresh temporary projects, as
// a user would install it from the registry.
//
// The tarball is packed once per build: node:test runs each test file in its own process,
// so it is cached in target/pack-cache/ under the build's stamp (pkg/size.json's mtime) and
// shared by every packaging test file (the stamp also covers the other packed files:
// package.json, README.md, LICENSE, docs/*.md). Temporary projects are removed when the
// process exits.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
let tarball;
const made = [];
process.on("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** The path of `user-memory-<version>.tgz` (built and packed on first use). */
export function packOnce() {
  if (tarball) return tarball;
  // `npm pack` runs `prepack` (build if stale) first; the stamp is read after that.
  const cache = join(ROOT, "target", "pack-cache");
  const stampOf = () => {
    const built = existsSync(join(ROOT, "pkg/size.json"))
      ? String(Math.floor(statSync(join(ROOT, "pkg/size.json")).mtimeMs))
      : "none";
    const hash = createHash("sha256");
    const docs = readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .sort()
      .map((f) => `docs/${f}`);
    for (const f of ["package.json", "README.md", "LICENSE", ...docs])
      hash.update(existsSync(join(ROOT, f)) ? readFileSync(join(ROOT, f)) : "");
    return `${built}-${hash.digest("hex").slice(0, 12)}`;
  };
  const cached = () => {
    const dir = join(cache, stampOf());
    const file = existsSync(dir) && readdirSync(dir).find((f) => /^user-memory-.*\.tgz$/.test(f));
    return file ? join(dir, file) : null;
  };
  execFileSync(process.execPath, [join(ROOT, "scripts/build.mjs"), "--if-stale"], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "inherit"],
  });
  tarball = cached();
  if (tarball) return tarball;
  mkdirSync(cache, { recursive: true });
  const scratch = mkdtempSync(join(cache, "tmp-"));
  execFileSync("npm", ["pack", "--silent", "--pack-destination", scratch], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const file = readdirSync(scratch).find((f) => /^user-memory-.*\.tgz$/.test(f));
  if (!file) throw new Error(`npm pack produced no user-memory-*.tgz in ${scratch}`);
  const dir = join(cache, stampOf());
  rmSync(dir, { recursive: true, force: true });
  try {
    renameSync(scratch, dir); // atomic: another test process may race us to the same stamp
  } catch {
    rmSync(scratch, { recursive: true, force: true });
  }
  tarball = cached();
  if (!tarball) throw new Error("could not cache the packed tarball");
  return tarball;
}

/** A fresh project with `user-memory` installed from the tarball (plus `extra` packages
 * copied from this repository's node_modules by path, so nothing is downloaded). */
export function freshProject({ type = "module", extra = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "um-consumer-"));
  made.push(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type }, null, 2));
  const specs = [packOnce(), ...extra.map((name) => join(ROOT, "node_modules", name))];
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", "--loglevel=error", ...specs], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  return dir;
}

/**
 * The consumer project `tests/packaging/consumers/<name>` (installed by scripts/setup.sh
 * into target/consumers/<name> from its own lock file) with the packed tarball installed
 * into it, as a user with those packages adds `user-memory`: npm resolves the package's
 * peer dependencies against what is already there (an unmet peer fails with ERESOLVE).
 */
export function consumerProject(name) {
  const dir = join(ROOT, "target", "consumers", name);
  if (!existsSync(join(dir, ".setup-stamp"))) throw new Error(`${dir} is missing: run bash scripts/setup.sh --all`);
  // Back to the project as set up (an earlier run saved user-memory into it).
  for (const f of ["package.json", "package-lock.json"])
    copyFileSync(join(ROOT, "tests/packaging/consumers", name, f), join(dir, f));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", "--loglevel=error", packOnce()], {
    cwd: dir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  return dir;
}
