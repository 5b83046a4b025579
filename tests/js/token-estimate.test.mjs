// The built-in token estimate against a real BPE tokenizer (js-tiktoken, a pure-JS port of
// tiktoken; a dev dependency only). The estimate budgets the injected block, so what matters
// is the block as a whole: it must be close to cl100k_base and rarely below it (an
// under-estimate can overrun the budget). It is measured on the blocks and fact lines that
// `explain()` renders for every case of the labelled relevance sets (English, Chinese,
// Japanese, mixed), through the built package.
import { readFileSync } from "node:fs";
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEncoding } from "js-tiktoken";
import { UserMemory } from "user-memory";

const sets = [
  "tests/data/relevance-dev.json",
  "tests/data/relevance-check.json",
  "tests/data/relevance-sample.json",
].map((p) => JSON.parse(readFileSync(new URL(`../../${p}`, import.meta.url), "utf8")));

async function renderAll() {
  const blocks = [];
  const lines = [];
  for (const set of sets) {
    for (const persona of set.personas) {
      const memory = await UserMemory.open({
        agent: `tok-${persona.name}`.slice(0, 64),
        storage: "memory",
        llm: async () => "{}",
      });
      await memory.import({
        version: "1.0",
        lastUpdated: "",
        user: {},
        history: {},
        facts: persona.facts.map((f) => ({ ...f, createdAt: "2026-01-01T00:00:00Z", source: "manual" })),
      });
      for (const c of persona.cases) {
        const e = await memory.explain(c.messages);
        blocks.push({ text: e.block, estimate: e.tokens, lang: c.lang });
        for (const f of e.facts) {
          const date = f.date ? ` | ${f.date}` : "";
          const line = `- [${f.category} | ${f.confidence.toFixed(2)}${date}] ${f.content}`;
          lines.push({ text: line, estimate: f.tokens, cjk: /[\u3040-\u30ff\u4e00-\u9fff]/.test(f.content) });
        }
      }
      await memory.close();
    }
  }
  return { blocks, lines };
}

function stats(items, enc) {
  let est = 0;
  let real = 0;
  let under = 0;
  let min = Infinity;
  let max = 0;
  for (const it of items) {
    const r = enc.encode(it.text).length;
    est += it.estimate;
    real += r;
    const ratio = it.estimate / r;
    min = Math.min(min, ratio);
    max = Math.max(max, ratio);
    if (it.estimate < r) under++;
  }
  return { n: items.length, ratio: est / real, min, max, under };
}

test("the estimate of whole <memory> blocks stays within −5 %…+25 % of cl100k_base, and above o200k_base", async () => {
  assert.ok(sets.length >= 2, "the in-repo relevance sets are readable");
  const { blocks, lines } = await renderAll();
  assert.ok(blocks.length >= 90, `enough blocks measured (${blocks.length})`);
  const cl100k = getEncoding("cl100k_base");
  const o200k = getEncoding("o200k_base");
  const b100 = stats(blocks, cl100k);
  const b200 = stats(blocks, o200k);
  const zh = stats(
    lines.filter((l) => l.cjk),
    cl100k,
  );
  const en = stats(
    lines.filter((l) => !l.cjk),
    cl100k,
  );
  const fmt = (s) =>
    `n=${s.n} total ratio ${s.ratio.toFixed(3)} (min ${s.min.toFixed(3)}, max ${s.max.toFixed(3)}), under on ${s.under}`;
  console.log(`blocks vs cl100k_base: ${fmt(b100)}`);
  console.log(`blocks vs o200k_base:  ${fmt(b200)}`);
  console.log(`CJK fact lines vs cl100k_base:     ${fmt(zh)}`);
  console.log(`English fact lines vs cl100k_base: ${fmt(en)}`);

  // Whole blocks (what the budget is checked against).
  assert.ok(b100.ratio >= 1.0 && b100.ratio <= 1.15, `blocks: total ratio ${b100.ratio} vs cl100k_base`);
  assert.ok(b100.min >= 0.95, `no block is under-estimated by more than 5 % (min ${b100.min})`);
  assert.ok(b100.max <= 1.25, `no block is over-estimated by more than 25 % (max ${b100.max})`);
  assert.ok(b100.under <= blocks.length * 0.15, `few blocks under-estimated (${b100.under})`);
  assert.equal(b200.under, 0, "never under o200k_base (the newer, denser tokenizer)");
  // Chinese is counted per character, not per four characters (the naive len/4).
  assert.ok(zh.ratio > 0.9 && zh.ratio < 1.2, `CJK lines ratio ${zh.ratio}`);
  assert.ok(en.ratio > 0.9 && en.ratio < 1.2, `English lines ratio ${en.ratio}`);
});
