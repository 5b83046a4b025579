#!/usr/bin/env node
// `npx user-memory <command>`: look at and change a memory from a terminal or a script, over a
// file-store folder (--dir) or a store URL (--store postgres://… | redis://… | sqlite:<file>,
// or USER_MEMORY_STORE in the environment, which keeps a password out of the process list).
// `user-memory help` lists the commands. Errors go to stderr as `error CODE: message` (with
// --json as one JSON line) and set an exit status per kind of code (see EXIT). Nothing printed
// ever contains an API key or a store password.
import { readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { UserMemory } from "./node.js";
import { byConfidence, factLine, sectionLines } from "./memory-text.js";
import { openStore } from "./store-url.js";
import { userMemoryError } from "./errors.js";

const USAGE = `user-memory <command> [options] — long-term user memory, from the command line

Commands:
  show                       the profile and the facts, readable (--json: the document and the queue)
  export [file]              the memory document as JSON (DeerFlow memory.json), to stdout or a file
  import <file | ->          replace the memory with a document (asks first unless --yes)
  add <text…>                add a fact (--category, --confidence)
  remove <fact id>           remove a fact by id
  forget <fact id | text>    remove the fact with that id, or the one whose content contains the text
                             (--all: every fact containing it), keeping a tombstone so that
                             extraction does not learn it again
  history                    what each change did, newest first (--limit, default 20)
  undo                       undo the newest change (itself undoable)
  search <query…>            the facts that match, best first (--limit, default 10)
  process                    extract what is queued now, with the LLM from the environment
                             (--all: every agent in the store with something queued)
  agents                     the agents (memories) in the store
  inspect                    the raw stored strings (to recover from CORRUPT_MEMORY)
  reset                      delete the memory and its queue (asks first unless --yes)
  mcp                        serve the memory to MCP clients over stdio (needs @modelcontextprotocol/sdk)

Where the memory is (one of):
  --dir <folder>             a file-store folder (user-memory/node)
  --store <url>              postgres://…, redis://…, sqlite:<file>; or a folder path
  USER_MEMORY_STORE=<url>    the same, from the environment
Options:
  --agent <name>             which memory (default "default")
  --table <name>             Postgres / SQLite table (default user_memory)
  --prefix <prefix>          Redis key prefix (default none)
  --passphrase-env <NAME>    open encrypted memory with the passphrase in the environment
                             variable NAME (never on the command line, never printed)
  --json                     machine-readable output
  --yes                      do not ask before import or reset

The LLM for \`process\`: OPENAI_BASE_URL (an OpenAI-compatible endpoint), OPENAI_API_KEY, MODEL;
or ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL) and MODEL.`;

/** Exit status per error code: scripts can tell a usage error from a database outage. */
const EXIT = {
  INVALID_INPUT: 2,
  NOT_FOUND: 3,
  STORAGE_UNAVAILABLE: 4,
  STORAGE_QUOTA: 4,
  STORAGE_FAILED: 4,
  CORRUPT_MEMORY: 5,
  DECRYPT_FAILED: 5,
  CONFLICT: 4,
};
const exitCode = (code) => EXIT[code] ?? (String(code).startsWith("LLM_") || code === "ABANDONED" ? 6 : 1);

const VALUE_FLAGS = new Set([
  "dir",
  "store",
  "agent",
  "table",
  "prefix",
  "limit",
  "category",
  "confidence",
  "passphrase-env",
]);
const BOOLEAN_FLAGS = new Set(["json", "yes", "all", "help", "version"]);

/** An error with a library code, for the CLI's own checks. */
const fail = userMemoryError;

/** `argv` → { command, args, flags }. */
function parseArgs(argv) {
  const flags = {};
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith("--") || a === "-") {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    const name = a.slice(2, eq < 0 ? undefined : eq);
    if (BOOLEAN_FLAGS.has(name) && eq < 0) flags[name] = true;
    else if (VALUE_FLAGS.has(name)) {
      const value = eq < 0 ? argv[++i] : a.slice(eq + 1);
      if (value === undefined) throw fail("INVALID_INPUT", `--${name} needs a value`);
      flags[name] = value;
    } else throw fail("INVALID_INPUT", `unknown option --${name} (see user-memory help)`);
  }
  const [command, ...args] = positional;
  return { command, args, flags };
}

/** Runs one command; resolves to the exit status. */
async function main(
  argv,
  env = process.env,
  io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin },
) {
  let flags = {};
  try {
    const parsed = parseArgs(argv);
    flags = parsed.flags;
    if (flags.version) return print(io, readVersion());
    if (flags.help || parsed.command === undefined || parsed.command === "help") return print(io, USAGE);
    if (!Object.hasOwn(COMMANDS, parsed.command))
      throw fail("INVALID_INPUT", `unknown command ${JSON.stringify(parsed.command)} (see user-memory help)`);
    const command = COMMANDS[parsed.command];
    const spec = storeSpec(flags, env);
    const encryption = encryptionFromEnv(flags, env);
    if (parsed.command === "mcp") {
      const { serveMcp } = await import("./mcp.js");
      return await serveMcp({
        spec,
        agent: flags.agent ?? "default",
        encryption,
        stdin: io.stdin,
        stdout: io.stdout,
        stderr: io.stderr,
      });
    }
    const store = await openStore(spec);
    try {
      await command({ args: parsed.args, flags, env, io, store, encryption, agent: flags.agent ?? "default" });
    } finally {
      await store.close();
    }
    return 0;
  } catch (e) {
    const code = typeof e?.code === "string" && /^[A-Z_]+$/.test(e.code) ? e.code : "FAILED";
    const message = e?.message ?? String(e);
    io.stderr.write(flags.json ? `${JSON.stringify({ error: { code, message } })}\n` : `error ${code}: ${message}\n`);
    return exitCode(code);
  }
}

function print(io, text) {
  io.stdout.write(`${text}\n`);
  return 0;
}

function readVersion() {
  return JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
}

/** --dir / --store / USER_MEMORY_STORE → what openStore() takes. */
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
 * Errors name the variable, never its value.
 */
function encryptionFromEnv(flags, env) {
  const name = flags["passphrase-env"];
  if (name === undefined) return undefined;
  // Not echoed: what was given in place of a name may be the passphrase itself.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw fail(
      "INVALID_INPUT",
      "--passphrase-env takes the name of an environment variable (e.g. MEMORY_PASSPHRASE), not the passphrase",
    );
  const passphrase = env[name];
  if (passphrase === undefined || passphrase === "")
    throw fail("INVALID_INPUT", `--passphrase-env ${name}: the environment variable ${name} is not set or empty`);
  return { passphrase };
}

/** The LLM of `process`, from the environment; the key is passed on, never printed. */
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

/** Opens the memory of `agent` without timers, runs `fn(memory)`, closes it. */
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

/** Asks yes/no on a terminal; without one (a script) only --yes says yes. */
async function confirm(io, flags, question) {
  if (flags.yes) return;
  if (!io.stdin.isTTY) throw fail("INVALID_INPUT", `${question} Refused without a terminal to ask on: pass --yes`);
  const rl = createInterface({ input: io.stdin, output: io.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw fail("INVALID_INPUT", "cancelled; nothing was changed");
  } finally {
    rl.close();
  }
}

function readDocument(file, io) {
  try {
    return readFileSync(file === "-" ? io.stdin.fd : file, "utf8");
  } catch (e) {
    throw fail("INVALID_INPUT", `cannot read ${file === "-" ? "stdin" : file}: ${e.message}`);
  }
}

/** The agents in a store: every `user-memory/<agent>/doc` or `/queue` pointer key. */
async function listAgents(storage) {
  if (typeof storage.keys !== "function") throw fail("INVALID_INPUT", "this store cannot list its keys");
  const names = new Set();
  for (const key of await storage.keys("user-memory/")) {
    const m = /^user-memory\/([^/]+)\/(doc|queue)$/.exec(key);
    if (m) names.add(decodeURIComponent(m[1]));
  }
  return [...names].sort();
}

const COMMANDS = {
  async show(ctx) {
    await withMemory(ctx, async (m) => {
      const doc = await m.get();
      const status = m.status();
      if (ctx.flags.json)
        return print(
          ctx.io,
          JSON.stringify(
            {
              agent: ctx.agent,
              store: ctx.store.label,
              revision: status.revision,
              pending: status.pending,
              document: doc,
            },
            null,
            2,
          ),
        );
      const out = [
        `Memory "${ctx.agent}" in ${ctx.store.label}: ${doc.facts.length} fact${doc.facts.length === 1 ? "" : "s"}, revision ${status.revision}`,
      ];
      const sections = sectionLines(doc);
      if (sections.length) out.push("", ...sections);
      if (doc.facts.length) out.push("", "Facts:", ...byConfidence(doc.facts).map((f) => `  ${factLine(f)}`));
      if (!sections.length && !doc.facts.length) out.push("", "(empty)");
      if (status.pending.length) {
        const due = status.nextDueAt === null ? "" : `, next due ${new Date(status.nextDueAt).toISOString()}`;
        out.push(
          "",
          `Queued for extraction: ${status.pending.length} conversation${status.pending.length === 1 ? "" : "s"}${due} (user-memory process runs them)`,
        );
      }
      print(ctx.io, out.join("\n"));
    });
  },

  async export(ctx) {
    await withMemory(ctx, async (m) => {
      const json = JSON.stringify(await m.export(), null, 2);
      if (ctx.args[0] && ctx.args[0] !== "-") {
        writeFileSync(ctx.args[0], `${json}\n`);
        if (!ctx.flags.json) ctx.io.stderr.write(`exported to ${ctx.args[0]}\n`);
      } else print(ctx.io, json);
    });
  },

  async import(ctx) {
    const file = ctx.args[0];
    if (!file) throw fail("INVALID_INPUT", "import needs a file (or - for stdin)");
    const text = readDocument(file, ctx.io);
    await withMemory(ctx, async (m) => {
      const current = await m.get();
      if (current.facts.length || sectionLines(current).length) {
        await confirm(
          ctx.io,
          ctx.flags,
          `Replace the memory "${ctx.agent}" (${current.facts.length} facts) with ${file}?`,
        );
      }
      const doc = await m.import(text);
      print(
        ctx.io,
        ctx.flags.json
          ? JSON.stringify({ imported: doc.facts.length })
          : `imported ${doc.facts.length} facts into "${ctx.agent}"`,
      );
    });
  },

  async add(ctx) {
    const content = ctx.args.join(" ").trim();
    if (!content) throw fail("INVALID_INPUT", "add needs the fact's text");
    const fact = { content };
    if (ctx.flags.category !== undefined) fact.category = ctx.flags.category;
    if (ctx.flags.confidence !== undefined) {
      fact.confidence = Number(ctx.flags.confidence);
      if (!Number.isFinite(fact.confidence))
        throw fail(
          "INVALID_INPUT",
          `--confidence must be a number in [0, 1], got ${JSON.stringify(ctx.flags.confidence)}`,
        );
    }
    await withMemory(ctx, async (m) => {
      const added = await m.addFact(fact);
      print(ctx.io, ctx.flags.json ? JSON.stringify(added) : `added ${factLine(added)}`);
    });
  },

  async remove(ctx) {
    if (ctx.args.length !== 1) throw fail("INVALID_INPUT", "remove needs one fact id (user-memory show lists them)");
    await withMemory(ctx, async (m) => {
      const removed = await m.removeFact(ctx.args[0]);
      print(ctx.io, ctx.flags.json ? JSON.stringify({ removed: [removed] }) : `removed ${factLine(removed)}`);
    });
  },

  async forget(ctx) {
    const what = ctx.args.join(" ").trim();
    if (!what) throw fail("INVALID_INPUT", "forget needs a fact id or some of its text");
    await withMemory(ctx, async (m) => {
      const facts = (await m.get()).facts;
      let targets = facts.filter((f) => f.id === what);
      if (!targets.length) targets = facts.filter((f) => f.content.toLowerCase().includes(what.toLowerCase()));
      if (!targets.length) {
        const near = (await m.search(what, { limit: 3 })).map((r) => r.fact);
        const hint = near.length ? `; closest:\n${near.map((f) => `  ${factLine(f)}`).join("\n")}` : "";
        throw fail("NOT_FOUND", `no fact has the id or contains ${JSON.stringify(what)}${hint}`);
      }
      if (targets.length > 1 && !ctx.flags.all) {
        throw fail(
          "INVALID_INPUT",
          `${targets.length} facts contain ${JSON.stringify(what)}; name one by id, or pass --all:\n${targets.map((f) => `  ${factLine(f)}`).join("\n")}`,
        );
      }
      const removed = [];
      for (const f of targets) removed.push(await m.removeFact(f.id, { forget: true }));
      print(
        ctx.io,
        ctx.flags.json ? JSON.stringify({ removed }) : removed.map((f) => `forgot ${factLine(f)}`).join("\n"),
      );
    });
  },

  async history(ctx) {
    const limit = ctx.flags.limit === undefined ? 20 : Number(ctx.flags.limit);
    if (!(Number.isInteger(limit) && limit >= 1))
      throw fail("INVALID_INPUT", `--limit must be a whole number ≥ 1, got ${JSON.stringify(ctx.flags.limit)}`);
    await withMemory(ctx, async (m) => {
      const entries = await m.history({ limit });
      if (ctx.flags.json) return print(ctx.io, JSON.stringify(entries));
      const line = (e) => {
        const what = [
          e.added.length && `+${e.added.length} fact${e.added.length === 1 ? "" : "s"}`,
          e.removed.length && `-${e.removed.length}`,
          e.changed.length && `~${e.changed.length}`,
          e.sections.length && `sections ${e.sections.map((s) => s.name).join(", ")}`,
        ].filter(Boolean);
        const why =
          e.reason +
          (e.threadId ? ` (${e.threadId})` : "") +
          (e.revertedTo !== undefined ? ` to revision ${e.revertedTo}` : "");
        return `  ${e.revision}  ${new Date(e.at).toISOString()}  ${why}: ${what.join(", ") || "no fact or summary"}`;
      };
      print(ctx.io, entries.length ? entries.map(line).join("\n") : "(no history)");
    });
  },

  async undo(ctx) {
    await withMemory(ctx, async (m) => {
      const doc = await m.undo();
      print(
        ctx.io,
        ctx.flags.json
          ? JSON.stringify({ revision: m.status().revision, facts: doc.facts.length })
          : `undone: memory is at revision ${m.status().revision} with ${doc.facts.length} facts`,
      );
    });
  },

  async search(ctx) {
    const query = ctx.args.join(" ").trim();
    if (!query) throw fail("INVALID_INPUT", "search needs a query");
    const limit = ctx.flags.limit === undefined ? 10 : Number(ctx.flags.limit);
    if (!(Number.isInteger(limit) && limit >= 1))
      throw fail("INVALID_INPUT", `--limit must be a whole number ≥ 1, got ${JSON.stringify(ctx.flags.limit)}`);
    await withMemory(ctx, async (m) => {
      await m.get(); // read what other processes wrote
      const results = await m.search(query, { limit });
      if (ctx.flags.json) return print(ctx.io, JSON.stringify(results));
      print(
        ctx.io,
        results.length
          ? results.map((r) => `  ${factLine(r.fact)} (score ${r.score.toFixed(2)})`).join("\n")
          : `no fact matches ${JSON.stringify(query)}`,
      );
    });
  },

  async process(ctx) {
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
        reports.push({ agent, processed: [], failed: [], error: { code: e.code, message: e.message } });
      }
    }
    if (ctx.flags.json) print(ctx.io, JSON.stringify(ctx.flags.all ? { agents: reports } : reports[0]));
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
  },

  async agents(ctx) {
    const names = await listAgents(ctx.store.storage);
    print(
      ctx.io,
      ctx.flags.json ? JSON.stringify(names) : names.length ? names.join("\n") : "(no memories in this store)",
    );
  },

  async inspect(ctx) {
    print(ctx.io, JSON.stringify(await UserMemory.inspect({ agent: ctx.agent, storage: ctx.store.storage }), null, 2));
  },

  async reset(ctx) {
    await confirm(ctx.io, ctx.flags, `Delete the memory "${ctx.agent}" and its queue in ${ctx.store.label}?`);
    await UserMemory.reset({ agent: ctx.agent, storage: ctx.store.storage });
    print(ctx.io, ctx.flags.json ? JSON.stringify({ reset: ctx.agent }) : `deleted the memory "${ctx.agent}"`);
  },

  // Dispatched in main() (it runs until the client disconnects); listed here so it is known.
  mcp: null,
};

process.exitCode = await main(process.argv.slice(2));
