// Which structured-output schema (and output-format text) makes a small local model learn:
// each variant sends its own JSON schema to a real model under grammar-constrained decoding
// and turns the reply into the library's delta, which the built package then parses and
// applies as usual (the `llm` option as a function, so every gate runs). Prints per variant
// the expected facts of tests/data/conversations.json captured, facts stored where none
// belong, the empty replies and the output tokens.
//
//   nice -n 10 node bench/schema-variants.mjs --local qwen [--only id,id] [--variants a,b] [--json FILE]
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UserMemory, DELTA_SCHEMA } from "user-memory";
import { MODELS, startLlamaServer } from "../tests/helpers/llama-server.mjs";
import { systemPrompt } from "./prompt-tokens.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const set = JSON.parse(readFileSync(join(root, "tests/data/conversations.json"), "utf8"));
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const only = opt("only")?.split(",");
const conversations = set.conversations.filter((c) => !only || only.includes(c.id));

const SECTIONS = [
  "workContext",
  "personalContext",
  "topOfMind",
  "recentMonths",
  "earlierContext",
  "longTermBackground",
];
const GROUP = Object.fromEntries(SECTIONS.map((s, i) => [s, i < 3 ? "user" : "history"]));
const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];
const fact = (props) => ({
  type: "object",
  properties: props,
  required: Object.keys(props),
  additionalProperties: false,
});
const obj = fact;
const arr = (items) => ({ type: "array", items });
const str = { type: "string" };

const factFull = fact({
  content: str,
  category: { type: "string", enum: CATEGORIES },
  confidence: { type: "number" },
});
const removal = obj({ id: str, replacementFactIndex: { type: ["integer", "null"] } });
const sectionList = arr(obj({ section: { type: "string", enum: SECTIONS }, summary: str }));

/** sections: [{section, summary}] → user/history groups. */
function groups(reply) {
  const out = { ...reply };
  delete out.sections;
  for (const s of reply.sections ?? []) {
    const g = GROUP[s.section];
    if (!g) continue;
    out[g] ??= {};
    out[g][s.section] = { summary: s.summary };
  }
  return out;
}

// The default prompt before this change (HEAD's, or --base REV) and this tree's.
const OLD_PROMPT = systemPrompt(opt("base", "HEAD"));
const NEW_PROMPT = systemPrompt("WORKTREE");
const VARIANTS = {
  current: { schema: DELTA_SCHEMA, convert: (r) => r },
  oldSchemaOldPrompt: { schema: DELTA_SCHEMA, convert: (r) => r, system: () => OLD_PROMPT },
  factsFirstNewPrompt: {
    system: () => NEW_PROMPT,
    schema: obj({
      newFacts: arr(factFull),
      factsToRemove: arr(removal),
      factsToReinforce: arr(str),
      sections: sectionList,
    }),
    convert: groups,
  },
  factsFirst: {
    system: () => OLD_PROMPT,
    schema: obj({
      newFacts: arr(factFull),
      factsToRemove: arr(removal),
      factsToReinforce: arr(str),
      sections: sectionList,
    }),
    convert: groups,
  },
  factsOnlyFirst: {
    schema: obj({
      newFacts: arr(fact({ content: str, category: { type: "string", enum: CATEGORIES } })),
      factsToRemove: arr(removal),
      factsToReinforce: arr(str),
      sections: sectionList,
    }),
    convert: (r) => groups({ ...r, newFacts: r.newFacts.map((f) => ({ ...f, confidence: 0.9 })) }),
  },
  userSaid: {
    // A first field the model must write: what the user said about themself, in a few words each.
    schema: obj({
      userSaysAboutThemself: arr(str),
      newFacts: arr(factFull),
      factsToRemove: arr(removal),
      factsToReinforce: arr(str),
      sections: sectionList,
    }),
    convert: (r) => {
      const out = groups(r);
      delete out.userSaysAboutThemself;
      return out;
    },
  },
};

// The prompt for a first list of what the user said: the default prompt with its newFacts line
// preceded by the list's own, and the examples showing it.
const SAID_LINE =
  "- userSaid: every lasting thing the user says about themself (job, city, projects, tools, tastes, plans, family), " +
  "each a few words as the user wrote them, also in a message that asks something else; [] when the user says none.\n";
function saidPrompt(system, key = "userSaid") {
  return system
    .replace("- newFacts:", SAID_LINE.replace("userSaid", key) + "- newFacts:")
    .replace(
      '-> {"newFacts":[{"content":"Teaches maths"',
      `-> {"${key}":["I teach maths","in Porto"],"newFacts":[{"content":"Teaches maths"`,
    )
    .replaceAll('-> {"newFacts":[]}', `-> {"${key}":[],"newFacts":[]}`)
    .replace(
      '-> {"newFacts":[{"content":"Uses pnpm"',
      `-> {"${key}":["I use pnpm"],"newFacts":[{"content":"Uses pnpm"`,
    );
}
/** userSaid strings → new facts (an upper bound: the library's salvage would gate them). */
const saidToFacts = (key) => (r) => {
  const out = groups(r);
  delete out[key];
  const contents = new Set(out.newFacts.map((f) => f.content));
  for (const s of r[key] ?? [])
    if (!contents.has(s)) out.newFacts.push({ content: s, category: "context", confidence: 0.8 });
  return out;
};
const SAID = (key, extra = {}) =>
  obj({
    [key]: { type: "array", items: str, ...extra },
    newFacts: arr(factFull),
    factsToRemove: arr(removal),
    factsToReinforce: arr(str),
    sections: sectionList,
  });
Object.assign(VARIANTS, {
  jsonObject: { format: { type: "json_object" }, convert: (r) => r },
  newFactsMin1: {
    schema: obj({
      newFacts: { type: "array", items: factFull, minItems: 1 },
      factsToRemove: arr(removal),
      factsToReinforce: arr(str),
      sections: sectionList,
    }),
    convert: groups,
  },
  said: { system: (s) => saidPrompt(s), schema: SAID("userSaid"), convert: saidToFacts("userSaid") },
  saidMin1: {
    system: (s) => saidPrompt(s),
    schema: SAID("userSaid", { minItems: 1 }),
    convert: saidToFacts("userSaid"),
  },
  saidNoPrompt: { schema: SAID("userSaid"), convert: saidToFacts("userSaid") },
  aboutTheUser: {
    system: (s) => saidPrompt(s, "aboutTheUser"),
    schema: SAID("aboutTheUser"),
    convert: saidToFacts("aboutTheUser"),
  },
});

/** POSTs JSON and reads the JSON answer, with no time limit (fetch gives up on headers after 5 minutes). */
function post(url, body) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => {
        try {
          resolve(JSON.parse(text));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

const names = opt("variants", Object.keys(VARIANTS).join(",")).split(",");
const local = await startLlamaServer({ model: MODELS[opt("local", "qwen")] ?? opt("local"), threads: 2 });
const matches = (content, expect) =>
  expect.match.every((alts) => alts.split("|").some((a) => content.toLowerCase().includes(a.toLowerCase())));

const results = {};
let agents = 0;
try {
  for (const name of names) {
    const v = VARIANTS[name];
    const rows = [];
    for (const conv of conversations) {
      let raw = "";
      let usage = null;
      let finish = null;
      const started = Date.now();
      const memory = await UserMemory.open({
        agent: `variants-${process.pid}-${++agents}`,
        storage: "memory",
        debounceMs: 3_600_000,
        llm: async ({ system, prompt }) => {
          const body = await post(`${local.baseUrl}/chat/completions`, {
            model: local.model,
            messages: [
              { role: "system", content: v.system ? v.system(system) : system },
              { role: "user", content: prompt },
            ],
            temperature: 0,
            max_tokens: 1024,
            response_format: v.format ?? {
              type: "json_schema",
              json_schema: { name: "memory_delta", strict: true, schema: v.schema },
            },
          });
          raw = body.choices?.[0]?.message?.content ?? "";
          usage = body.usage;
          finish = body.choices?.[0]?.finish_reason;
          try {
            return JSON.stringify(v.convert(JSON.parse(raw)));
          } catch {
            return raw;
          }
        },
      });
      const processed = [];
      memory.on("processed", (e) => processed.push(e));
      if (conv.memory)
        await memory.import({
          version: "1.0",
          lastUpdated: "",
          user: {},
          history: {},
          facts: conv.memory.map((f) => ({
            confidence: 0.9,
            createdAt: "2026-01-01T00:00:00Z",
            source: "earlier",
            ...f,
          })),
        });
      await memory.observe(conv.id, conv.messages);
      const result = await memory.flush().catch((e) => ({ error: e }));
      const doc = await memory.get();
      await memory.close();
      const before = new Set((conv.memory ?? []).map((f) => f.id));
      const added = doc.facts.filter((f) => !before.has(f.id)).map((f) => f.content);
      const row = {
        id: conv.id,
        seconds: (Date.now() - started) / 1000,
        tokens: usage?.completion_tokens ?? 0,
        finish,
        captured: conv.expect.filter((e) => added.some((f) => matches(f, e))).length,
        expected: conv.expect.length,
        added,
        sections: Object.entries({ ...doc.user, ...doc.history })
          .filter(([, s]) => s.summary)
          .map(([k, s]) => `${k}: ${s.summary}`),
        skipped: processed.flatMap((p) => p.skipped.map((s) => s.reason)),
        error: result.error ? `${result.error.code}: ${result.error.message}`.slice(0, 160) : null,
        raw,
      };
      rows.push(row);
      console.log(
        `${name.padEnd(14)} ${conv.id.padEnd(22)} ${row.seconds.toFixed(0).padStart(4)} s ${String(row.tokens).padStart(4)} tok ${row.captured}/${row.expected} stored ${JSON.stringify(added)} ${row.skipped.join(",")} ${row.error ?? ""}`,
      );
      console.log(`    ${raw.replace(/\s+/g, " ").slice(0, 400)}`);
    }
    results[name] = rows;
    if (opt("json")) writeFileSync(opt("json"), JSON.stringify(results, null, 2));
  }
} finally {
  await local.close();
}
console.log("\n| variant | expected facts captured | facts where none belong | empty replies | median output tokens |");
console.log("|---|--:|--:|--:|--:|");
for (const [name, rows] of Object.entries(results)) {
  const quiet = rows.filter((r) => !r.expected);
  const tokens = rows.map((r) => r.tokens).sort((a, b) => a - b);
  console.log(
    `| ${name} | ${rows.reduce((n, r) => n + r.captured, 0)}/${rows.reduce((n, r) => n + r.expected, 0)} | ${quiet.reduce((n, r) => n + r.added.length, 0)} | ${rows.filter((r) => !r.added.length && !r.sections.length).length}/${rows.length} | ${tokens[Math.floor(tokens.length / 2)]} |`,
  );
}
