// The chat model call, through the demo server's proxy (the server adds the key and the
// model). Streams when the endpoint streams; a plain JSON answer works too.

const ENDPOINT = "/api/llm/chat/completions";

/** The server's view of the LLM endpoint: { configured, model, endpoint, problem }. */
export async function loadConfig() {
  try {
    const res = await fetch("/api/config", { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return await res.json();
  } catch (e) {
    return {
      configured: false,
      model: null,
      endpoint: null,
      problem: `the demo server did not answer /api/config (${e.message})`,
    };
  }
}

async function errorText(res) {
  const text = await res.text().catch(() => "");
  try {
    const j = JSON.parse(text);
    const m = j?.error?.message ?? (typeof j?.error === "string" ? j.error : null) ?? j?.message;
    if (m) return `${res.status}: ${m}`;
  } catch {}
  return `${res.status}: ${text.slice(0, 300) || res.statusText}`;
}

/**
 * Sends `messages` and calls `onText(fullTextSoFar)` as the answer arrives. Resolves to
 * the whole answer. `signal` aborts.
 */
export async function chat({ messages, model, signal, onText }) {
  const res = await fetch(ENDPOINT, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: model ?? "default", messages, stream: true }),
    signal,
  });
  if (!res.ok) throw new Error(`HTTP ${await errorText(res)}`);
  const type = res.headers.get("content-type") ?? "";
  if (!type.includes("text/event-stream")) {
    const j = await res.json();
    const text = messageText(j?.choices?.[0]?.message?.content);
    onText?.(text);
    return text;
  }
  let text = "";
  for await (const data of sseData(res.body)) {
    if (data === "[DONE]") break;
    let j;
    try {
      j = JSON.parse(data);
    } catch {
      continue;
    }
    if (j?.error) throw new Error(`the endpoint reported an error: ${j.error.message ?? JSON.stringify(j.error)}`);
    const piece = j?.choices?.[0]?.delta?.content;
    if (typeof piece === "string" && piece) {
      text += piece;
      onText?.(text);
    }
  }
  return text;
}

function messageText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/** The `data:` payloads of a server-sent-events stream. */
async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
    if (buf.startsWith("data:")) data.push(buf.slice(5).replace(/^ /, ""));
    if (data.length) yield data.join("\n");
  } finally {
    reader.releaseLock();
  }
}

/** Splits a reasoning model's `<think>…</think>` preamble from its answer. */
export function splitThinking(text) {
  const m = /^\s*<think>([\s\S]*?)(?:<\/think>|$)/.exec(text);
  if (!m) return { thinking: "", answer: text };
  return { thinking: m[1].trim(), answer: text.slice(m[0].length).trimStart(), open: !m[0].endsWith("</think>") };
}
