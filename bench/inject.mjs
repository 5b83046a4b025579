// Fact selection speed through the built package (Node), against a plain-JavaScript TF-IDF
// with the same CJK-aware tokens, in the same run.
//
//   node scripts/build.mjs && node bench/inject.mjs [sizes…]     (default 100 500 2000 10000)
//
// Facts are generated deterministically (a seeded PRNG over English and Chinese word lists,
// mixed in one fact sometimes). The query is a 3-message mixed conversation. Each cell is
// the median of many calls after a warm-up.
//
// * `inject()`  — `await memory.inject(messages)`: what an app calls before each model call
//                 (selection + rendering within the token budget).
// * `explain()` — `await memory.explain(messages)`: the diagnostic path (every fact scored,
//                 sorted, its line counted, and returned to JS as objects).
// * `JS TF-IDF` — the seed's design in plain JS: tokenise every fact and the query (words +
//                 CJK unigrams/bigrams), fit idf, cosine similarity, 0.6 × sim + 0.4 × conf,
//                 top 15 — refitted per call, as the seed does (it keeps no index).
// * `hybrid`    — `inject()` with an `embed` function (384-dimension pseudo-random vectors
//                 from a hash of the text, like multilingual-e5-small's size) once every fact
//                 has its vector. The query's vector comes from the instance's cache after
//                 the first call, so the time is the fusion's (dot products over the int8
//                 vectors, min-max, fusion, selection), without the embedding call itself.
import { performance } from "node:perf_hooks";
import { UserMemory } from "user-memory";

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [100, 500, 2000, 10000];

// --- deterministic facts ---------------------------------------------------------------
function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const EN =
  "writes go rust python services kafka postgres redis cache latency team lead startup berlin shanghai climbing bouldering bread sourdough coffee espresso cat rabbit garden running marathon piano guitar reading novels japanese chinese english spanish travel hiking camera film design figma typescript react vue kubernetes docker terraform budget salary mortgage daughter son wife husband doctor nurse teacher student exam thesis biology chemistry data pipeline spark airflow dashboard metrics backend frontend mobile android ios swift kotlin".split(
    " ",
  );
const ZH =
  "喜欢 不吃 正在 学习 工作 公司 项目 使用 数据 分析 缓存 服务 周末 跑步 爬山 烤面包 咖啡 兔子 猫 女儿 儿子 考试 论文 生物 化学 前端 后端 架构 性能 延迟 团队 上海 杭州 成都 北京 火锅 素食 旅行 摄影 钢琴 吉他 小说 日语 英语 预算 房贷 医生 护士 老师".split(
    " ",
  );
const CATS = ["preference", "knowledge", "context", "behavior", "goal"];

function makeFacts(n, seed = 42) {
  const r = prng(seed);
  const pick = (arr) => arr[Math.floor(r() * arr.length)];
  const facts = [];
  for (let i = 0; i < n; i++) {
    const words = 4 + Math.floor(r() * 9);
    const kind = r();
    let content;
    if (kind < 0.45) content = Array.from({ length: words }, () => pick(EN)).join(" ");
    else if (kind < 0.8) content = Array.from({ length: Math.ceil(words / 2) }, () => pick(ZH)).join("");
    else content = `${Array.from({ length: 3 }, () => pick(ZH)).join("")} ${pick(EN)} ${pick(EN)}${pick(ZH)}`;
    facts.push({
      id: `fact_${i.toString(16).padStart(8, "0")}`,
      content: `${content} ${i}`,
      category: pick(CATS),
      confidence: Math.round((0.5 + r() * 0.5) * 100) / 100,
      createdAt: "2026-01-01T00:00:00Z",
      source: "bench",
    });
  }
  return facts;
}

const MESSAGES = [
  { role: "user", content: "我想优化 kafka 服务的延迟，团队在上海" },
  { role: "assistant", content: "可以先看 consumer 的批量大小和 redis 缓存命中率。" },
  { role: "user", content: "Also my rabbit stopped eating, and I am training for a marathon in Berlin" },
];

// --- the plain-JS baseline ---------------------------------------------------------------
const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]/u;
function tokenize(text) {
  const out = [];
  for (const run of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    let word = "";
    let cjk = "";
    const flushCjk = () => {
      for (let i = 0; i < cjk.length; i++) {
        out.push(cjk[i]);
        if (i + 1 < cjk.length) out.push(cjk.slice(i, i + 2));
      }
      cjk = "";
    };
    for (const ch of run) {
      if (CJK.test(ch)) {
        if (word) (out.push(word), (word = ""));
        cjk += ch;
      } else {
        if (cjk) flushCjk();
        word += ch;
      }
    }
    if (word) out.push(word);
    if (cjk) flushCjk();
  }
  return out;
}

function tfidfTop(facts, messages, k = 15) {
  const docs = facts.map((f) => tokenize(f.content));
  const query = tokenize(messages.map((m) => m.content).join("\n"));
  const df = new Map();
  for (const d of [...docs, query]) for (const t of new Set(d)) df.set(t, (df.get(t) ?? 0) + 1);
  const n = docs.length + 1;
  const vec = (tokens) => {
    const tf = new Map();
    for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
    let norm = 0;
    for (const [t, c] of tf) {
      const w = c * (Math.log((1 + n) / (1 + df.get(t))) + 1);
      tf.set(t, w);
      norm += w * w;
    }
    return { tf, norm: Math.sqrt(norm) || 1 };
  };
  const q = vec(query);
  const scored = facts.map((f, i) => {
    const v = vec(docs[i]);
    let dot = 0;
    for (const [t, w] of q.tf) dot += w * (v.tf.get(t) ?? 0);
    const sim = dot / (q.norm * v.norm);
    return { i, score: 0.6 * sim + 0.4 * f.confidence };
  });
  scored.sort((a, b) => b.score - a.score);
  return scored.slice(0, k);
}

// --- a stand-in embedding model -----------------------------------------------------------
const DIMS = 384;
function fakeVector(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  const r = prng(h);
  const v = new Float32Array(DIMS);
  for (let i = 0; i < DIMS; i++) v[i] = r() * 2 - 1;
  return v;
}
const embed = { function: async (texts) => texts.map(fakeVector), batchSize: 256 };

// --- timing ------------------------------------------------------------------------------
async function median(fn, iterations) {
  for (let i = 0; i < Math.min(20, iterations); i++) await fn();
  const times = [];
  for (let i = 0; i < iterations; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const rows = [];
for (const n of SIZES) {
  const facts = makeFacts(n);
  // maxFacts above n: import() keeps at most maxFacts facts (100 by default), so without it
  // every row would measure 100 facts.
  const memory = await UserMemory.open({ agent: `bench-${n}`, storage: "memory", llm: async () => "{}", maxFacts: n });
  const doc = {
    version: "1.0",
    lastUpdated: "",
    facts,
    user: { workContext: { summary: "Backend engineer in Shanghai.", updatedAt: "" } },
    history: {},
  };
  await memory.import(doc);
  const held = (await memory.get()).facts.length;
  if (held !== n) throw new Error(`memory holds ${held} facts, not ${n}`);
  const block = await memory.inject(MESSAGES);
  if (!block.includes("<memory>")) throw new Error("inject returned no block");
  const iterations = n >= 10000 ? 60 : n >= 2000 ? 150 : 400;
  const inject = await median(() => memory.inject(MESSAGES), iterations);
  const explain = await median(() => memory.explain(MESSAGES), n >= 10000 ? 15 : Math.max(20, iterations / 4));
  const js = await median(() => tfidfTop(facts, MESSAGES), n >= 10000 ? 15 : Math.max(20, iterations / 4));
  await memory.close();

  const agent = `bench-hybrid-${n}`;
  const hybridMemory = await UserMemory.open({ agent, storage: "memory", llm: async () => "{}", embed, maxFacts: n });
  const t0 = performance.now();
  await hybridMemory.import(doc);
  for (;;) {
    const e = await hybridMemory.explain(MESSAGES);
    if (e.facts.every((f) => f.dense !== null)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const fill = performance.now() - t0;
  const stored = (await UserMemory.inspect({ agent, storage: "memory" })).vectors.length;
  const hybrid = await median(() => hybridMemory.inject(MESSAGES), iterations);
  const hybridExplain = await median(
    () => hybridMemory.explain(MESSAGES),
    n >= 10000 ? 15 : Math.max(20, iterations / 4),
  );
  await hybridMemory.close();
  rows.push({ n, inject, explain, js, hybrid, hybridExplain, fill, stored });
}

const ms = (x) => (x < 1 ? `${(x * 1000).toFixed(0)} µs` : `${x.toFixed(2)} ms`);
console.log(`node ${process.version}, ${process.arch}; medians per call`);
console.log("| facts | inject() | explain() | plain-JS TF-IDF | JS ÷ inject() |");
console.log("|------:|---------:|----------:|----------------:|--------------:|");
for (const r of rows) {
  console.log(
    `| ${String(r.n).padStart(5)} | ${ms(r.inject).padStart(8)} | ${ms(r.explain).padStart(9)} | ${ms(r.js).padStart(15)} | ${(r.js / r.inject).toFixed(0).padStart(12)}× |`,
  );
}
console.log("\nwith an embedding model (384 dimensions; the query vector cached, so without the embedding call):");
console.log(
  "| facts | hybrid inject() | fusion's cost (hybrid − lexical) | hybrid explain() | filling every vector | vectors slot |",
);
console.log(
  "|------:|----------------:|---------------------------------:|-----------------:|---------------------:|-------------:|",
);
for (const r of rows) {
  const slot = `${(r.stored / 1024).toFixed(0)} KB (${(r.stored / r.n).toFixed(0)} B/fact)`;
  console.log(
    `| ${String(r.n).padStart(5)} | ${ms(r.hybrid).padStart(15)} | ${ms(r.hybrid - r.inject).padStart(32)} | ${ms(r.hybridExplain).padStart(16)} | ${ms(r.fill).padStart(20)} | ${slot.padStart(12)} |`,
  );
}
