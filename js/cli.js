#!/usr/bin/env node
// `npx user-memory <command>`: look at and change a memory from a terminal or a script, over a
// file-store folder (--dir) or a store URL (--store postgres://… | redis://… | sqlite:<file>,
// or USER_MEMORY_STORE in the environment, which keeps a password out of the process list).
// Modelled on gh and git: `user-memory help <command>` (or `<command> --help`) for each
// command, suggestions for a mistyped command or option, one JSON value on stdout with
// --json, and an exit status per kind of failure (EXIT, listed in the help). Errors go to
// stderr as `error CODE: message` (with --json as one JSON line). Nothing printed ever
// contains an API key, a store password or a passphrase, and stored text is printed with its
// terminal control characters escaped (a fact cannot move the cursor, set the clipboard or
// forge a line). docs/cli.md documents all of it.
import { closeSync, fchmodSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { UserMemory } from "./node.js";
import { byConfidence, factLine, MAX_FACT_CHARS, sectionLines, terminalSafe } from "./memory-text.js";
import { openStore } from "./store-url.js";
import { errorCode, userMemoryError } from "./errors.js";
import { messageOf } from "./store-util.js";

/** @typedef {import("./index.js").Fact} Fact */
/** @typedef {import("./index.js").HistoryEntry} HistoryEntry */
/** @typedef {Record<string, string | undefined>} Env */
/**
 * The options given, as parseArgs checked them against ALL_FLAGS: a string for those that
 * take a value, `true` for switches.
 * @typedef {{ [name: string]: string | true | undefined, json?: true, help?: true, version?: true,
 *   yes?: true, all?: true, agent?: string, dir?: string, store?: string, table?: string,
 *   prefix?: string, category?: string, confidence?: string, limit?: string,
 *   "passphrase-env"?: string }} Flags
 */
/**
 * Where a command reads and writes (process.stdin/out/err, or a test's streams).
 * @typedef {{ stdout: import("node:stream").Writable, stderr: import("node:stream").Writable,
 *   stdin: import("node:stream").Readable & { isTTY?: boolean, fd?: number } }} Io
 */
/** @typedef {Awaited<ReturnType<typeof openStore>>} Store */
/**
 * What a command's `run` gets.
 * @typedef {{ name: string, args: string[], flags: Flags, env: Env, io: Io, store: Store,
 *   encryption: import("./index.js").Encryption | undefined, agent: string }} Ctx
 */
/** An option: its value's placeholder (null: a switch) and what it does. @typedef {[string | null, string]} FlagSpec */
/**
 * @typedef {{ usage: string, summary: string, help?: string, json?: string,
 *   flags?: Record<string, FlagSpec>, examples?: string[], run: ((ctx: Ctx) => Promise<unknown>) | null }} Command
 */

/** @type {string[]} */
const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];

/** Exit status per error code: scripts can tell a usage error from a database outage. @type {Record<string, number>} */
const EXIT = {
  INVALID_INPUT: 2,
  NOT_FOUND: 3,
  STORAGE_UNAVAILABLE: 4,
  STORAGE_QUOTA: 4,
  STORAGE_FAILED: 4,
  CONFLICT: 4,
  CORRUPT_MEMORY: 5,
  DECRYPT_FAILED: 5,
};
const exitCode = (/** @type {string} */ code) =>
  EXIT[code] ?? (String(code).startsWith("LLM_") || code === "ABANDONED" ? 6 : 1);

/** Options every command takes: where the memory is, and how to print. @type {Record<string, FlagSpec>} */
const GLOBAL_FLAGS = {
  dir: ["<folder>", "a file-store folder (user-memory/node)"],
  store: ["<url>", "postgres://…, redis://…, sqlite:<file> (or a folder path); or USER_MEMORY_STORE"],
  agent: ["<name>", 'which memory in the store (default "default"); `user-memory agents` lists them'],
  table: ["<name>", "Postgres / SQLite table (default user_memory)"],
  prefix: ["<prefix>", "Redis key prefix (default none)"],
  "passphrase-env": ["<NAME>", "open encrypted memory with the passphrase in the environment variable NAME"],
  json: [null, "machine-readable output: one JSON value on stdout (errors: one JSON line on stderr)"],
  help: [null, "this command's help"],
};
/** @type {FlagSpec} */
const LIMIT = ["<n>", "at most n entries (a whole number from 1 to 1000)"];

/**
 * The commands: usage, one line for the list, the longer help, their own options, and `run`.
 * `json` says what --json prints.
 * @type {Record<string, Command>}
 */
const COMMANDS = {
  show: {
    usage: "show",
    summary: "the profile and the facts, with their ids; what is queued",
    help: "Prints the six summaries and every fact (id, category, confidence), most confident first, and the conversations queued for extraction. An empty memory lists the other memories the store holds.",
    json: "{ agent, store, revision, pending, nextDueAt, document, agents }",
    run: show,
  },
  export: {
    usage: "export [file]",
    summary: "the memory document as JSON (DeerFlow memory.json), to stdout or a file",
    help: "Writes the document (sections and facts, unknown fields kept) as memory.json: to stdout, or to <file> (created with mode 0600).",
    json: "the document itself (the same with or without --json)",
    run: exportCommand,
  },
  import: {
    usage: "import <file | ->",
    summary: "replace the memory with a document (asks first unless --yes)",
    help: "Validates <file> (or stdin with -) as memory.json and replaces the memory with it; over maxFacts the lowest-ranked facts are left out. Asks first when the memory is not empty.",
    flags: { yes: [null, "do not ask"] },
    json: "{ revision, imported }",
    run: importCommand,
  },
  add: {
    usage: "add <text…>",
    summary: "add a fact",
    help: 'Adds a hand-written fact (source "manual"). A fact with the same content is returned instead of a copy.',
    flags: {
      category: ["<name>", `one of ${CATEGORIES.join(", ")} (default context)`],
      confidence: ["<0..1>", "how sure (default 0.9)"],
    },
    examples: ['user-memory add --dir ./memory "Prefers TypeScript" --category preference'],
    json: "{ revision, added }",
    run: add,
  },
  remove: {
    usage: "remove <fact id>",
    summary: "remove a fact by its id",
    help: "Removes one fact; extraction may learn it again later (forget keeps it away).",
    json: "{ revision, removed: [fact] }",
    run: remove,
  },
  forget: {
    usage: "forget <fact id | text…>",
    summary: "remove a fact and keep a tombstone, so extraction does not learn it again",
    help: "Removes the fact with that id, or the one whose content contains the text (case aside), and keeps a tombstone of it: extraction will not store it, or a near-duplicate of it, again.",
    flags: { all: [null, "every fact containing the text"] },
    json: "{ revision, removed: [fact…] }",
    run: forget,
  },
  history: {
    usage: "history",
    summary: "what each change did, newest first",
    help: "One entry per change: revision, time, why (the reason, the thread, undo/redo/revert), and the facts and summaries it added, removed or changed.",
    flags: { limit: LIMIT },
    json: "{ entries: [HistoryEntry…] } (the entries of memory.history())",
    run: history,
  },
  undo: {
    usage: "undo",
    summary: "undo the newest change that is not undone yet (again: the one before)",
    help: "Like an editor's undo: the first undo takes back the newest change, the next one the change before it; an undo is never undone by another undo (that is redo). The undo is itself a change, in the history.",
    json: "{ revision, revertedTo, undid: { revision, reason } }",
    run: (ctx) => step(ctx, "undo"),
  },
  redo: {
    usage: "redo",
    summary: "take back the newest undo",
    help: "Brings back what the newest undo took back; after a new change there is nothing to redo.",
    json: "{ revision, revertedTo, redid: { revision, reason } }",
    run: (ctx) => step(ctx, "redo"),
  },
  revert: {
    usage: "revert <revision>",
    summary: "make the memory what it was after a revision (`history` lists them)",
    help: "Commits the document as it was after <revision> as a new change (itself undoable): facts come back with their ids and timestamps.",
    json: "{ revision, revertedTo }",
    run: revert,
  },
  search: {
    usage: "search <query…>",
    summary: "the facts that match a query, best first",
    help: "Ranks the facts as inject() does (words, CJK characters, a concept lexicon); a fact sharing nothing with the query is not a match.",
    flags: { limit: LIMIT },
    examples: ['user-memory search --dir ./memory "which language?"'],
    json: "{ results: [{ fact, lexical, dense, similarity, score }…] }",
    run: search,
  },
  process: {
    usage: "process",
    summary: "extract what is queued now, with the LLM from the environment",
    help: "Runs the extraction of every queued conversation of the memory (--all: of every memory in the store) with OPENAI_BASE_URL / OPENAI_API_KEY / MODEL, or ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL) and MODEL.",
    flags: { all: [null, "every memory in the store with something queued"] },
    json: "{ agents: [{ agent, processed, failed, error? }…] }",
    run: processCommand,
  },
  agents: {
    usage: "agents",
    summary: "the memories (agents) in the store",
    json: "{ agents: [name…] }",
    run: agents,
  },
  inspect: {
    usage: "inspect",
    summary: "the raw stored strings (to recover from CORRUPT_MEMORY)",
    json: "{ document, queue, vectors, … } (the same with or without --json)",
    run: inspect,
  },
  reset: {
    usage: "reset",
    summary: "delete the memory, its queue and its history (asks first unless --yes)",
    flags: { yes: [null, "do not ask"] },
    json: "{ reset: agent }",
    run: reset,
  },
  mcp: {
    usage: "mcp",
    summary: "serve the memory to MCP clients over stdio (needs @modelcontextprotocol/sdk)",
    help: "Tools search_memory, remember, forget, get_profile; resources memory://<agent>/block and memory://<agent>/document. Runs until the client disconnects.",
    run: null, // dispatched in main(): it runs until the client disconnects
  },
  help: {
    usage: "help [command]",
    summary: "this list, or one command's help",
    run: null,
  },
};

const EXIT_HELP = `Exit status:
  0  done
  1  anything else
  2  INVALID_INPUT: a usage error (nothing was changed)
  3  NOT_FOUND: no such fact or revision, nothing to undo or redo
  4  the store failed: STORAGE_UNAVAILABLE, STORAGE_QUOTA, STORAGE_FAILED; CONFLICT
  5  CORRUPT_MEMORY, DECRYPT_FAILED (encrypted memory: --passphrase-env NAME)
  6  the LLM failed (process): LLM_*, ABANDONED`;

const ENV_HELP = `Environment:
  USER_MEMORY_STORE          the store, instead of --store (keeps a password out of the process list)
  OPENAI_BASE_URL, OPENAI_API_KEY, MODEL    the LLM of \`process\` (or ANTHROPIC_API_KEY and MODEL)`;

const flagLines = (/** @type {Record<string, FlagSpec>} */ flags) =>
  Object.entries(flags).map(([name, [value, what]]) => `  ${`--${name}${value ? ` ${value}` : ""}`.padEnd(27)}${what}`);

function usage() {
  const commands = Object.entries(COMMANDS).map(([, c]) => `  ${c.usage.padEnd(27)}${c.summary}`);
  return [
    "user-memory <command> [options] — long-term user memory, from the command line",
    "",
    "Commands:",
    ...commands,
    "",
    "Where the memory is, and output (every command):",
    ...flagLines(GLOBAL_FLAGS),
    "",
    ENV_HELP,
    "",
    EXIT_HELP,
    "",
    "`user-memory help <command>` (or `user-memory <command> --help`) for a command's options.",
  ].join("\n");
}

/** @param {string} name a command */
function commandHelp(name) {
  const c = COMMANDS[name];
  const out = [`user-memory ${c.usage} — ${c.summary}`];
  if (c.help) out.push("", c.help);
  if (c.flags) out.push("", "Options:", ...flagLines(c.flags));
  out.push("", "Where the memory is, and output:", ...flagLines(GLOBAL_FLAGS));
  if (c.json) out.push("", `With --json: ${c.json}`);
  if (c.examples) out.push("", "Examples:", ...c.examples.map((e) => `  ${e}`));
  out.push("", EXIT_HELP);
  return out.join("\n");
}

/** An error with a library code, for the CLI's own checks. */
const fail = userMemoryError;

/** The edit distance of two short strings (for "did you mean"). @param {string} a @param {string} b */
function distance(a, b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours.
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.length][b.length];
}

/**
 * The closest of `names` within a third of the word (or the one it is a prefix of), else null.
 * @param {string} word @param {string[]} names
 */
function suggest(word, names) {
  /** @type {{ n: string, d: number } | null} */
  let best = null;
  for (const n of names) {
    const d = distance(word.toLowerCase(), n.toLowerCase());
    if (d <= Math.max(1, Math.floor(Math.max(word.length, n.length) / 3)) && (best === null || d < best.d))
      best = { n, d };
  }
  if (best) return best.n;
  // A prefix long enough to mean one name ("hist" → history).
  const prefixed = word.length >= 3 ? names.filter((n) => n.startsWith(word)) : [];
  return prefixed.length === 1 ? prefixed[0] : null;
}

/**
 * `argv` → { command, args, flags, seen } (the flags' names checked; `seen`, in order, for checkFlags).
 * @param {string[]} argv
 */
function parseArgs(argv) {
  /** @type {Flags} */
  const flags = {};
  /** @type {string[]} */
  const positional = [];
  /** @type {string[]} */
  const seen = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (a === "-h") {
      flags.help = true;
      continue;
    }
    if (!a.startsWith("--") || a === "-") {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    // The name only: what follows `=` may be a secret typed in the wrong place.
    const name = a.slice(2, eq < 0 ? undefined : eq);
    seen.push(name);
    const known = ALL_FLAGS[name];
    if (known === undefined) {
      if (name === "version") {
        flags.version = true;
        continue;
      }
      const near = suggest(name, Object.keys(ALL_FLAGS));
      throw fail(
        "INVALID_INPUT",
        `unknown option --${terminalSafe(name)}${near ? `: did you mean --${near}?` : ""} (user-memory help)`,
      );
    }
    if (known[0] === null) {
      if (eq >= 0) throw fail("INVALID_INPUT", `--${name} takes no value`);
      flags[name] = true;
    } else {
      const value = eq < 0 ? argv[++i] : a.slice(eq + 1);
      if (value === undefined || (eq < 0 && value.startsWith("--")))
        throw fail("INVALID_INPUT", `--${name} needs a value (${known[0]})`);
      flags[name] = value;
    }
  }
  const [command, ...args] = positional;
  return { command, args, flags, seen };
}

/** @type {Record<string, FlagSpec>} */
const ALL_FLAGS = Object.assign({}, GLOBAL_FLAGS, ...Object.values(COMMANDS).map((c) => c.flags ?? {}));

/** Refuses an option the command does not take, naming the ones it does. @param {string} name @param {string[]} seen */
function checkFlags(name, seen) {
  const own = COMMANDS[name].flags ?? {};
  for (const f of seen) {
    if (f in GLOBAL_FLAGS || f in own || f === "version") continue;
    const takers = Object.keys(COMMANDS).filter((c) => f in (COMMANDS[c].flags ?? {}));
    throw fail(
      "INVALID_INPUT",
      `${name} takes no --${f} (${takers.join(", ")} ${takers.length === 1 ? "does" : "do"})${
        Object.keys(own).length
          ? `; its options: ${Object.keys(own)
              .map((o) => `--${o}`)
              .join(", ")}`
          : ""
      } (user-memory help ${name})`,
    );
  }
}

/**
 * Runs one command; resolves to the exit status.
 * @param {string[]} argv @param {Env} [env] @param {Io} [io]
 */
async function main(
  argv,
  env = process.env,
  io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin },
) {
  /** @type {Flags} */
  let flags = {};
  let passphraseFlag = false;
  try {
    const parsed = parseArgs(argv);
    flags = parsed.flags;
    passphraseFlag = flags["passphrase-env"] !== undefined;
    if (flags.version) return print(io, readVersion());
    let name = parsed.command;
    if (name === undefined) return print(io, usage());
    if (name === "help") {
      const about = parsed.args[0];
      if (about === undefined) return print(io, usage());
      name = about;
      flags.help = true;
    }
    if (!Object.hasOwn(COMMANDS, name) || name === "help") {
      const near = suggest(name, Object.keys(COMMANDS));
      throw fail(
        "INVALID_INPUT",
        `unknown command ${JSON.stringify(terminalSafe(name))}${near ? `: did you mean ${near}?` : ""} (user-memory help lists them)`,
      );
    }
    if (flags.help) return print(io, commandHelp(name));
    checkFlags(name, parsed.seen);
    const spec = storeSpec(flags, env);
    const encryption = encryptionFromEnv(flags, env);
    const agent = flags.agent ?? "default";
    if (name === "mcp") {
      const { serveMcp } = await import("./mcp.js");
      return await serveMcp({ spec, agent, encryption, stdin: io.stdin, stdout: io.stdout, stderr: io.stderr });
    }
    const store = await openStore(spec);
    try {
      await COMMANDS[name].run?.({ name, args: parsed.args, flags, env, io, store, encryption, agent });
    } finally {
      await store.close();
    }
    return 0;
  } catch (e) {
    const c = errorCode(e);
    const code = typeof c === "string" && /^[A-Z_]+$/.test(c) ? c : "FAILED";
    const message = explain(code, messageOf(e), passphraseFlag, flags.agent ?? "default");
    io.stderr.write(
      flags.json
        ? `${jsonText({ error: { code, message } })}\n`
        : `error ${code}: ${terminalSafe(message, { keepNewlines: true })}\n`,
    );
    return exitCode(code);
  }
}

/**
 * The library's message, with what to do on the command line where the API's advice does not fit.
 * @param {string} code @param {string} message @param {boolean} passphraseFlag @param {string} agent
 */
function explain(code, message, passphraseFlag, agent) {
  if (code === "DECRYPT_FAILED")
    return passphraseFlag
      ? `${message} (the passphrase in the variable --passphrase-env names does not open this memory)`
      : `the memory ${JSON.stringify(agent)} is encrypted: pass --passphrase-env NAME, with the passphrase in the environment variable NAME (e.g. MEMORY_PASSPHRASE=… user-memory show --passphrase-env MEMORY_PASSPHRASE)`;
  return message;
}

/** JSON for stdout: C1 controls and DEL escaped too (JSON.stringify leaves them raw). @param {unknown} value @param {number} [indent] */
function jsonText(value, indent) {
  return JSON.stringify(value, null, indent).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** Prints human-readable text, every control character but the line breaks escaped. @param {Io} io @param {string} text */
function print(io, text) {
  io.stdout.write(`${terminalSafe(text, { keepNewlines: true })}\n`);
  return 0;
}

/** Prints the JSON of a command (one value on stdout). @param {Io} io @param {unknown} value @param {number} [indent] */
function printJson(io, value, indent) {
  io.stdout.write(`${jsonText(value, indent)}\n`);
  return 0;
}

function readVersion() {
  return JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
}

/**
 * --dir / --store / USER_MEMORY_STORE → what openStore() takes.
 * @param {Flags} flags @param {Env} env
 * @returns {Parameters<typeof openStore>[0]}
 */
function storeSpec(flags, env) {
  const extra = { table: flags.table, prefix: flags.prefix };
  if (flags.dir !== undefined && flags.store !== undefined)
    throw fail("INVALID_INPUT", "give --dir or --store, not both");
  if (flags.dir !== undefined) return { dir: flags.dir, ...extra };
  const where = flags.store ?? env.USER_MEMORY_STORE;
  if (where === undefined || where === "") {
    throw fail(
      "INVALID_INPUT",
      "where is the memory? Pass --dir <folder> or --store <postgres://… | redis://… | sqlite:file> (or set USER_MEMORY_STORE)",
    );
  }
  return /^[a-z][a-z0-9+.-]*:/i.test(where) && !/^[a-z]:[\\/]/i.test(where)
    ? { url: where, ...extra }
    : { dir: where, ...extra };
}

/**
 * --passphrase-env NAME → the `encryption` option, the passphrase read from that variable: a
 * value on the command line would be visible to every user of the machine in the process list.
 * No message repeats what was given: in place of a name it may be the passphrase itself.
 * @param {Flags} flags @param {Env} env
 * @returns {import("./index.js").Encryption | undefined}
 */
function encryptionFromEnv(flags, env) {
  const name = flags["passphrase-env"];
  if (name === undefined) return undefined;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw fail(
      "INVALID_INPUT",
      "--passphrase-env takes the name of an environment variable (e.g. MEMORY_PASSPHRASE), not the passphrase",
    );
  const passphrase = env[name];
  if (passphrase === undefined || passphrase === "")
    throw fail(
      "INVALID_INPUT",
      "--passphrase-env: the environment variable it names is not set or empty (give the name of a variable that holds the passphrase, e.g. MEMORY_PASSPHRASE=… user-memory show --passphrase-env MEMORY_PASSPHRASE)",
    );
  return { passphrase };
}

/**
 * The LLM of `process`, from the environment; the key is passed on, never printed.
 * @param {Env} env
 * @returns {import("./index.js").LlmEndpoint}
 */
function llmFromEnv(env) {
  const model = env.MODEL ?? env.OPENAI_MODEL ?? env.ANTHROPIC_MODEL;
  if (env.OPENAI_BASE_URL || env.OPENAI_API_KEY) {
    if (!model)
      throw fail("INVALID_INPUT", "process needs MODEL (the model name) besides OPENAI_BASE_URL / OPENAI_API_KEY");
    return {
      model,
      ...(env.OPENAI_BASE_URL ? { baseUrl: env.OPENAI_BASE_URL } : {}),
      ...(env.OPENAI_API_KEY ? { apiKey: env.OPENAI_API_KEY } : {}),
    };
  }
  if (env.ANTHROPIC_API_KEY) {
    if (!model) throw fail("INVALID_INPUT", "process needs MODEL (the model name) besides ANTHROPIC_API_KEY");
    return {
      provider: "anthropic",
      model,
      apiKey: env.ANTHROPIC_API_KEY,
      ...(env.ANTHROPIC_BASE_URL ? { baseUrl: env.ANTHROPIC_BASE_URL } : {}),
    };
  }
  throw fail(
    "INVALID_INPUT",
    "process needs an LLM: set OPENAI_BASE_URL (an OpenAI-compatible endpoint), OPENAI_API_KEY and MODEL, or ANTHROPIC_API_KEY and MODEL",
  );
}

/** For commands that never extract: an LLM that says so if it is ever asked. */
const noLlm = async () => {
  throw fail("LLM_FAILED", "this command has no LLM (user-memory process uses the one in the environment)");
};

/**
 * Opens the memory of `agent` without timers, runs `fn(memory)`, closes it.
 * @template T
 * @param {Pick<Ctx, "store" | "agent" | "encryption">} ctx
 * @param {(memory: UserMemory) => Promise<T>} fn
 * @param {import("./index.js").UserMemoryOptions["llm"]} [llm]
 * @returns {Promise<T>}
 */
async function withMemory({ store, agent, encryption }, fn, llm = noLlm) {
  const memory = await UserMemory.open({
    agent,
    storage: store.storage,
    llm,
    autoProcess: false,
    ...(encryption ? { encryption } : {}),
  });
  try {
    return await fn(memory);
  } finally {
    await memory.close();
  }
}

/** Asks yes/no on a terminal; without one (a script) only --yes says yes. @param {Io} io @param {Flags} flags @param {string} question */
async function confirm(io, flags, question) {
  if (flags.yes) return;
  if (!io.stdin.isTTY) throw fail("INVALID_INPUT", `${question} Refused without a terminal to ask on: pass --yes`);
  const rl = createInterface({ input: io.stdin, output: io.stderr });
  try {
    const answer = await rl.question(`${terminalSafe(question)} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw fail("INVALID_INPUT", "cancelled; nothing was changed");
  } finally {
    rl.close();
  }
}

/** The text of `file` (`-`: stdin). @param {string} file @param {Io} io */
function readDocument(file, io) {
  try {
    return readFileSync(file === "-" ? (io.stdin.fd ?? 0) : file, "utf8");
  } catch (e) {
    throw fail("INVALID_INPUT", `cannot read ${file === "-" ? "stdin" : file}: ${messageOf(e)}`);
  }
}

/** The agents in a store: every `user-memory/<agent>/doc` or `/queue` pointer key. @param {import("./index.js").StorageAdapter} storage */
async function listAgents(storage) {
  if (typeof storage.keys !== "function") throw fail("INVALID_INPUT", "this store cannot list its keys");
  const names = new Set();
  for (const key of await storage.keys("user-memory/")) {
    const m = /^user-memory\/([^/]+)\/(doc|queue)$/.exec(key);
    if (m) names.add(decodeURIComponent(m[1]));
  }
  return [...names].sort();
}

/**
 * A whole number from `min` to `max` typed as --name, or its default.
 * @param {Flags} flags @param {string} name @param {number} fallback @param {number} [min] @param {number} [max]
 */
function wholeNumber(flags, name, fallback, min = 1, max = 1000) {
  const typed = flags[name];
  if (typed === undefined) return fallback;
  const n = Number(typed);
  if (!(Number.isInteger(n) && n >= min && n <= max) || !/^\s*\d+\s*$/.test(String(typed)))
    throw fail(
      "INVALID_INPUT",
      `--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(terminalSafe(typed))}`,
    );
  return n;
}

const plural = (/** @type {number} */ n, /** @type {string} */ one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** @param {Ctx} ctx */
async function show(ctx) {
  await withMemory(ctx, async (m) => {
    const doc = await m.get();
    const status = m.status();
    const empty = !doc.facts.length && !sectionLines(doc).length && !status.pending.length;
    // An empty memory: which ones does the store hold? (A folder written with --agent terminal
    // shows the empty "default" otherwise, as if it were lost.)
    let agents = null;
    if (empty && typeof ctx.store.storage.keys === "function") agents = await listAgents(ctx.store.storage);
    if (ctx.flags.json)
      return printJson(
        ctx.io,
        {
          agent: ctx.agent,
          store: ctx.store.label,
          revision: status.revision,
          pending: status.pending,
          nextDueAt: status.nextDueAt,
          document: doc,
          ...(agents ? { agents } : {}),
        },
        2,
      );
    const out = [
      `Memory "${ctx.agent}" in ${ctx.store.label}: ${plural(doc.facts.length, "fact")}, revision ${status.revision}`,
    ];
    const sections = sectionLines(doc);
    if (sections.length) out.push("", ...sections);
    if (doc.facts.length) out.push("", "Facts:", ...byConfidence(doc.facts).map((f) => `  ${factLine(f)}`));
    if (empty) {
      out.push("", "(empty)");
      const others = (agents ?? []).filter((a) => a !== ctx.agent);
      if (others.length)
        out.push(
          `This store holds ${others.length === 1 ? "the memory" : "the memories"} ${others.map((a) => JSON.stringify(a)).join(", ")}: pick one with --agent ${/^[\w.-]+$/.test(others[0]) ? others[0] : JSON.stringify(others[0])}`,
        );
    }
    if (status.pending.length) {
      const due = status.nextDueAt === null ? "" : `, next due ${new Date(status.nextDueAt).toISOString()}`;
      out.push(
        "",
        `Queued for extraction: ${plural(status.pending.length, "conversation")}${due} (user-memory process runs them)`,
      );
    }
    print(ctx.io, out.join("\n"));
  });
}

/** @param {Ctx} ctx */
async function exportCommand(ctx) {
  if (ctx.args.length > 1) throw fail("INVALID_INPUT", "export takes at most one file");
  await withMemory(ctx, async (m) => {
    const json = jsonText(await m.export(), 2);
    if (ctx.args[0] && ctx.args[0] !== "-") {
      writeOwnerOnly(ctx.args[0], `${json}\n`);
      if (!ctx.flags.json) ctx.io.stderr.write(`exported to ${terminalSafe(ctx.args[0])}\n`);
    } else ctx.io.stdout.write(`${json}\n`);
  });
}

/**
 * Writes `text` to `path` readable by its owner only: `mode` applies only to a file being
 * created, so an existing file is narrowed to 0600 before the (decrypted) memory goes in.
 * @param {string} path @param {string} text
 */
function writeOwnerOnly(path, text) {
  const fd = openSync(path, "w", 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeFileSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/** @param {Ctx} ctx */
async function importCommand(ctx) {
  const file = ctx.args[0];
  if (!file || ctx.args.length > 1) throw fail("INVALID_INPUT", "import needs one file (or - for stdin)");
  const text = readDocument(file, ctx.io);
  await withMemory(ctx, async (m) => {
    const current = await m.get();
    if (current.facts.length || sectionLines(current).length) {
      await confirm(
        ctx.io,
        ctx.flags,
        `Replace the memory "${ctx.agent}" (${plural(current.facts.length, "fact")}) with ${file}?`,
      );
    }
    const doc = await m.import(text);
    const revision = m.status().revision;
    if (ctx.flags.json) return printJson(ctx.io, { revision, imported: doc.facts.length });
    print(ctx.io, `imported ${plural(doc.facts.length, "fact")} into "${ctx.agent}" (revision ${revision})`);
  });
}

/**
 * --confidence and --category as typed: refused when out of range, never clamped.
 * @param {Flags} flags
 */
function factFields(flags) {
  /** @type {{ category?: import("./index.js").FactCategory, confidence?: number }} */
  const fact = {};
  if (flags.category !== undefined) {
    if (!CATEGORIES.includes(flags.category)) {
      const near = suggest(flags.category, CATEGORIES);
      throw fail(
        "INVALID_INPUT",
        `--category must be one of ${CATEGORIES.join(", ")}; got ${JSON.stringify(terminalSafe(flags.category))}${near ? ` (did you mean ${near}?)` : ""}`,
      );
    }
    fact.category = /** @type {import("./index.js").FactCategory} */ (flags.category);
  }
  if (flags.confidence !== undefined) {
    const c = Number(flags.confidence);
    if (!/^\s*[+]?(\d+\.?\d*|\.\d+)\s*$/.test(flags.confidence) || !(c >= 0 && c <= 1))
      throw fail(
        "INVALID_INPUT",
        `--confidence must be a number from 0 to 1 (e.g. 0.8), got ${JSON.stringify(terminalSafe(flags.confidence))}`,
      );
    fact.confidence = c;
  }
  return fact;
}

/** @param {Ctx} ctx */
async function add(ctx) {
  const content = ctx.args.join(" ").trim();
  if (!content) throw fail("INVALID_INPUT", 'add needs the fact\'s text: user-memory add "Prefers TypeScript"');
  if (content.length > MAX_FACT_CHARS)
    throw fail(
      "INVALID_INPUT",
      `the fact is ${content.length} characters long; a fact is one short sentence, at most ${MAX_FACT_CHARS} characters`,
    );
  const fact = { content, ...factFields(ctx.flags) };
  await withMemory(ctx, async (m) => {
    const added = await m.addFact(fact);
    const revision = m.status().revision;
    if (ctx.flags.json) return printJson(ctx.io, { revision, added });
    print(ctx.io, `added ${factLine(added)}`);
  });
}

/** @param {Ctx} ctx */
async function remove(ctx) {
  if (ctx.args.length !== 1) throw fail("INVALID_INPUT", "remove needs one fact id (user-memory show lists them)");
  await withMemory(ctx, async (m) => {
    const removed = await m.removeFact(ctx.args[0]);
    if (ctx.flags.json) return printJson(ctx.io, { revision: m.status().revision, removed: [removed] });
    print(ctx.io, `removed ${factLine(removed)}`);
  });
}

/** @param {Ctx} ctx */
async function forget(ctx) {
  const what = ctx.args.join(" ").trim();
  if (!what) throw fail("INVALID_INPUT", "forget needs a fact id or some of its text");
  await withMemory(ctx, async (m) => {
    const facts = (await m.get()).facts;
    let targets = facts.filter((f) => f.id === what);
    if (!targets.length) targets = facts.filter((f) => f.content.toLowerCase().includes(what.toLowerCase()));
    if (!targets.length) {
      const near = (await m.search(what, { limit: 3 })).map((r) => r.fact);
      const hint = near.length ? `; closest:\n${near.map((f) => `  ${factLine(f)}`).join("\n")}` : "";
      throw fail("NOT_FOUND", `no fact has the id or contains ${JSON.stringify(terminalSafe(what))}${hint}`);
    }
    if (targets.length > 1 && !ctx.flags.all) {
      throw fail(
        "INVALID_INPUT",
        `${targets.length} facts contain ${JSON.stringify(terminalSafe(what))}; name one by id, or pass --all:\n${targets.map((f) => `  ${factLine(f)}`).join("\n")}`,
      );
    }
    const removed = [];
    for (const f of targets) removed.push(await m.removeFact(f.id, { forget: true }));
    if (ctx.flags.json) return printJson(ctx.io, { revision: m.status().revision, removed });
    print(ctx.io, removed.map((f) => `forgot ${factLine(f)}`).join("\n"));
  });
}

/**
 * Reads the history as an editor's undo stack. An undo reverts to the revision before the
 * change it takes back, a redo to the revision the newest undo took back from; after either,
 * the memory "stands for" an older ordinary change (`base`), which is what the next undo
 * takes back. Any other change (a revert to elsewhere included) is ordinary and empties the
 * redo stack. Returns each undo/redo entry's kind, the redo stack (revisions to revert to),
 * and the revision the next undo reverts to.
 * @param {HistoryEntry[]} entries newest first
 */
function undoState(entries) {
  const byRevision = new Map(entries.map((e) => [e.revision, e]));
  /** @type {Map<number, number>} */
  const baseOf = new Map(); // an undo/redo entry's revision → the ordinary change it stands for
  const base = (/** @type {number} */ revision) => baseOf.get(revision) ?? revision;
  /** @type {Map<number, "undo" | "redo">} */
  const kinds = new Map();
  /** @type {number[]} */
  let redo = [];
  for (const e of [...entries].reverse()) {
    if (e.reason === "revert" && e.revertedTo !== undefined) {
      const from = base(e.revision - 1);
      const kind = e.revertedTo === from - 1 ? "undo" : redo.length && e.revertedTo === redo.at(-1) ? "redo" : null;
      if (kind) {
        kinds.set(e.revision, kind);
        if (kind === "undo") redo.push(e.revision - 1);
        else redo.pop();
        baseOf.set(e.revision, base(e.revertedTo));
        continue;
      }
    }
    redo = [];
  }
  const current = entries.length ? base(entries[0].revision) : null;
  return { kinds, redo, current, undoTarget: current === null ? null : current - 1, byRevision };
}

/** All of the history (it is bounded by historyLimit and 256 KiB). */
const fullHistory = (/** @type {UserMemory} */ m) => m.history({ limit: 1_000_000 });

/**
 * `undo` / `redo`: one step back or forward, named in the output.
 * @param {Ctx} ctx @param {"undo" | "redo"} which
 */
async function step(ctx, which) {
  if (ctx.args.length) throw fail("INVALID_INPUT", `${which} takes no arguments (revert <revision> goes to one)`);
  await withMemory(ctx, async (m) => {
    const entries = await fullHistory(m);
    const state = undoState(entries);
    /** @type {number} the revision to go back to */
    let target;
    /** @type {HistoryEntry | null | undefined} */
    let taken;
    if (which === "undo") {
      if (state.current === null || state.current < 1) throw fail("NOT_FOUND", "nothing to undo: the history is empty");
      target = state.current - 1; // state.undoTarget
      taken = state.byRevision.get(state.current);
      if (!taken)
        throw fail(
          "NOT_FOUND",
          `nothing more to undo: revision ${state.current} is no longer in the history (it keeps the last changes only)`,
        );
    } else {
      if (!state.redo.length) throw fail("NOT_FOUND", "nothing to redo: no undo since the last change");
      target = /** @type {number} */ (state.redo.at(-1));
      taken = state.byRevision.get(target + 1) ?? null; // the undo this takes back
    }
    // The library's undo names the entry (the change, or the undo a redo takes back): two
    // processes pressing undo at once undo it once, the second writes nothing.
    const before = m.status().revision;
    await m.undo({ revision: taken?.revision ?? target + 1 });
    const revision = m.status().revision;
    if (revision === before)
      throw fail(
        "CONFLICT",
        `nothing ${which === "undo" ? "undone" : "redone"}: another process did it first (memory is at revision ${revision}; user-memory history shows it)`,
      );
    const done = (await m.history({ limit: 1 }))[0];
    const named = taken ? { revision: taken.revision, reason: taken.reason } : null;
    if (ctx.flags.json)
      return printJson(ctx.io, { revision, revertedTo: target, [which === "undo" ? "undid" : "redid"]: named });
    const what =
      which === "undo"
        ? `undid revision ${taken?.revision} (${taken ? describeEntry(taken) : ""})`
        : `redid: took back the undo of revision ${taken?.revision ?? target + 1}`;
    print(ctx.io, `${what}; memory is at revision ${revision}\n${entryDetails(done).join("\n")}`.trimEnd());
  });
}

/** @param {Ctx} ctx */
async function revert(ctx) {
  if (ctx.args.length !== 1 || !/^\d+$/.test(ctx.args[0]))
    throw fail("INVALID_INPUT", "revert needs one revision number (user-memory history lists them)");
  const target = Number(ctx.args[0]);
  await withMemory(ctx, async (m) => {
    const current = m.status().revision;
    if (target >= current)
      throw fail("INVALID_INPUT", `revision ${target} is not in the past: memory is at revision ${current}`);
    await m.revert(target);
    const revision = m.status().revision;
    if (ctx.flags.json) return printJson(ctx.io, { revision, revertedTo: target });
    const done = (await m.history({ limit: 1 }))[0];
    print(
      ctx.io,
      `reverted to revision ${target}; memory is at revision ${revision}\n${entryDetails(done).join("\n")}`.trimEnd(),
    );
  });
}

/**
 * `addFact: +1 fact`, `removeFact: -2 facts, sections work`.
 * @param {HistoryEntry} e @param {string | undefined} [kind] undo or redo
 */
function describeEntry(e, kind) {
  const counts = [
    e.added.length && `+${plural(e.added.length, "fact")}`,
    e.removed.length && `-${plural(e.removed.length, "fact")}`,
    e.changed.length && `~${plural(e.changed.length, "fact")}`,
    e.sections.length &&
      `${e.sections.length === 1 ? "section" : "sections"} ${e.sections.map((s) => s.name).join(", ")}`,
  ].filter(Boolean);
  const why =
    e.reason +
    (kind ? ` (${kind})` : "") +
    (e.threadId ? ` of thread ${e.threadId}` : "") +
    (e.revertedTo !== undefined ? ` to revision ${e.revertedTo}` : "");
  return `${why}: ${counts.join(", ") || "no fact or summary"}`;
}

/**
 * The facts and summaries an entry changed, one per line.
 * @param {HistoryEntry | undefined} e
 */
function entryDetails(e) {
  if (!e) return [];
  const clip = (/** @type {string} */ s) => (s.length > 80 ? `${s.slice(0, 79)}…` : s);
  return [
    ...e.added.map((f) => `      + ${factLine(f)}`),
    ...e.removed.map((f) => `      - ${factLine(f)}${e.forgot?.length ? " (forgotten)" : ""}`),
    ...e.changed.map((c) => `      ~ ${factLine(c.after)} (was ${JSON.stringify(clip(String(c.before.content)))})`),
    ...e.sections.map((s) => `      § ${s.name}: ${JSON.stringify(clip(String(s.after?.summary ?? s.after ?? "")))}`),
  ];
}

/** @param {Ctx} ctx */
async function history(ctx) {
  const limit = wholeNumber(ctx.flags, "limit", 20);
  if (ctx.args.length) throw fail("INVALID_INPUT", "history takes no arguments (--limit n for more entries)");
  await withMemory(ctx, async (m) => {
    const all = await fullHistory(m);
    const entries = all.slice(0, limit);
    if (ctx.flags.json) return printJson(ctx.io, { entries });
    const { kinds } = undoState(all);
    const lines = entries.flatMap((e) => [
      `  ${e.revision}  ${new Date(e.at).toISOString()}  ${describeEntry(e, kinds.get(e.revision))}`,
      ...entryDetails(e),
    ]);
    print(ctx.io, lines.length ? lines.join("\n") : "(no history)");
  });
}

/** @param {Ctx} ctx */
async function search(ctx) {
  const query = ctx.args.join(" ").trim();
  if (!query) throw fail("INVALID_INPUT", 'search needs a query: user-memory search "which language?"');
  const limit = wholeNumber(ctx.flags, "limit", 10);
  await withMemory(ctx, async (m) => {
    await m.get(); // read what other processes wrote
    const results = await m.search(query, { limit });
    if (ctx.flags.json) return printJson(ctx.io, { results });
    print(
      ctx.io,
      results.length
        ? results.map((r) => `  ${factLine(r.fact)} (score ${r.score.toFixed(2)})`).join("\n")
        : `no fact matches ${JSON.stringify(query)}`,
    );
  });
}

/** @param {Ctx} ctx */
async function processCommand(ctx) {
  const llm = llmFromEnv(ctx.env);
  const agents = ctx.flags.all ? await listAgents(ctx.store.storage) : [ctx.agent];
  const reports = [];
  let firstError = null;
  for (const agent of agents) {
    try {
      const report = await withMemory(
        { ...ctx, agent },
        async (m) => (m.status().pending.length ? m.flush() : { processed: [], failed: [] }),
        llm,
      );
      reports.push({ agent, ...report });
    } catch (e) {
      firstError ??= e;
      reports.push({ agent, processed: [], failed: [], error: { code: errorCode(e), message: messageOf(e) } });
    }
  }
  if (ctx.flags.json) printJson(ctx.io, { agents: reports });
  else {
    for (const r of reports) {
      const what = r.error
        ? `failed: ${r.error.code}: ${r.error.message}`
        : r.processed.length || r.failed.length
          ? `processed ${r.processed.length}, failed ${r.failed.length}`
          : "nothing queued";
      print(ctx.io, `${r.agent}: ${what}`);
    }
  }
  if (firstError) throw firstError;
}

/** @param {Ctx} ctx */
async function agents(ctx) {
  const names = await listAgents(ctx.store.storage);
  if (ctx.flags.json) return printJson(ctx.io, { agents: names });
  print(ctx.io, names.length ? names.join("\n") : "(no memories in this store)");
}

/** @param {Ctx} ctx */
async function inspect(ctx) {
  printJson(ctx.io, await UserMemory.inspect({ agent: ctx.agent, storage: ctx.store.storage }), 2);
}

/** @param {Ctx} ctx */
async function reset(ctx) {
  await confirm(ctx.io, ctx.flags, `Delete the memory "${ctx.agent}" and its queue in ${ctx.store.label}?`);
  await UserMemory.reset({ agent: ctx.agent, storage: ctx.store.storage });
  if (ctx.flags.json) return printJson(ctx.io, { reset: ctx.agent });
  print(ctx.io, `deleted the memory "${ctx.agent}"`);
}

process.exitCode = await main(process.argv.slice(2));
