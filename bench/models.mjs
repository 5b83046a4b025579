// Extraction by real models: the conversations of tests/data/conversations.json (English,
// Chinese and both) run through the built package against an OpenAI-compatible endpoint,
// once per output mode (`jsonMode: false` / `true` / `"schema"`), one extraction each.
// Prints per mode: the valid-delta rate (extractions that committed, of all), output tokens
// and seconds per extraction, facts stored per conversation, how many expected facts were
// captured and expected removals made, and the facts stored where nothing should be.
//
//   OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=qwen2.5:7b-instruct node bench/models.mjs   # e.g. Ollama
//   node bench/models.mjs --local smollm2      # SmolLM2-135M-Instruct (scripts/setup.sh --all)
//   node bench/models.mjs --local qwen         # Qwen2.5-Coder-0.5B-Instruct (scripts/setup.sh --all)
//   node bench/models.mjs --scripted           # no model: output tokens of the ideal replies, lean vs the old full shape
//   options: --modes schema,json,text  --only id,id  --save-replies (into tests/fixtures/replies)  --json FILE
//            --max-tokens N (llm.maxTokens; a cut-off reply is asked again with 4 × N)
//            --prompt REV (the default prompt of git revision REV, e.g. 469e9f3^, as custom instructions:
//            the "before" of a prompt change)
//            --no-hints (the proxy strips the signal-hint lines from each prompt: the "before" of the hints)
//
// Between the library and the endpoint sits a recording proxy on 127.0.0.1: it reads every
// reply (streamed or not) as the library received it, with the endpoint's token usage, so
// the output tokens are the model's own counts and --save-replies can add every distinct
// real reply to the parser's corpus with the outcome the parser gives it
// (examples/reply_outcome.rs writes the manifest entries).
//
// Token counts of --scripted are cl100k_base (js-tiktoken). The old shape is what the prompt
// before the lean delta demanded ("exactly this shape": all six sections, empty ones with
// shouldUpdate false, and both lists), laid out as its example was; the lean reply leaves
// out what did not change, compact like the new examples.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getEncoding } from "js-tiktoken";
import { UserMemory } from "user-memory";
import { MODELS, startLlamaServer } from "../tests/helpers/llama-server.mjs";
import { systemPrompt } from "./prompt-tokens.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const set = JSON.parse(readFileSync(join(root, "tests/data/conversations.json"), "utf8"));
const cl100k = getEncoding("cl100k_base");
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const flag = (name) => args.includes(`--${name}`);
const only = opt("only")?.split(",");
const conversations = set.conversations.filter((c) => !only || only.includes(c.id));
const MODE = { text: false, json: true, schema: "schema" };
// An older revision's whole system prompt; it mentions newFacts, so nothing is appended to it.
const promptOption = opt("prompt") ? { instructions: systemPrompt(opt("prompt")) } : undefined;

// ---- matching what was stored ------------------------------------------------------------

/** Whether `content` matches an expectation: every `match` entry occurs (`a|b`: either). */
const matches = (content, expect) =>
  expect.match.every((alts) => alts.split("|").some((a) => content.toLowerCase().includes(a.toLowerCase())));

/** Scores one conversation's outcome: stored facts, expected ones captured, removals. */
function score(conv, doc) {
  const before = new Set((conv.memory ?? []).map((f) => f.id));
  const added = doc.facts.filter((f) => !before.has(f.id));
  const kept = new Set(doc.facts.map((f) => f.id));
  const removed = [...before].filter((id) => !kept.has(id));
  return {
    added: added.map((f) => f.content),
    captured: conv.expect.filter((e) => added.some((f) => matches(f.content, e))).length,
    removedExpected: (conv.remove ?? []).filter((id) => removed.includes(id)).length,
    removedOther: removed.filter((id) => !(conv.remove ?? []).includes(id)).length,
    // Signals: a correction stored as one (with what was wrong), the confirmed fact confirmed.
    corrections: added.filter((f) => f.category === "correction" && f.sourceError).length,
    reinforced: (conv.reinforce ?? []).filter((id) => doc.facts.find((f) => f.id === id)?.lastConfirmedAt).length,
    sections: Object.entries({ ...doc.user, ...doc.history })
      .filter(([, s]) => s.summary)
      .map(([k]) => k),
  };
}

// ---- the recording proxy -----------------------------------------------------------------

/** The signal hints the library adds after the conversation (src/extract/signals.rs). */
const HINT = /^Hint: the user (corrects|confirms) something in the new messages/m;
const HINT_LINES = /^Hint: the user (corrects|confirms) something in the new messages.*\n/gm;

/** Forwards to `target` (…/v1) and records each reply's text, finish reason and usage. */
async function startProxy(target) {
  const log = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      const abort = new AbortController();
      res.on("close", () => abort.abort());
      const body = JSON.parse(raw || "{}");
      const hinted = body.messages?.some((m) => HINT.test(m.content ?? ""));
      if (flag("no-hints") && hinted) {
        for (const m of body.messages) if (typeof m.content === "string") m.content = m.content.replace(HINT_LINES, "");
        raw = JSON.stringify(body);
      }
      const entry = {
        hinted,
        mode: body.response_format?.type ?? "text",
        stream: body.stream === true,
        reply: "",
        finish: null,
        usage: null,
        status: 0,
      };
      if (!log.length) log.system = body.messages?.find((m) => m.role === "system")?.content ?? "";
      log.push(entry);
      try {
        const headers = { "content-type": "application/json" };
        if (req.headers.authorization) headers.authorization = req.headers.authorization;
        const up = await fetch(`${target}${req.url.replace(/^\/v1/, "")}`, {
          method: "POST",
          headers,
          body: raw,
          signal: abort.signal,
        });
        entry.status = up.status;
        res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
        const decoder = new TextDecoder();
        let text = "";
        let pending = "";
        for await (const chunk of up.body) {
          res.write(chunk);
          const s = decoder.decode(chunk, { stream: true });
          text += s;
          if (!entry.stream) continue;
          pending += s;
          let nl;
          while ((nl = pending.indexOf("\n")) >= 0) {
            const line = pending.slice(0, nl).trim();
            pending = pending.slice(nl + 1);
            if (!line.startsWith("data:") || line === "data: [DONE]") continue;
            try {
              const ev = JSON.parse(line.slice(5));
              entry.reply += ev.choices?.[0]?.delta?.content ?? "";
              entry.finish = ev.choices?.[0]?.finish_reason ?? entry.finish;
              entry.usage = ev.usage ?? entry.usage;
            } catch {}
          }
        }
        if (!entry.stream || !up.headers.get("content-type")?.includes("event-stream")) {
          try {
            const json = JSON.parse(text);
            entry.reply = json.choices?.[0]?.message?.content ?? "";
            entry.finish = json.choices?.[0]?.finish_reason ?? null;
            entry.usage = json.usage ?? null;
            if (up.status >= 400) entry.error = text.slice(0, 300);
          } catch {}
        }
        res.end();
      } catch (e) {
        entry.error = String(e.message ?? e);
        if (!res.headersSent) res.writeHead(502);
        res.end();
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    log,
    close: () => new Promise((r) => server.close(r)),
  };
}

// ---- one run -----------------------------------------------------------------------------

let agents = 0;
async function extract(conv, mode, endpoint, proxy) {
  const memory = await UserMemory.open({
    agent: `bench-${process.pid}-${++agents}`,
    storage: "memory",
    debounceMs: 3_600_000,
    // A slow CPU model: a long wait without data, no retries of a timed-out request.
    llm: {
      baseUrl: proxy.baseUrl,
      apiKey: endpoint.apiKey,
      model: endpoint.model,
      jsonMode: MODE[mode],
      timeoutMs: 900_000,
      maxRetries: 0,
      ...(opt("max-tokens") && { maxTokens: Number(opt("max-tokens")) }),
    },
    ...(promptOption && { prompt: promptOption }),
  });
  const events = [];
  memory.on("processed", (e) => events.push(["processed", e]));
  memory.on("error", (e) => events.push(["error", e]));
  if (conv.memory) {
    await memory.import({
      version: "1.0",
      lastUpdated: "",
      user: {},
      history: {},
      facts: conv.memory.map((f) => ({ confidence: 0.9, createdAt: "2026-01-01T00:00:00Z", source: "earlier", ...f })),
    });
  }
  const from = proxy.log.length;
  await memory.observe(conv.id, conv.messages);
  const started = Date.now();
  const result = await memory.flush().catch((e) => ({ processed: [], failed: [conv.id], error: e }));
  const seconds = (Date.now() - started) / 1000;
  const calls = proxy.log.slice(from);
  const processed = events.find(([k]) => k === "processed")?.[1];
  const error = result.error ?? events.find(([k]) => k === "error")?.[1];
  const doc = await memory.get();
  await memory.close();
  return {
    id: conv.id,
    mode,
    valid: result.processed.length === 1,
    error: error ? `${error.code}: ${error.message}`.slice(0, 240) : null,
    seconds,
    calls: calls.length,
    hinted: calls.filter((c) => c.hinted).length,
    outputTokens: calls.reduce((n, c) => n + (c.usage?.completion_tokens ?? cl100k.encode(c.reply).length), 0),
    usageReported: calls.every((c) => c.usage),
    skipped: processed?.skipped.map((s) => s.reason) ?? [],
    replies: calls.map((c) => ({ text: c.reply, finish: c.finish, status: c.status, error: c.error })),
    ...score(conv, doc),
  };
}

const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : 0;
};

function summarize(runs) {
  const ran = conversations.filter((c) => runs.some((r) => r.id === c.id));
  const expected = ran.reduce((n, c) => n + c.expect.length, 0);
  const removals = ran.reduce((n, c) => n + (c.remove?.length ?? 0), 0);
  const quiet = new Set(ran.filter((c) => !c.expect.length).map((c) => c.id));
  return {
    valid: `${runs.filter((r) => r.valid).length}/${runs.length}`,
    outputTokens: `${mean(runs.map((r) => r.outputTokens)).toFixed(0)} (median ${median(runs.map((r) => r.outputTokens))})`,
    seconds: `${mean(runs.map((r) => r.seconds)).toFixed(1)} (median ${median(runs.map((r) => r.seconds)).toFixed(1)})`,
    facts: mean(runs.map((r) => r.added.length)).toFixed(2),
    captured: `${runs.reduce((n, r) => n + r.captured, 0)}/${expected}`,
    removed: `${runs.reduce((n, r) => n + r.removedExpected, 0)}/${removals}`,
    noise: runs.filter((r) => quiet.has(r.id)).reduce((n, r) => n + r.added.length, 0),
    wrongRemovals: runs.reduce((n, r) => n + r.removedOther, 0),
    corrections: `${runs.reduce((n, r) => n + r.corrections, 0)}/${ran.filter((c) => c.signal === "correction").length}`,
    reinforced: `${runs.reduce((n, r) => n + r.reinforced, 0)}/${ran.reduce((n, c) => n + (c.reinforce?.length ?? 0), 0)}`,
    hinted: runs.reduce((n, r) => n + r.hinted, 0),
  };
}

function table(rows) {
  console.log(
    "\n| mode | valid deltas | output tokens / extraction | s / extraction | facts stored / conversation | expected facts captured | expected removals | facts stored where none belong | other facts removed |",
  );
  console.log("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const [mode, s] of rows)
    console.log(
      `| ${mode} | ${s.valid} | ${s.outputTokens} | ${s.seconds} | ${s.facts} | ${s.captured} | ${s.removed} | ${s.noise} | ${s.wrongRemovals} |`,
    );
  console.log(
    "\n| mode | calls with a signal hint | corrections stored with sourceError | confirmed facts reinforced |\n|---|--:|--:|--:|",
  );
  for (const [mode, s] of rows)
    console.log(
      `| ${mode}${flag("no-hints") ? " (hints stripped)" : ""} | ${s.hinted} | ${s.corrections} | ${s.reinforced} |`,
    );
}

// ---- --scripted: the ideal replies, old shape vs lean ------------------------------------

function scripted() {
  const keys = {
    user: ["workContext", "personalContext", "topOfMind"],
    history: ["recentMonths", "earlierContext", "longTermBackground"],
  };
  const rows = conversations.map((c) => {
    const facts = c.expect.map((e) => ({ content: e.fact, category: e.category, confidence: 0.9 }));
    const full = {};
    for (const [group, names] of Object.entries(keys)) {
      full[group] = Object.fromEntries(
        names.map((n) => [
          n,
          c.sections?.[n] ? { summary: c.sections[n], shouldUpdate: true } : { summary: "", shouldUpdate: false },
        ]),
      );
    }
    full.newFacts = facts;
    full.factsToRemove = c.remove ?? [];
    const lean = {};
    for (const [group, names] of Object.entries(keys)) {
      const changed = names.filter((n) => c.sections?.[n]);
      if (changed.length) lean[group] = Object.fromEntries(changed.map((n) => [n, { summary: c.sections[n] }]));
    }
    if (facts.length) lean.newFacts = facts;
    if (c.remove) lean.factsToRemove = c.remove.map((id) => ({ id, replacementFactIndex: 0 }));
    const t = (x, indent) => cl100k.encode(JSON.stringify(x, null, indent)).length;
    return { id: c.id, full: t(full, 2), fullCompact: t(full), lean: t(lean), leanIndented: t(lean, 2) };
  });
  console.log(
    `Ideal replies to the ${rows.length} conversations, cl100k_base tokens per extraction (mean / median / max):\n`,
  );
  console.log("| reply | mean | median | max |\n|---|--:|--:|--:|");
  for (const [label, k] of [
    ["old full shape, laid out as its example", "full"],
    ["old full shape, compact", "fullCompact"],
    ["lean, indented", "leanIndented"],
    ["lean, compact (as the new examples)", "lean"],
  ]) {
    const xs = rows.map((r) => r[k]);
    console.log(`| ${label} | ${mean(xs).toFixed(1)} | ${median(xs)} | ${Math.max(...xs)} |`);
  }
}

// ---- --save-replies: real replies into the parser's corpus -------------------------------

function saveReplies(runs, slug) {
  const dir = join(root, "tests/fixtures/replies");
  const manifestPath = join(dir, "manifest.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  const known = new Set(
    Object.keys(manifest)
      .filter((n) => existsSync(join(dir, n)))
      .map((n) => readFileSync(join(dir, n), "utf8")),
  );
  const fresh = [];
  for (const r of runs) {
    r.replies.forEach((reply, i) => {
      if (!reply.text || known.has(reply.text)) return;
      known.add(reply.text);
      const base = `real_${slug}_${r.mode}_${r.id}${r.replies.length > 1 ? `_${i + 1}` : ""}`;
      // A new reply to a conversation already in the corpus (another prompt or schema) is
      // kept beside the old one, never over it.
      let name = `${base}.txt`;
      for (let n = 2; existsSync(join(dir, name)); n++) name = `${base}_v${n}.txt`;
      writeFileSync(join(dir, name), reply.text);
      fresh.push(name);
    });
  }
  if (!fresh.length) return;
  const out = execFileSync(
    "cargo",
    ["run", "-q", "--example", "reply_outcome", "--", ...fresh.map((n) => join(dir, n))],
    { cwd: root, encoding: "utf8" },
  );
  // Appended as text, so the written entries keep their layout (and numbers as written).
  const entries = out
    .trim()
    .split("\n")
    .map(
      (line, i) => `  ${JSON.stringify(fresh[i])}: ${JSON.stringify(JSON.parse(line), null, 2).replace(/\n/g, "\n  ")}`,
    );
  const text = readFileSync(manifestPath, "utf8").trimEnd();
  writeFileSync(manifestPath, `${text.slice(0, -1).trimEnd()},\n${entries.join(",\n")}\n}\n`);
  console.log(`    saved ${fresh.join(", ")} into tests/fixtures/replies`);
}

// ---- main --------------------------------------------------------------------------------

if (flag("scripted")) {
  scripted();
  process.exit(0);
}

let local = null;
let endpoint;
if (opt("local")) {
  const path = MODELS[opt("local")] ?? opt("local");
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/setup.sh --all`);
  local = await startLlamaServer({
    model: path,
    threads: Number(opt("threads", 2)),
    context: Number(opt("context", 4096)),
  });
  endpoint = { baseUrl: local.baseUrl, model: local.model, apiKey: undefined };
} else {
  if (!process.env.OPENAI_BASE_URL)
    throw new Error(
      "set OPENAI_BASE_URL (and MODEL, OPENAI_API_KEY if needed), or pass --local smollm2|qwen|file.gguf",
    );
  endpoint = {
    baseUrl: process.env.OPENAI_BASE_URL.replace(/\/$/, ""),
    model: process.env.MODEL ?? "llama3.1",
    apiKey: process.env.OPENAI_API_KEY,
  };
}
const slug = (text) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
const replySlug = `${slug(endpoint.model).slice(0, 24).replace(/-+$/, "")}${promptOption ? `_prompt-${slug(opt("prompt"))}` : ""}`;
const proxy = await startProxy(endpoint.baseUrl);
const modes = opt("modes", "text,json,schema").split(",");
console.log(
  `${endpoint.model}: ${conversations.length} conversations × modes ${modes.join(", ")}${promptOption ? `, the prompt of ${opt("prompt")}` : ""}`,
);
const all = [];
const rows = [];
try {
  for (const mode of modes) {
    const runs = [];
    for (const conv of conversations) {
      const r = await extract(conv, mode, endpoint, proxy);
      runs.push(r);
      // Saved as they come: a long run stopped half-way keeps what it measured.
      if (flag("save-replies")) saveReplies([r], replySlug);
      if (opt("json"))
        writeFileSync(
          opt("json"),
          JSON.stringify(
            { model: endpoint.model, rows: [...rows, [mode, summarize(runs)]], runs: [...all, ...runs] },
            null,
            2,
          ),
        );
      console.log(
        `  ${mode.padEnd(6)} ${conv.id.padEnd(22)} ${r.valid ? "valid " : "FAILED"} ${r.seconds.toFixed(1).padStart(6)} s ${String(r.outputTokens).padStart(5)} tok ` +
          `stored ${JSON.stringify(r.added)}${r.skipped.length ? ` refused ${r.skipped.join(",")}` : ""}${r.error ? ` ${r.error}` : ""}`,
      );
    }
    rows.push([mode, summarize(runs)]);
    all.push(...runs);
  }
} finally {
  await proxy.close();
  await local?.close();
}
table(rows);
if (proxy.log.system)
  console.log(`\ninstructions (system prompt): ${cl100k.encode(proxy.log.system).length} cl100k_base tokens`);
