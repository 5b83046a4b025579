// What the npm page and a clone show. The README is a front page whose links are relative
// (`docs/api.md`, `examples/node-agent.mjs`), so they work in a clone and on the repository's
// web view; the package ships `docs/` too, so every README link into `docs/` also resolves
// inside the installed package (and on the npm page, which resolves relative links against
// the repository). Every link of the README and of each `docs/*.md` must name a file (or a
// heading of it) that exists; the README opens with what a user of the package needs, and
// the repository's own commands stand under Development.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
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

/** Markdown without fenced code blocks and inline code (links there are not links). */
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

/** `[text](target)` and `![alt](target)` links of a Markdown text, outside code. */
const linksOf = (md) => [...prose(md).matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]);

/** Files of the repository that a README link may name although the package does not ship
 * them: contributor material, the examples and the demo's picture (178 KB, rewritten by the
 * demo test), which readers of the npm page reach through the repository. */
const REPOSITORY_ONLY = [/^HACKING\.md$/, /^examples\//, /^docs\/demo\.png$/];

const repositoryUrl = () => manifest.repository?.url?.replace(/^git\+/, "").replace(/\.git$/, "");

/**
 * Checks every link of the Markdown file `file` (a path relative to the repository root):
 * anchors name a heading, relative targets name a file of the repository (a folder only with
 * a trailing `/`), and `#heading` suffixes name a heading of the target. Returns the
 * repository paths the file links to.
 */
function checkLinks(file, md) {
  const known = anchors(md);
  const targets = [];
  const links = linksOf(md);
  for (const link of links) {
    if (link.startsWith("#")) {
      assert.ok(known.has(link.slice(1)), `${file}: anchor ${link} names no heading`);
      continue;
    }
    assert.doesNotMatch(link, /example\.invalid/, `${file}: ${link} points at the placeholder host`);
    if (/^[a-z]+:/i.test(link)) continue; // an outside page, not a file of ours
    assert.doesNotMatch(link, /^\//, `${file}: ${link} is root-relative (dead on the npm page and in a package)`);
    const [path, anchor] = link.split("#");
    const target = normalize(join(dirname(file), decodeURIComponent(path)));
    assert.ok(!target.startsWith(".."), `${file}: ${link} leaves the repository`);
    const abs = join(ROOT, target);
    assert.ok(existsSync(abs), `${file}: ${link} names ${target}, which is not in the repository`);
    assert.equal(statSync(abs).isDirectory(), path.endsWith("/"), `${file}: ${link}: a folder link ends with /`);
    if (anchor !== undefined)
      assert.ok(
        anchors(readFileSync(abs, "utf8")).has(anchor),
        `${file}: ${link}: ${target} has no heading #${anchor}`,
      );
    targets.push(target);
  }
  return { links, targets };
}

test("the tarball ships LICENSE (MIT), README.md, docs/ and a package.json naming the repository", () => {
  for (const f of ["package/LICENSE", "package/README.md", "package/package.json", "package/docs/api.md"])
    assert.ok(files.includes(f), `${f} in the tarball`);
  for (const f of readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")))
    assert.ok(files.includes(`package/docs/${f}`), `docs/${f} in the tarball`);
  assert.equal(manifest.license, "MIT");
  assert.match(readFileSync(join(ROOT, "LICENSE"), "utf8"), /^MIT License\n/);
  assert.match(repositoryUrl() ?? "", /^https:\/\/[^/]+\/user-memory$/, "package.json repository.url");
});

test("package.json's repository is Cargo.toml's repository", () => {
  const cargo = /^repository = "([^"]+)"$/m.exec(readFileSync(join(ROOT, "Cargo.toml"), "utf8"))?.[1];
  assert.equal(repositoryUrl(), cargo);
});

test("every README link resolves in a clone, and in the installed package unless it is the repository's", () => {
  assert.equal(readme, readFileSync(join(ROOT, "README.md"), "utf8"), "the packed README is the repository's");
  const { links, targets } = checkLinks("README.md", readme);
  assert.ok(links.length > 20, `found ${links.length} links`);
  for (const target of targets) {
    if (REPOSITORY_ONLY.some((re) => re.test(target))) continue;
    assert.ok(
      files.includes(`package/${target}`),
      `README links to ${target}, which the package does not ship (add it to "files" in package.json)`,
    );
  }
});

test("every link of every docs/*.md resolves to a file (and heading) of the repository", () => {
  let count = 0;
  for (const f of readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md"))) {
    const md = readFileSync(join(ROOT, "docs", f), "utf8");
    count += checkLinks(`docs/${f}`, md).links.length;
  }
  for (const f of ["HACKING.md", "examples/worker/README.md"])
    count += checkLinks(f, readFileSync(join(ROOT, f), "utf8")).links.length;
  assert.ok(count > 50, `found ${count} links`);
});

test("the link checker fails on a dead file, a dead heading, a placeholder link and a folder without /", () => {
  for (const bad of [
    "[x](docs/no-such-file.md)",
    "[x](docs/api.md#no-such-heading)",
    "[x](#no-such-heading)",
    "[x](https://example.invalid/user-memory/blob/main/docs/api.md)",
    "[x](examples/worker)",
    "[x](/docs/api.md)",
  ])
    assert.throws(() => checkLinks("README.md", `# Title\n\n${bad}\n`), assert.AssertionError, bad);
  assert.doesNotThrow(() =>
    checkLinks("README.md", "# Title\n\n[x](docs/api.md#methods) [y](#title) [z](examples/worker/)\n"),
  );
});

test("the README is a front page: install and the two calls first, a few hundred lines, npm start / npm test under Development", () => {
  const lines = readme.split("\n").length;
  assert.ok(lines < 400, `the README has ${lines} lines: reference material belongs in docs/`);
  const firstBlock = /^```\w*\n([\s\S]*?)^```/m.exec(readme)[1].trim();
  assert.equal(firstBlock, "npm install user-memory");
  const second = [...readme.matchAll(/^```\w*\n([\s\S]*?)^```/gm)][1][1];
  assert.match(second, /\.inject\(/);
  assert.match(second, /\.observe\(/);
  // The first Node example keeps memory on disk.
  const node = readme.slice(readme.indexOf("\n### Node.js"));
  assert.match(/^```js\n([\s\S]*?)^```/m.exec(node)[1], /storage: fileStore\(/);
  // What a user reads first: everything before Development.
  const opening = readme.slice(0, readme.indexOf("\n## Development\n"));
  assert.ok(opening.length > 1000, "an opening and quick starts before Development");
  for (const cmd of [/\bnpm start\b/, /\bnpm test\b/, /\bapt(-get)?\b/, /\bchromium-driver\b/, /\bcargo\b/]) {
    assert.doesNotMatch(opening, cmd, "a contributor command in the opening");
  }
  const dev = readme.slice(readme.indexOf("\n## Development\n"));
  assert.match(dev, /^npm start\b/m);
  assert.match(dev, /^npm test\b/m);
  for (const section of ["## Quick start per runtime", "## Coming from mem0, Mastra or Zep", "## Documentation"])
    assert.ok(readme.includes(`\n${section}`), `the README has ${section}`);
});
