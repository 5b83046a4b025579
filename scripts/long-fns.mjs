// Lists the functions of src/ longer than a limit (default 100 lines), longest first, tests
// aside (`#[cfg(test)]` modules, tests.rs files): the rooms to cut next (HACKING.md).
//
//   node scripts/long-fns.mjs [limit]
//   node scripts/long-fns.mjs --check   the lint's budget: exits 1 when a function is over
//                                       100 lines (or over its entry in ALLOWED)
//
// A function runs from its `fn` line to the brace that closes its body, counted with
// comments, strings and char literals skipped (a lexer of the few Rust tokens that hide
// braces; raw strings `r#"…"#` included).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const check = process.argv[2] === "--check";
const limit = check ? 100 : Number(process.argv[2] ?? 100);

/**
 * The functions allowed over the limit in `--check`, by "file:name", each up to the length
 * given: only while they are being cut (the entry goes with the cut; a stale one is reported).
 * @type {Record<string, number>}
 */
const ALLOWED = {};

function* rustFiles(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* rustFiles(p);
    else if (e.name.endsWith(".rs") && e.name !== "tests.rs") yield p;
  }
}

/** The text with comments, strings and char literals blanked (newlines kept). */
function blank(text) {
  let out = "";
  for (let i = 0; i < text.length;) {
    const c = text[i];
    const two = text.slice(i, i + 2);
    let end = i + 1;
    if (two === "//") {
      end = text.indexOf("\n", i);
      if (end < 0) end = text.length;
    } else if (two === "/*") {
      end = text.indexOf("*/", i + 2) + 2;
      if (end < 2) end = text.length;
    } else if (/^r#*"/.test(text.slice(i, i + 10)) && !/\w/.test(text[i - 1] ?? "")) {
      const hashes = /^r(#*)"/.exec(text.slice(i))[1];
      end = text.indexOf(`"${hashes}`, i + hashes.length + 2) + hashes.length + 1;
    } else if (c === '"') {
      end = i + 1;
      while (end < text.length && text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      end += 1;
    } else if (c === "'" && /^'(\\.[^']*|[^\\'])'/.test(text.slice(i, i + 12))) {
      end = i + /^'(\\.[^']*|[^\\'])'/.exec(text.slice(i))[0].length; // a char, not a lifetime
    } else {
      out += c;
      i += 1;
      continue;
    }
    out += text.slice(i, end).replace(/[^\n]/g, " ");
    i = end;
  }
  return out;
}

const found = [];
for (const file of rustFiles(join(root, "src"))) {
  const lines = blank(readFileSync(file, "utf8")).split("\n");
  let testDepth = -1; // brace depth at which a #[cfg(test)] module opened
  let depth = 0;
  let pendingTest = false;
  const open = []; // [name, startLine, depthBefore]
  let pendingFn = null;
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n];
    if (/#\[cfg\(test\)\]/.test(line)) pendingTest = true;
    const fn = /\bfn\s+(\w+)/.exec(line);
    if (fn && testDepth < 0) pendingFn = [fn[1], n];
    for (const ch of line) {
      if (ch === "{") {
        if (pendingTest && testDepth < 0) {
          testDepth = depth;
          pendingTest = false;
        }
        if (pendingFn) {
          open.push([...pendingFn, depth]);
          pendingFn = null;
        }
        depth++;
      } else if (ch === "}") {
        depth--;
        if (testDepth >= 0 && depth === testDepth) testDepth = -1;
        const top = open.at(-1);
        if (top && depth === top[2]) {
          open.pop();
          const length = n - top[1] + 1;
          if (length > limit) found.push({ file: relative(root, file), name: top[0], line: top[1] + 1, length });
        }
      } else if (ch === ";" && pendingFn) pendingFn = null; // a declaration without a body
    }
    if (pendingTest && /\bfn\s/.test(line)) pendingTest = false; // #[cfg(test)] on a function
  }
}
found.sort((a, b) => b.length - a.length);
if (check) {
  const over = found.filter((f) => f.length > (ALLOWED[`${f.file}:${f.name}`] ?? limit));
  for (const key of Object.keys(ALLOWED))
    if (!found.some((f) => `${f.file}:${f.name}` === key))
      console.log(`long-fns: ${key} is no longer over ${limit} lines: drop it from ALLOWED in scripts/long-fns.mjs`);
  for (const f of over)
    console.error(
      `long-fns: ${f.file}:${f.line} ${f.name} is ${f.length} lines, over the budget of ${ALLOWED[`${f.file}:${f.name}`] ?? limit}: cut it into steps`,
    );
  if (over.length) process.exit(1);
  console.log(
    `long-fns: no function of src/ over ${limit} lines (tests aside)${found.length ? `, but the ${found.length} allowed` : ""}`,
  );
} else {
  for (const f of found) console.log(`${String(f.length).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(`${found.length} functions over ${limit} lines in src/ (tests aside)`);
}
