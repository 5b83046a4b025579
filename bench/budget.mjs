// Output tokens per extraction with and without the reply budget and streaming, on the
// reply corpus (tests/fixtures/replies/) played by a model emulation: each reply is
// "generated" token by token (o200k tokens, js-tiktoken), up to the request's max_tokens
// (then finish_reason "length") or an 8192-token context; streamed when asked, and a
// generation stops when the client hangs up. Two runaway models are added: one that runs
// on with whitespace after its delta (grammar-constrained llama.cpp does that) and one whose
// object never closes (it keeps adding facts).
//
//   node bench/budget.mjs
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";
import { UserMemory } from "user-memory";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = join(root, "tests/fixtures/replies");
const enc = new Tiktoken(o200k);
const CONTEXT = 8192;

const replies = readdirSync(dir)
  .filter((f) => f !== "manifest.json" && !f.endsWith(".bin"))
  .map((f) => [f, readFileSync(join(dir, f), "utf8")]);
const delta = JSON.stringify({ newFacts: [{ content: "Lives in Lisbon", category: "context", confidence: 0.9 }] });
replies.push(["runaway: whitespace after the delta", delta + "\n ".repeat(CONTEXT)]);
const fact = JSON.stringify({ content: "Likes coffee", category: "preference", confidence: 0.9 });
replies.push([
  "runaway: an object that never closes",
  `{"newFacts": [${Array.from({ length: 800 }, () => fact).join(", ")}`,
]);

/** The text as token pieces (each piece the text one more token adds). */
function pieces(text) {
  const ids = enc.encode(text).slice(0, CONTEXT);
  const out = [];
  let prev = "";
  for (let i = 1; i <= ids.length; i++) {
    const now = enc.decode(ids.slice(0, i));
    out.push(now.slice(prev.length));
    prev = now;
  }
  return out;
}
const tokenized = replies.map(([name, text]) => [name, pieces(text)]);

let current;
let generated = 0;
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    const request = JSON.parse(body);
    const all = current;
    const limit = Math.min(request.max_tokens ?? CONTEXT, all.length);
    const finish = limit < all.length || all.length >= CONTEXT ? "length" : "stop";
    if (!request.stream) {
      generated += limit;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          choices: [
            { index: 0, message: { role: "assistant", content: all.slice(0, limit).join("") }, finish_reason: finish },
          ],
          usage: { prompt_tokens: 0, completion_tokens: limit },
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    let gone = false;
    res.on("close", () => (gone = true));
    res.on("error", () => {});
    for (let i = 0; i < limit && !gone; i++) {
      generated++;
      if (
        !res.write(
          `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: all[i] }, finish_reason: null }] })}\n\n`,
        )
      )
        await new Promise((r) => res.once("drain", r));
      // A model emits tokens over time: let the client read (and hang up) in between.
      if (i % 4 === 3) await new Promise((r) => setImmediate(r));
    }
    if (!gone) {
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: finish }] })}\n\n`);
      res.end("data: [DONE]\n\n");
    }
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const baseUrl = `http://127.0.0.1:${server.address().port}/v1`;

const configs = [
  ["no budget, not streamed (before)", { maxTokens: null, stream: false }],
  ["maxTokens 1024, not streamed", { stream: false }],
  ["maxTokens 1024, streamed (default)", {}],
];
console.log(
  `${tokenized.length} replies (${tokenized.length - 2} from the corpus, 2 runaway models); output tokens generated per extraction\n`,
);
console.log("| configuration | corpus: mean / max | runaway whitespace | never-closing object | applied |");
console.log("|---|--:|--:|--:|--:|");
for (const [label, llmOptions] of configs) {
  const memory = await UserMemory.open({
    agent: `budget-${label}`,
    storage: "memory",
    autoProcess: false,
    maxAttempts: 100,
    llm: { baseUrl, model: "emulated", maxRetries: 0, jsonMode: false, ...llmOptions },
  });
  const counts = [];
  let applied = 0;
  for (const [, p] of tokenized) {
    current = p;
    generated = 0;
    await memory.observe("t", [
      { role: "user", content: "I live in Lisbon" },
      { role: "assistant", content: "Nice." },
    ]);
    const r = await memory.flush().catch(() => ({ processed: [] }));
    applied += r.processed.length;
    // Let a cancelled stream's server loop notice the hang-up.
    await new Promise((r) => setTimeout(r, 5));
    counts.push(generated);
  }
  await memory.close();
  const corpus = counts.slice(0, -2);
  const mean = corpus.reduce((a, b) => a + b, 0) / corpus.length;
  console.log(
    `| ${label} | ${mean.toFixed(0)} / ${Math.max(...corpus)} | ${counts.at(-2)} | ${counts.at(-1)} | ${applied} of ${counts.length} |`,
  );
}
server.close();
