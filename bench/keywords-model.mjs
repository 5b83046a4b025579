// Hidden search keywords written by a real model (issue 24): for each fact of the long-horizon
// set (tests/data/longhorizon.json), the local model is shown the user turn the fact comes from
// and the fact, and asked for a few search keywords the conversation implies but the fact does
// not say (a synonym, the other language's word), as JSON. The replies go to a JSON Lines file,
// one fact a line ({ user, id, keywords, raw, ms, tokens }), appended as they come, so a run
// that is stopped resumes where it was; `examples/eval_relevance.rs --keywords-file FILE` then
// measures lexical recall with them (docs/relevance.md).
//
//   node bench/keywords-model.mjs                                  # wang (zh, report half), maya (en, tune half), Qwen 0.5B
//   node bench/keywords-model.mjs --users rosa,wang,maya --model smollm2 --out FILE
//
// CPU only and slow (a few seconds a fact on two busy cores): run it in the background.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MODELS, startLlamaServer } from "../tests/helpers/llama-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const users = opt("users", "wang,maya").split(",");
const modelName = opt("model", "qwen");
const out = opt("out", join(root, "target", "eval", `keywords-${modelName}.jsonl`));
const set = JSON.parse(readFileSync(join(root, "tests/data/longhorizon.json"), "utf8"));

// The instruction a keywords field in the extraction prompt would carry, on its own.
const SYSTEM =
  "You write search keywords for a memory of facts about a user. Given what the user said and " +
  'one fact taken from it, reply with JSON {"keywords": [...]}: at most 5 single words a later ' +
  "question about this fact might use but the fact itself does not contain: synonyms, broader " +
  "or narrower words, the English word for a Chinese one and the Chinese word for an English " +
  'one (e.g. "Postgres" for "PostgreSQL", "狗" for "dog"). No words that are already in the fact.';

const done = new Set();
if (existsSync(out))
  for (const line of readFileSync(out, "utf8").split("\n").filter(Boolean)) done.add(JSON.parse(line).id);
mkdirSync(dirname(out), { recursive: true });

const llm = await startLlamaServer({ model: MODELS[modelName], threads: 2, context: 2048 });
try {
  for (const u of users.map((id) => set.users.find((u) => u.id === id)).filter(Boolean)) {
    for (const s of u.sessions) {
      for (const o of s.observations) {
        if (done.has(o.id)) continue;
        const turn = s.turns[o.turn]?.content ?? "";
        const t0 = Date.now();
        const res = await fetch(`${llm.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: llm.model,
            temperature: 0,
            max_tokens: 60,
            response_format: { type: "json_object" },
            messages: [
              { role: "system", content: SYSTEM },
              { role: "user", content: `The user said: ${turn}\nThe fact: ${o.content}` },
            ],
          }),
          signal: AbortSignal.timeout(120_000),
        });
        const body = await res.json();
        const raw = body.choices?.[0]?.message?.content ?? "";
        let keywords = [];
        try {
          const v = JSON.parse(raw).keywords;
          if (Array.isArray(v)) keywords = v.filter((k) => typeof k === "string" && k.trim()).map((k) => k.trim());
        } catch {
          // an invalid reply is kept as no keywords (the raw text stays in the file)
        }
        const line = { user: u.id, id: o.id, keywords, raw, ms: Date.now() - t0, tokens: body.usage };
        appendFileSync(out, JSON.stringify(line) + "\n");
        process.stdout.write(`${o.id} ${JSON.stringify(keywords)} ${line.ms} ms\n`);
      }
    }
  }
} finally {
  await llm.close();
}
