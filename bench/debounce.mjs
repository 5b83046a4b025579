// What the debounce saves: replays one scripted chat session (5 threads × 20 turns) against
// the local scripted LLM server and counts the extraction calls and the prompt tokens the
// server received, with one extraction per turn and with several debounce settings.
//
//   node scripts/build.mjs && node bench/debounce.mjs
//
// Simulated time, no sleeping: this process replaces `Date.now` (which the library reads for
// its clock) with a session clock, opens the memory with `autoProcess: false`, and drives the
// queue the way a scheduler would — before each turn it calls `processDue()` whenever
// `nextDueAt()` has come. So the real defaults are used (debounce 30 s, maxWait 5 min) and
// every run prints the same numbers. Turns come 3–9 s apart, threads overlap (they start
// 100 s apart), and every thread has one pause of 60–90 s (the user went away) in the middle.
// Each model call takes 2 s of session time.
//
// Prompt tokens = characters of (system prompt + user prompt) of every request the server
// received, divided by 4 and rounded up per request (the usual rough chars/4 rule, not the
// library's own estimate). Like DeerFlow, the app observes the whole thread history after
// every turn; the queue keeps the newest history per thread.
//
// "turn → extraction" is the session time from a turn's observe() to the first extraction
// call whose prompt holds that turn: what the savings cost in freshness.
//
// The fake model "extracts" one fact per user statement ("I …") in the conversation it is
// shown, so every mode ends with the same facts (duplicates are merged on apply).
//
// A second table replays one long thread (200 turns, observed whole every 50 turns and
// flushed then): what each extraction sends, against the conversation's own tokens plus one
// prompt overhead (instructions + memory) per call.
//
//   USER_MEMORY_PKG=/path/to/other/pkg node bench/debounce.mjs   # the same bench on another build
const { UserMemory } = await import(
  process.env.USER_MEMORY_PKG ? `${process.env.USER_MEMORY_PKG}/node.js` : "user-memory"
);
import { startLlmServer } from "../tests/helpers/llm-server.mjs";

const THREADS = 5;
const TURNS = 20;
const MODEL_LATENCY_MS = 2_000; // session time per call

// The session clock. The library's clock is Date.now(), read on every use.
const T0 = Date.UTC(2026, 2, 14, 10, 0, 0);
let clock = T0;
Date.now = () => clock;

// ---- the session -------------------------------------------------------------------------

/** Deterministic PRNG (mulberry32). */
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const topics = ["Go microservices", "sourdough baking", "marathon training", "learning Japanese", "home solar panels"];
const filler =
  "It depends on the details, so here are the main options with their trade-offs, a short example, and what I would try first given what you told me so far. ";

/** [{ at (session ms), thread, turn }] sorted by time, and the messages of every turn. */
function session() {
  const rand = rng(42);
  const events = [];
  const turns = {};
  for (let t = 0; t < THREADS; t++) {
    const thread = `thread-${t + 1}`;
    turns[thread] = [];
    let at = t * 100_000 + Math.floor(rand() * 20_000); // threads start 100 s apart and overlap
    const pauseAfter = 7 + Math.floor(rand() * 6);
    for (let k = 0; k < TURNS; k++) {
      const statement = k % 3 === 0;
      const user = statement
        ? `I ${["work on", "care about", "spend my weekends on", "want to get better at"][k % 4]} ${topics[t]} (detail ${k + 1}: ${Math.floor(rand() * 1000)})`
        : `How should I handle step ${k + 1} of ${topics[t]}? Any pitfalls with ${Math.floor(rand() * 100)} units?`;
      const assistant = filler.repeat(2 + Math.floor(rand() * 4)).trim();
      turns[thread].push([
        { role: "user", content: user },
        { role: "assistant", content: assistant },
      ]);
      events.push({ at, thread, turn: k });
      at += 3_000 + Math.floor(rand() * 6_000);
      if (k === pauseAfter) at += 60_000 + Math.floor(rand() * 30_000);
    }
  }
  events.sort((a, b) => a.at - b.at);
  return { events, turns };
}

// ---- the fake model ----------------------------------------------------------------------

/** One fact per "User: I …" line of the conversation in the prompt. */
function fakeModel(record) {
  const prompt = record.body?.messages?.at(-1)?.content ?? "";
  const conversation = prompt.split("<conversation>")[1]?.split("</conversation>")[0] ?? "";
  const newFacts = conversation
    .split("\n")
    .filter((l) => l.startsWith("User: I "))
    .map((l) => ({ content: l.slice("User: ".length), category: "context", confidence: 0.9 }));
  clock += MODEL_LATENCY_MS;
  return { json: { newFacts, factsToRemove: [] } };
}

function promptTokens(record) {
  const chars = (record.body?.messages ?? []).reduce((n, m) => n + String(m.content ?? "").length, 0);
  return Math.ceil(chars / 4);
}

// ---- the runs ----------------------------------------------------------------------------

/** Runs what is due up to session time `until` (processDue() whenever nextDueAt() comes). */
async function runDueUntil(memory, until) {
  for (;;) {
    const due = memory.nextDueAt();
    if (due === null || due > until) break;
    clock = Math.max(clock, due);
    const r = await memory.processDue();
    if (!r.processed.length && !r.failed.length) clock += 1_000; // nothing claimable yet
  }
}

async function replay(name, options, { flushEachTurn = false } = {}) {
  const llm = await startLlmServer({ fallback: fakeModel });
  clock = T0;
  const memory = await UserMemory.open({
    agent: `bench-${name.replace(/\W+/g, "-")}`,
    storage: "memory",
    autoProcess: false,
    llm: { baseUrl: llm.baseUrl, model: "bench", maxRetries: 0 },
    ...options,
  });
  let errors = 0;
  memory.on("error", () => errors++);
  const { events, turns } = session();
  const history = {};
  const observed = []; // [session time of observe(), the turn's user text]
  for (const ev of events) {
    await runDueUntil(memory, T0 + ev.at);
    clock = Math.max(clock, T0 + ev.at);
    history[ev.thread] = [...(history[ev.thread] ?? []), ...turns[ev.thread][ev.turn]];
    observed.push([clock, turns[ev.thread][ev.turn][0].content]);
    memory.observe(ev.thread, history[ev.thread]);
    if (flushEachTurn) await memory.flush();
  }
  await runDueUntil(memory, Infinity); // the end of the session: the queue runs out by itself
  const facts = (await memory.get()).facts.length;
  await memory.close();
  await llm.close();
  const tokens = llm.requests.reduce((n, r) => n + promptTokens(r), 0);
  // Delay from a turn's observe() to the first extraction call whose prompt holds it.
  const delays = observed.map(([at, text]) => {
    const req = llm.requests.find((r) => r.at >= at && r.raw.includes(JSON.stringify(text).slice(1, -1)));
    return req ? req.at - at : Infinity;
  });
  delays.sort((a, b) => a - b);
  return {
    name,
    calls: llm.requests.length,
    tokens,
    facts,
    errors,
    median: delays[Math.floor(delays.length / 2)],
    max: delays.at(-1),
  };
}

const rows = [
  await replay("one call per turn (flush() after every observe)", { debounceMs: 600_000 }, { flushEachTurn: true }),
  await replay("debounce 10 s", { debounceMs: 10_000 }),
  await replay("debounce 30 s, maxWait 5 min (defaults)", {}),
  await replay("debounce 30 s, maxWait 1 min", { maxWaitMs: 60_000 }),
  await replay("debounce 60 s", { debounceMs: 60_000 }),
];

const base = rows[0];
const secs = (ms) => (Number.isFinite(ms) ? `${Math.round(ms / 1000)} s` : "never");
const header = [
  "mode",
  "LLM calls",
  "prompt tokens",
  "tokens/call",
  "vs per turn",
  "facts",
  "turn → extraction, median / max",
];
const table = rows.map((r) => [
  r.name,
  String(r.calls),
  r.tokens.toLocaleString("en-US"),
  Math.round(r.tokens / r.calls).toLocaleString("en-US"),
  r === base ? "—" : `${Math.round((100 * r.tokens) / base.tokens)} % tokens`,
  String(r.facts),
  `${secs(r.median)} / ${secs(r.max)}`,
]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
const line = (cells) =>
  `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(" | ")} |`;
console.log(
  `session: ${THREADS} threads × ${TURNS} turns = ${THREADS * TURNS} observe() calls over ${Math.round(session().events.at(-1).at / 60_000)} min of simulated time`,
);
console.log(`prompt tokens = chars/4 of system + user prompt per request`);
console.log(line(header));
console.log(`|${widths.map((w, i) => (i === 0 ? "-".repeat(w + 2) : "-".repeat(w + 1) + ":")).join("|")}|`);
for (const row of table) console.log(line(row));
const errors = rows.reduce((n, r) => n + r.errors, 0);
if (errors) console.log(`(${errors} error events — the numbers above are not valid)`);

// ---- one long thread -------------------------------------------------------------------------

/** The characters of a request's conversation block (between the tags). */
function conversationChars(record) {
  const prompt = record.body?.messages?.at(-1)?.content ?? "";
  return (prompt.split("<conversation>")[1]?.split("</conversation>")[0] ?? "").length;
}

async function longThread() {
  const llm = await startLlmServer({ fallback: fakeModel });
  clock = T0;
  const memory = await UserMemory.open({
    agent: "bench-long-thread",
    storage: "memory",
    autoProcess: false,
    llm: { baseUrl: llm.baseUrl, model: "bench", maxRetries: 0 },
  });
  const rand = rng(7);
  const history = [];
  const rows = [];
  let conversationTokens = 0;
  for (let k = 0; k < 200; k++) {
    const user =
      k % 3 === 0
        ? `I ${["work on", "care about", "want to learn"][k % 3 === 0 ? (k / 3) % 3 : 0]} topic ${k} (${Math.floor(rand() * 1000)})`
        : `What about step ${k}? ${Math.floor(rand() * 100)} units?`;
    const assistant = filler.repeat(2 + Math.floor(rand() * 4)).trim();
    history.push({ role: "user", content: user }, { role: "assistant", content: assistant });
    // The conversation's own tokens: each message as the prompt shows it (cut to 1000 characters).
    conversationTokens += Math.ceil((Math.min(user.length, 1000) + Math.min(assistant.length, 1000)) / 4);
    clock += 5_000;
    if ((k + 1) % 50 === 0) {
      const before = llm.requests.length;
      memory.observe("long", history);
      await memory.flush();
      const sent = llm.requests.slice(before);
      rows.push({
        turns: k + 1,
        calls: sent.length,
        tokens: sent.reduce((n, r) => n + promptTokens(r), 0),
        overhead: sent.reduce((n, r) => n + promptTokens(r) - Math.ceil(conversationChars(r) / 4), 0),
      });
    }
  }
  const facts = (await memory.get()).facts.length;
  await memory.close();
  await llm.close();
  return { rows, conversationTokens, facts };
}

const long = await longThread();
const total = long.rows.reduce((n, r) => n + r.tokens, 0);
const overhead = long.rows.reduce((n, r) => n + r.overhead, 0);
const calls = long.rows.reduce((n, r) => n + r.calls, 0);
console.log("");
console.log(
  `one thread of 200 turns, observed whole and flushed every 50 turns (conversation: ${long.conversationTokens.toLocaleString("en-US")} tokens)`,
);
console.log("| after turn | calls | prompt tokens sent | of which instructions + memory |");
console.log("|-----------:|------:|-------------------:|-------------------------------:|");
for (const r of long.rows)
  console.log(
    `| ${String(r.turns).padStart(10)} | ${String(r.calls).padStart(5)} | ${r.tokens.toLocaleString("en-US").padStart(18)} | ${r.overhead.toLocaleString("en-US").padStart(30)} |`,
  );
const bound = long.conversationTokens + overhead;
console.log(
  `total ${total.toLocaleString("en-US")} tokens in ${calls} calls = ${(total / bound).toFixed(2)} × (conversation + one prompt overhead per call = ${bound.toLocaleString("en-US")}); ${long.facts} facts`,
);
