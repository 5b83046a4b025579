// A deterministic toy embedding model for tests: a text's vector has weight in a group's
// dimension for every word of the group it contains (so "pet" and "dog" are close, as a real
// model would have them), plus a small constant dimension. As a JS function embedder
// (`embed: toyEmbed`), and as the answer body of a scripted OpenAI-compatible
// `POST /v1/embeddings` (`embeddingsReply(request)`). Plus `until()` and
// `storedVectorCount()` for waiting on the background fill.
import { UserMemory } from "user-memory";
import { sleep } from "./pipeline.mjs";

export const GROUPS = [
  ["dog", "pet", "puppy", "rex", "walk"],
  ["vegetarian", "meat", "steak", "steakhouse", "restaurant", "eat"],
  ["postgres", "postgresql", "database", "sql"],
  ["cello", "music", "concert", "orchestra"],
  ["tea", "coffee", "drink"],
];

/** The toy vector of `text` (GROUPS.length + 1 dimensions). */
export function toyVector(text) {
  const words = text.toLowerCase().split(/[^\p{L}\p{N}]+/u);
  const v = GROUPS.map((g) => g.filter((w) => words.includes(w)).length);
  v.push(0.3);
  return v;
}

/** An `embed` function: records each call ({ texts, purpose, signal }) in `calls`. */
export function toyEmbedder() {
  const calls = [];
  const embed = async (texts, { signal, purpose }) => {
    calls.push({ texts, purpose, signal });
    return texts.map((t) => Float32Array.from(toyVector(t)));
  };
  return { embed, calls };
}

/** The body of an OpenAI embeddings answer for a recorded request `{ body: { input } }`. */
export function embeddingsReply(record) {
  const input = Array.isArray(record.body?.input) ? record.body.input : [record.body?.input ?? ""];
  return {
    object: "list",
    data: input.map((t, index) => ({ object: "embedding", index, embedding: toyVector(String(t)) })),
    model: record.body?.model ?? "toy",
    usage: { prompt_tokens: 1, total_tokens: 1 },
  };
}

/** Polls `f` until it returns something truthy (fails after `ms`). */
export async function until(f, ms = 30_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await sleep(10);
  }
}

/** How many fact vectors are stored for `agent`, read raw from storage. */
export async function storedVectorCount(agent, storage = "memory") {
  const raw = (await UserMemory.inspect({ agent, storage })).vectors;
  return raw ? Object.keys(JSON.parse(raw).vectors).length : 0;
}
