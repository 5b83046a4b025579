// Prompt tokens of one extraction as memory grows, through the built package at the
// defaults: a memory of N imported facts, a two-line conversation observed and flushed, the
// extraction LLM a function that records the request. Counted with cl100k_base (js-tiktoken)
// over the system prompt and the prompt together. "whole memory" is the same run with
// `extractionMemoryTokens` set past the memory's size, which is what every extraction sent
// before the extraction budget (the whole memory pasted in).
//
//   node scripts/build.mjs && node bench/extraction-tokens.mjs [sizes…]   (default 100 1000 10000)
import { getEncoding } from "js-tiktoken";
import { UserMemory } from "user-memory";

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [100, 1000, 10000];
const cl100k = getEncoding("cl100k_base");

// Deterministic facts: a seeded PRNG over short English sentences.
function prng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}
const verbs = [
  "Uses",
  "Prefers",
  "Likes",
  "Works on",
  "Learned",
  "Visited",
  "Plays",
  "Reads about",
  "Cooks",
  "Collects",
];
const things =
  "Rust Go Python TypeScript Kubernetes Postgres Redis jazz chess tennis climbing sourdough ramen Lisbon Kyoto Berlin Porto cello violin pottery sailing astronomy gardening photography marathons poetry".split(
    " ",
  );
const extras = [
  "on weekends",
  "at work",
  "since 2019",
  "with friends",
  "every morning",
  "for a side project",
  "in the evening",
  "when travelling",
];
function facts(n) {
  const r = prng(7);
  const pick = (a) => a[Math.floor(r() * a.length)];
  return Array.from({ length: n }, (_, i) => ({
    content: `${pick(verbs)} ${pick(things)} and ${pick(things)} ${pick(extras)} (${i})`,
    category: pick(["preference", "knowledge", "context", "behavior", "goal"]),
    confidence: 0.7 + r() * 0.3,
    createdAt: new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString(),
    source: i % 50 === 0 ? "manual" : "t0",
  }));
}
const conversation = [
  { role: "user", content: "I started taking cello lessons in Porto last week, and I still climb on weekends." },
  { role: "assistant", content: "Lovely! How are the lessons going?" },
];

async function measure(n, extractionMemoryTokens) {
  let request = null;
  const memory = await UserMemory.open({
    agent: `bench-${n}-${extractionMemoryTokens ?? "default"}`,
    storage: "memory",
    maxFacts: Math.max(n, 10_000),
    ...(extractionMemoryTokens ? { extractionMemoryTokens } : {}),
    llm: async (req) => ((request = req), JSON.stringify({ newFacts: [] })),
  });
  await memory.import({
    version: "1.0",
    lastUpdated: "",
    user: { workContext: { summary: "Software engineer who plays the cello.", updatedAt: "" } },
    history: {},
    facts: facts(n),
  });
  await memory.observe("t1", conversation);
  await memory.flush();
  await memory.close();
  const memoryPart = request.prompt.slice(0, request.prompt.indexOf("</current_memory>"));
  return {
    tokens: cl100k.encode(request.system).length + cl100k.encode(request.prompt).length,
    shown: (memoryPart.match(/"id":/g) ?? []).length,
  };
}

console.log(
  "| facts in memory | whole memory: prompt tokens | default (extractionMemoryTokens 2000): prompt tokens | facts shown |",
);
console.log("|---|---|---|---|");
for (const n of SIZES) {
  const before = await measure(n, 1e9);
  const after = await measure(n);
  console.log(`| ${n} | ${before.tokens} | ${after.tokens} | ${after.shown} |`);
}
