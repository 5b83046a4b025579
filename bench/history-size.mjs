// Stored sizes: one history entry (a typical extraction, an addFact), then the stored record,
// its history and the fact vectors per fact at 1 000 and 10 000 facts, plain and encrypted,
// with the largest value a backend is given (the Durable Object store splits values over
// 130 000 bytes, the D1 store over 1.9 MB; localStorage holds ~1.7 M characters of record:
// bench/localstorage-capacity.mjs).
//   node bench/history-size.mjs                 # 1 000 and 10 000 facts
//   node bench/history-size.mjs 1000            # one size
// Each memory: N facts imported (~80 characters each, like extracted facts), then 60 addFact
// and 40 removeFact so the history is full (100 entries, at most 256 KiB), and 384-dimension
// vectors from a function embedder (int8-encoded by the library). Sizes are string lengths
// (UTF-16 code units: bytes for this ASCII text) read raw from the adapter.
import { UserMemory } from "user-memory";

const reply = JSON.stringify({
  user: {
    topOfMind: {
      summary: "Migrating the billing service from Python to Go; evaluating Kafka vs NATS for events",
      shouldUpdate: true,
    },
  },
  newFacts: [
    { content: "Works as a backend engineer at a fintech startup", category: "context", confidence: 0.9 },
    { content: "Prefers Go over Python for services", category: "preference", confidence: 0.85 },
  ],
  factsToRemove: [],
});

async function entrySizes() {
  const memory = await UserMemory.open({
    agent: "size",
    storage: "memory",
    autoProcess: false,
    llm: async () => reply,
  });
  for (let i = 0; i < 50; i++)
    await memory.addFact({ content: `Existing fact number ${i} about the user and their work` });
  await memory.observe("t1", [
    { role: "user", content: "I'm moving our billing service to Go, deciding between Kafka and NATS" },
    { role: "assistant", content: "Sounds good" },
  ]);
  await memory.flush();
  const [e, add] = await memory.history({ limit: 2 });
  console.log(
    `history entry: ${e.reason} ${JSON.stringify(e).length} bytes, ${add.reason} ${JSON.stringify(add).length} bytes`,
  );
  await memory.close();
}

/** A Map adapter: the raw values. */
function mapAdapter() {
  const map = new Map();
  return {
    map,
    adapter: {
      name: "bench-map",
      get: async (k) => map.get(k) ?? null,
      set: async (k, v) => void map.set(k, v),
      delete: async (k) => void map.delete(k),
      keys: async (p) => [...map.keys()].filter((k) => k.startsWith(p)),
    },
  };
}

/** A deterministic 384-dimension embedding (a hash of the words into the dimensions). */
async function embed(texts) {
  return texts.map((t) => {
    const v = new Float32Array(384);
    for (const w of t.toLowerCase().split(/\W+/)) {
      let h = 2166136261;
      for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 16777619);
      v[(h >>> 0) % 384] += 1;
    }
    v[0] += 0.1;
    return v;
  });
}

const TOPICS = [
  "Go services",
  "Kafka",
  "the billing team",
  "Postgres",
  "a cello",
  "hiking",
  "tea",
  "Lisbon",
  "a dog",
  "NATS",
];
const factText = (i) =>
  `Fact ${i}: the user mentioned ${TOPICS[i % 10]} and project ${i * 7} while planning week ${i % 52}`;

async function measure(n, encrypted, plainVectorsLen = 0) {
  const { map, adapter } = mapAdapter();
  const options = {
    agent: "cap",
    storage: adapter,
    autoProcess: false,
    maxFacts: Math.max(n + 100, 100),
    llm: async () => "{}",
    embed: { function: embed, model: "bench-384", batchSize: 256 },
    ...(encrypted ? { encryption: { passphrase: "bench passphrase" } } : {}),
  };
  const memory = await UserMemory.open(options);
  const doc = await memory.export();
  const facts = Array.from({ length: n }, (_, i) => ({
    id: `fact_${i.toString(16).padStart(8, "0")}`,
    content: factText(i),
    category: "context",
    confidence: 0.9,
    createdAt: "2026-01-01T00:00:00.000Z",
    source: "bench",
  }));
  await memory.import({ ...doc, facts });
  for (let i = 0; i < 60; i++)
    await memory.addFact({ content: `Added fact ${i}: prefers ${TOPICS[i % 10]} for side projects` });
  for (let i = 0; i < 40; i++) await memory.removeFact(facts[i].id);
  // Wait for the background embedding of every fact (bounded): plain, until every fact has a
  // vector; encrypted (unreadable), until the slot is as long as the plain run's.
  const count = (await memory.get()).facts.length;
  const vectorsKey = () => {
    const p = map.get("user-memory/cap/vectors");
    return p ? (map.get(JSON.parse(p).key) ?? "") : "";
  };
  for (let tries = 0; tries < 1200; tries++) {
    const v = vectorsKey();
    if (!encrypted && v && Object.keys(JSON.parse(v).vectors).length >= count) break;
    if (encrypted && v.length >= plainVectorsLen) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await memory.close();

  const raw = await UserMemory.inspect({ agent: "cap", storage: adapter });
  const recordLen = raw.document.length;
  let historyLen = null;
  let vectors = null;
  if (!encrypted) {
    const rec = JSON.parse(raw.document);
    historyLen = JSON.stringify(rec.history ?? {}).length;
    vectors = raw.vectors ? Object.keys(JSON.parse(raw.vectors).vectors).length : 0;
  }
  const vectorsLen = raw.vectors?.length ?? 0;
  const largest = Math.max(...[...map.values()].map((v) => v.length));
  return { n: count, recordLen, historyLen, vectorsLen, vectors, largest };
}

const kb = (b) => `${(b / 1024).toFixed(1)} KiB`;
await entrySizes();
const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((x) => x > 0);
console.log(
  "| facts | memory | record (incl. history) | history | vectors | per fact: record / vectors | largest value |",
);
console.log("|---|---|---|---|---|---|---|");
for (const n of sizes.length ? sizes : [1000, 10000]) {
  let plainVectors = 0;
  for (const encrypted of [false, true]) {
    const r = await measure(n, encrypted, plainVectors);
    plainVectors = r.vectorsLen;
    console.log(
      `| ${r.n} | ${encrypted ? "encrypted" : "plain"} | ${kb(r.recordLen)} | ${r.historyLen === null ? "(encrypted)" : kb(r.historyLen)} | ${kb(r.vectorsLen)}${r.vectors === null ? "" : ` (${r.vectors} vectors)`} | ${Math.round(r.recordLen / r.n)} B / ${Math.round(r.vectorsLen / r.n)} B | ${kb(r.largest)} |`,
    );
  }
}
