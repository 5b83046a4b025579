// Checks src/ against the subsystem map of HACKING.md ("Where things live"): each folder
// imports only what its row says it may, and no module imports one that imports it back
// (directly or around a loop). Tests aside (`#[cfg(test)]` modules, tests.rs). Part of
// `node scripts/test.mjs lint`.
//
//   node scripts/check-layers.mjs
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");

/** Rust text with comments, strings and char literals blanked, and #[cfg(test)] items cut. */
function code(text) {
  let out = "";
  for (let i = 0; i < text.length;) {
    const two = text.slice(i, i + 2);
    let end;
    if (two === "//") end = text.indexOf("\n", i) < 0 ? text.length : text.indexOf("\n", i);
    else if (two === "/*") end = text.indexOf("*/", i + 2) < 0 ? text.length : text.indexOf("*/", i + 2) + 2;
    else if (/^r#*"/.test(text.slice(i, i + 10)) && !/\w/.test(text[i - 1] ?? "")) {
      const hashes = /^r(#*)"/.exec(text.slice(i))[1];
      end = text.indexOf(`"${hashes}`, i + hashes.length + 2) + hashes.length + 1;
    } else if (text[i] === '"') {
      end = i + 1;
      while (end < text.length && text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      end += 1;
    } else if (text[i] === "'" && /^'(\\.[^']*|[^\\'])'/.test(text.slice(i, i + 12))) {
      end = i + /^'(\\.[^']*|[^\\'])'/.exec(text.slice(i))[0].length;
    } else {
      out += text[i++];
      continue;
    }
    out += text.slice(i, end).replace(/[^\n]/g, " ");
    i = end;
  }
  // #[cfg(test)] on a module or item: drop it up to its closing brace (or semicolon).
  for (let at = out.indexOf("#[cfg(test)]"); at >= 0; at = out.indexOf("#[cfg(test)]", at)) {
    let depth = 0;
    let end = at;
    for (; end < out.length; end++) {
      if (out[end] === "{") depth++;
      else if (out[end] === "}" && --depth === 0) break;
      else if (out[end] === ";" && depth === 0) break;
    }
    out = out.slice(0, at) + out.slice(at, end + 1).replace(/[^\n]/g, " ") + out.slice(end + 1);
  }
  return out;
}

function* rustFiles(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* rustFiles(p);
    else if (e.name.endsWith(".rs") && e.name !== "tests.rs") yield p;
  }
}

/** The module path of a file: src/extract/apply/props.rs → ["extract", "apply", "props"]. */
function modulePath(file) {
  const parts = relative(src, file).replace(/\.rs$/, "").split("/");
  if (parts.at(-1) === "mod" || parts.at(-1) === "lib") parts.pop();
  return parts;
}

/** The file of the longest module prefix of `path` that exists, or null. */
function fileOf(path) {
  for (let n = path.length; n > 0; n--) {
    const p = path.slice(0, n).join("/");
    for (const f of [`${p}.rs`, `${p}/mod.rs`]) if (existsSync(join(src, f))) return join(src, f);
  }
  return null;
}

// The root's re-exports (`pub use extract::{apply, delta}` → `delta` is extract::delta).
const aliases = new Map();
for (const m of code(readFileSync(join(src, "lib.rs"), "utf8")).matchAll(
  /pub use (\w+)::(?:\{([^}]*)\}|(\w+)(?: as (\w+))?);/g,
)) {
  if (m[2])
    for (const name of m[2]
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean))
      aliases.set(name, [m[1], name]);
  else aliases.set(m[4] ?? m[3], [m[1], m[3]]);
}

/** Every `crate::…` path a file's code names, resolved through the root's re-exports. */
function importsOf(file) {
  const text = code(readFileSync(file, "utf8"));
  const paths = [];
  for (const m of text.matchAll(/\bcrate::((?:\w+::)*)(\{[^}]*\}|\w+)/g)) {
    const head = m[1].split("::").filter(Boolean);
    const tails = m[2].startsWith("{")
      ? m[2]
          .slice(1, -1)
          .split(",")
          .map((s) => s.trim().split("::"))
      : [[m[2]]];
    for (const t of tails) {
      let p = [...head, ...t].filter((s) => /^\w+$/.test(s));
      if (p.length && aliases.has(p[0])) p = [...aliases.get(p[0]), ...p.slice(1)];
      if (p.length) paths.push(p);
    }
  }
  return paths;
}

// The map: `| \`src/base/\` | what it holds | may import |`.
const rows = [];
for (const line of readFileSync(join(root, "HACKING.md"), "utf8").split("\n")) {
  const m = /^\| `src\/(\w+)\/` \|[^|]*\| (.*) \|$/.exec(line);
  if (m) rows.push([m[1], m[2]]);
}
if (rows.length === 0) throw new Error("HACKING.md has no subsystem map (| `src/<folder>/` | … | may import |)");
const folders = rows.map(([f]) => f);
const allowed = new Map();
rows.forEach(([folder, may], i) => {
  if (/^everything above/.test(may))
    allowed.set(
      folder,
      folders.slice(0, i).map((f) => [f]),
    );
  else if (/^everything/.test(may))
    allowed.set(
      folder,
      folders.map((f) => [f]),
    );
  else
    allowed.set(
      folder,
      [...may.matchAll(/`([\w:]+)`/g)].map((m) => m[1].split("::")),
    );
});

const problems = [];
const graph = new Map();
for (const file of rustFiles(src)) {
  const here = modulePath(file);
  const folder = here[0];
  const rel = relative(root, file);
  const edges = new Set();
  for (const path of importsOf(file)) {
    const target = fileOf(path);
    if (target && target !== file) edges.add(target);
    if (!folder || !allowed.has(folder) || path[0] === folder || !folders.includes(path[0])) continue;
    const ok = allowed.get(folder).some((a) => a.every((part, k) => path[k] === part));
    if (!ok)
      problems.push(
        `${rel}: imports crate::${path.join("::")}, but HACKING.md lets src/${folder}/ import ${
          allowed
            .get(folder)
            .map((a) => a.join("::"))
            .join(", ") || "nothing"
        }`,
      );
  }
  graph.set(file, edges);
}

// Loops between modules: a module may use its own submodules and its parent (mod.rs), not a
// module that reaches back to it through others.
const isFamily = (a, b) => {
  const pa = modulePath(a).join("/");
  const pb = modulePath(b).join("/");
  return pa.startsWith(`${pb}/`) || pb.startsWith(`${pa}/`) || pa === "" || pb === "";
};
const state = new Map();
const stack = [];
const loops = new Set();
function visit(f) {
  state.set(f, 1);
  stack.push(f);
  for (const g of graph.get(f) ?? []) {
    if (isFamily(f, g)) continue;
    if (state.get(g) === 1) {
      const cycle = stack.slice(stack.indexOf(g)).map((x) => relative(root, x));
      loops.add([...cycle, cycle[0]].join(" → "));
    } else if (!state.has(g)) visit(g);
  }
  stack.pop();
  state.set(f, 2);
}
for (const f of graph.keys()) if (!state.has(f)) visit(f);
for (const l of loops) problems.push(`import loop: ${l}`);

if (problems.length) {
  for (const p of problems) console.error(p);
  console.error(`check-layers: ${problems.length} problems (fix the import, or the map in HACKING.md)`);
  process.exit(1);
}
console.log(`check-layers: ${graph.size} modules, ${rows.length} folders as HACKING.md maps them, no import loop`);
