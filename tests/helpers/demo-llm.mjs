// The scripted LLM behind the demo tests: the demo server proxies both the chat and the
// extraction calls to it. Extraction calls (they carry `<current_memory>`) get the next delta
// of `script.extractions`; chat calls get the next text of `script.chats`, streamed as
// server-sent events when the request asks for a stream. `MIA` is the delta of the main flow.
import { startLlmServer } from "./llm-server.mjs";

const script = { chats: [], extractions: [] };
let llm;

function isExtraction(r) {
  const msgs = r.body?.messages ?? [];
  return msgs.some((m) => typeof m.content === "string" && m.content.includes("<current_memory>"));
}

function sse(text) {
  const pieces = text.match(/[\s\S]{1,9}/g) ?? [];
  return (
    pieces.map((c) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: c } }] })}\n\n`).join("") +
    "data: [DONE]\n\n"
  );
}

function answer(record) {
  if (isExtraction(record)) return script.extractions.shift() ?? { json: { newFacts: [], factsToRemove: [] } };
  const next = script.chats.shift() ?? "OK.";
  if (next.step) return next.step; // a raw llm-server step: an error status, a hang …
  const { text, stream = true } = typeof next === "string" ? { text: next } : next;
  return record.body?.stream && stream
    ? { headers: { "content-type": "text/event-stream" }, body: sse(text) }
    : { content: text };
}

export const demoLlm = {
  script,
  /** Starts the server (one per test file); resolves to the llm-server handle. */
  async start() {
    llm = await startLlmServer({ fallback: answer });
    return llm;
  },
  /** The extraction requests since request number `from`. */
  extractionRequests: (from = 0) => llm.requests.slice(from).filter(isExtraction),
  /** The chat requests since request number `from`. */
  chatRequests: (from = 0) =>
    llm.requests.slice(from).filter((r) => r.url.endsWith("/chat/completions") && !isExtraction(r)),
  /** The system prompt of a request. */
  systemOf: (r) => r.body.messages.find((m) => m.role === "system")?.content ?? "",
};

export const MIA = {
  json: {
    user: {
      workContext: {
        summary: "Mia is a backend engineer at Acme, writing Go microservices on Kubernetes.",
        shouldUpdate: true,
      },
      personalContext: {
        summary: "Prefers short answers with code examples; learning Rust in the evenings.",
        shouldUpdate: true,
      },
      topOfMind: { summary: "Choosing a language for a new command-line tool.", shouldUpdate: true },
    },
    history: {
      recentMonths: { summary: "Moved the billing service to Go and started learning Rust.", shouldUpdate: true },
    },
    newFacts: [
      { content: "Works as a backend engineer at Acme", category: "context", confidence: 0.95 },
      { content: "Writes Go microservices on Kubernetes", category: "knowledge", confidence: 0.9 },
      { content: "Is learning Rust in the evenings", category: "goal", confidence: 0.85 },
      { content: "Prefers short answers with code examples", category: "preference", confidence: 0.9 },
    ],
    factsToRemove: [],
  },
};
