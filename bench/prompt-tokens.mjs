// The extraction instructions' size in tokens (the system prompt: instructions + output
// format, without memory or conversation), at several revisions of src/extract/prompt.rs: small
// local models read them on every call. Counted with the library's built-in estimate (the
// `count_tokens` example) and with cl100k_base (js-tiktoken, a dev dependency).
//
//   node bench/prompt-tokens.mjs                        # before issue 11, main, this tree
//   node bench/prompt-tokens.mjs 68ea7fe main WORKTREE  # any revisions (WORKTREE = the files here)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getEncoding } from "js-tiktoken";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const cl100k = getEncoding("cl100k_base");

/** The value of the Rust `&str` constant `name` in `source` (a plain or raw literal). */
export function rustConst(source, name) {
  const at = source.indexOf(`pub const ${name}: &str = `);
  if (at < 0) throw new Error(`no constant ${name}`);
  let i = source.indexOf("=", at) + 2;
  if (source[i] === "r") {
    const hashes = /^r(#*)"/.exec(source.slice(i))[1];
    const start = i + 2 + hashes.length;
    return source.slice(start, source.indexOf(`"${hashes}`, start));
  }
  let out = "";
  for (i += 1; source[i] !== '"'; i++) {
    if (source[i] !== "\\") {
      out += source[i];
      continue;
    }
    const c = source[++i];
    if (c === "\n") {
      while (/\s/.test(source[i + 1])) i++; // a line continuation skips the next line's indentation
    } else out += { n: "\n", t: "\t", '"': '"', "\\": "\\", "'": "'" }[c] ?? c;
  }
  return out;
}

/** The default system prompt at `rev` (as system_prompt() joins it). */
/** A file at a revision, or `undefined` when it is not there (it lived elsewhere then). */
function gitShow(rev, path) {
  try {
    return execFileSync("git", ["show", `${rev}:${path}`], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
  } catch {
    return undefined;
  }
}

export function systemPrompt(rev) {
  const source =
    rev === "WORKTREE"
      ? readFileSync(join(root, "src/extract/prompt.rs"), "utf8")
      : // before the subsystem folders, the prompt lived at the root of src/
        (gitShow(rev, "src/extract/prompt.rs") ?? gitShow(rev, ["src", "prompt.rs"].join("/")));
  return `${rustConst(source, "INSTRUCTIONS")}\n\n${rustConst(source, "OUTPUT_FORMAT")}`;
}

/** The built-in estimate of each text (one native run of the count_tokens example). */
function estimates(texts) {
  const dir = mkdtempSync(join(tmpdir(), "prompt-tokens-"));
  try {
    const files = texts.map((t, i) => {
      const f = join(dir, `${i}.txt`);
      writeFileSync(f, t);
      return f;
    });
    const out = execFileSync("cargo", ["run", "-q", "--example", "count_tokens", "--", ...files], {
      cwd: root,
      encoding: "utf8",
    });
    return out.trim().split("\n").map(Number);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const revs = process.argv.slice(2).length ? process.argv.slice(2) : ["469e9f3^", "main", "WORKTREE"];
  const texts = revs.map(systemPrompt);
  const est = estimates(texts);
  console.log("| revision | characters | estimate | cl100k_base |\n|---|--:|--:|--:|");
  revs.forEach((rev, i) =>
    console.log(`| ${rev} | ${texts[i].length} | ${est[i]} | ${cl100k.encode(texts[i]).length} |`),
  );
}
