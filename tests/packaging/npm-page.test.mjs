// What the npm page shows, from the packed tarball: the README travels without docs/ and
// examples/, so every link in it must be absolute (to the repository named in package.json)
// or an anchor of the README itself; the licence file ships; the README opens with what a
// user of the package needs, and the repository's own commands stand under Development.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { packOnce, ROOT } from "../helpers/pack.mjs";

let files;
let manifest;
let readme;
before(() => {
  const tarball = packOnce();
  files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).split("\n").filter(Boolean);
  const read = (name) =>
    execFileSync("tar", ["-xzOf", tarball, `package/${name}`], { encoding: "utf8", maxBuffer: 1 << 26 });
  manifest = JSON.parse(read("package.json"));
  readme = read("README.md");
});

/** The README without fenced code blocks and inline code (links there are not links). */
const prose = (md) => md.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");

/** GitHub's heading anchors: lower-cased, punctuation dropped, spaces to hyphens. */
function anchors(md) {
  const out = new Set();
  for (const [, title] of md.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    out.add(
      title
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, "")
        .replace(/ /g, "-"),
    );
  }
  return out;
}

const repositoryUrl = () => manifest.repository?.url?.replace(/^git\+/, "").replace(/\.git$/, "");

test("the tarball ships LICENSE (MIT), README.md and a package.json naming the repository", () => {
  for (const f of ["package/LICENSE", "package/README.md", "package/package.json"])
    assert.ok(files.includes(f), `${f} in the tarball`);
  assert.equal(manifest.license, "MIT");
  assert.match(readFileSync(join(ROOT, "LICENSE"), "utf8"), /^MIT License\n/);
  assert.match(repositoryUrl() ?? "", /^https:\/\/[^/]+\/user-memory$/, "package.json repository.url");
});

test("package.json's repository is Cargo.toml's repository", () => {
  const cargo = /^repository = "([^"]+)"$/m.exec(readFileSync(join(ROOT, "Cargo.toml"), "utf8"))?.[1];
  assert.equal(repositoryUrl(), cargo);
});

test("every README link works on the npm page: an anchor of the README, or the repository's own file", () => {
  const repo = repositoryUrl();
  const known = anchors(readme);
  const links = [...prose(readme).matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]);
  assert.ok(links.length > 10, `found ${links.length} links`);
  for (const link of links) {
    if (link.startsWith("#")) {
      assert.ok(known.has(link.slice(1)), `anchor ${link} names no heading`);
      continue;
    }
    assert.ok(
      link.startsWith(`${repo}/`),
      `${link} is neither an anchor nor a link into ${repo} (relative links are dead on the npm page)`,
    );
    const m = /^(blob|tree|raw)\/main\/([^#?]+)(#[\w-]+)?$/.exec(link.slice(repo.length + 1));
    assert.ok(m, `${link}: expected ${repo}/(blob|tree|raw)/main/<path>[#anchor]`);
    const path = join(ROOT, m[2]);
    assert.ok(existsSync(path), `${link}: ${m[2]} is not in the repository`);
    assert.equal(
      statSync(path).isDirectory(),
      m[1] === "tree",
      `${link}: tree/ is for folders, blob/ and raw/ for files`,
    );
    if (m[3])
      assert.ok(anchors(readFileSync(path, "utf8")).has(m[3].slice(1)), `${link}: ${m[2]} has no heading ${m[3]}`);
  }
});

test("the README opens with install and the two calls; npm start / npm test stand under Development", () => {
  const firstBlock = /^```\w*\n([\s\S]*?)^```/m.exec(readme)[1].trim();
  assert.equal(firstBlock, "npm install user-memory");
  const second = [...readme.matchAll(/^```\w*\n([\s\S]*?)^```/gm)][1][1];
  assert.match(second, /\.inject\(/);
  assert.match(second, /\.observe\(/);
  // What a user reads first: the opening and the quick starts (the demo section further down
  // is the repository's and may name npm start).
  const opening = readme.slice(0, readme.indexOf("\n## How it works\n"));
  assert.ok(opening.length > 1000, "an opening and a quick start before How it works");
  for (const cmd of [/\bnpm start\b/, /\bnpm test\b/, /\bapt(-get)?\b/, /\bchromium-driver\b/, /\bcargo\b/]) {
    assert.doesNotMatch(opening, cmd, "a contributor command in the opening");
  }
  const dev = readme.slice(readme.indexOf("\n## Development\n"));
  assert.match(dev, /^npm start\b/m);
  assert.match(dev, /^npm test\b/m);
});
