// Reading the code blocks of the README and docs/*.md, for the tests that run them
// (tests/packaging/readme.test.mjs) and check the ones that cannot run here
// (tests/js/docs-shell-blocks.test.mjs).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./pack.mjs";

/** Asserts that a not-run reason names, in backticks, files of this repository that exist. */
export function assertNamesFiles(where, marker) {
  const files = [...marker.matchAll(/`([\w./-]+\.\w+|[\w.-]+\/[\w./-]*)`/g)].map((m) => m[1]);
  assert.ok(files.length, `${where}: the reason names no file (in backticks): ${marker}`);
  for (const f of files) assert.ok(existsSync(join(ROOT, f)), `${where}: ${f} does not exist`);
}

/** The fenced blocks of a Markdown file: `{ lang, code, heading, marker, line }`. */
export function fencedBlocks(text) {
  const lines = text.split("\n");
  const blocks = [];
  let heading = "";
  for (let i = 0; i < lines.length; i++) {
    const h = /^#{1,6}\s+(.*)$/.exec(lines[i]);
    if (h) heading = h[1].trim();
    const open = /^```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    let j = i + 1;
    while (j < lines.length && !/^```\s*$/.test(lines[j])) j++;
    let k = i - 1;
    while (k >= 0 && lines[k].trim() === "") k--;
    const marker = k >= 0 ? /^<!--\s*(not run:\s*[\s\S]*?|runnable)\s*-->$/.exec(lines[k].trim())?.[1] : undefined;
    blocks.push({ lang: open[1], code: lines.slice(i + 1, j).join("\n"), heading, marker, line: i + 1 });
    i = j;
  }
  return blocks;
}

/**
 * The commands of a shell block: continuation lines joined, comments and blank lines dropped,
 * each as its words (quotes are not split on).
 */
export function shellCommands(code) {
  return code
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) => l.replace(/(^|\s)#.*$/, "").trim())
    .filter(Boolean)
    .map((l) => l.match(/"[^"]*"|'[^']*'|\S+/g) ?? []);
}

/**
 * What a not-run shell block names must exist: every repository path it mentions (outputs under
 * `target/` and `/tmp` aside), every `cargo run --example NAME` (examples/NAME.rs) and, for
 * those and for `node <script>` / `bash <script>`, every `--option` after it, as a word of
 * that file's source (a renamed option or a deleted script fails here, not in a reader's
 * terminal). Returns the problems found.
 */
export function staleReferences(code, exists, source) {
  const problems = [];
  for (const words of shellCommands(code)) {
    for (const w of words) {
      const path = /^(?:[\w.-]+\/)+[\w.-]+\.\w+/.exec(w.replace(/^["']|["']$/g, ""))?.[0];
      if (path && !/^(target|tmp|\/)/.test(path) && !/^[\w.-]+\.(com|org|io|dev)\//.test(path) && !exists(path))
        problems.push(`${path} does not exist`);
    }
    let file;
    let flags = [];
    const at = words.indexOf("--example");
    if (words[0] === "cargo" && at > 0) {
      file = `examples/${words[at + 1]}.rs`;
      const sep = words.indexOf("--");
      flags = sep > 0 ? words.slice(sep + 1) : [];
    } else {
      const i = words.findIndex((w, k) => /^(node|bash|sh)$/.test(words[k - 1] ?? "") && /\.(mjs|js|sh)$/.test(w));
      if (i > 0) [file, flags] = [words[i], words.slice(i + 1)];
    }
    if (!file) continue;
    if (!exists(file)) {
      problems.push(`${file} does not exist`);
      continue;
    }
    const text = source(file);
    for (const f of flags.filter((w) => /^--[a-z][\w-]*/.test(w))) {
      const name = /^--([a-z][\w-]*)/.exec(f)[1];
      if (!new RegExp(`(?<!\\w)${name}(?![\\w-])`).test(text)) problems.push(`${file} knows no --${name}`);
    }
  }
  return [...new Set(problems)];
}
