// A local HTTP server that plays an LLM from a script, speaking the OpenAI chat-completions
// protocol (POST /v1/chat/completions) and Anthropic's messages API (POST /v1/messages).
// Bound to 127.0.0.1 only. Every request is recorded, so tests can check what was sent.
//
//   const llm = await startLlmServer();
//   llm.script.push({ json: { newFacts: [...] } });          // 200 with that reply as content
//   llm.script.push({ status: 500 });                          // an error status
//   llm.script.push({ status: 429, headers: { "retry-after": "1" } });
//   llm.script.push({ hang: true });                           // never answers
//   llm.script.push({ content: "raw text reply" });
//   llm.script.push({ json: {...}, usage: { prompt_tokens: 812, completion_tokens: 95 } }); // with token usage
//   llm.script.push({ destroy: true });                        // drops the connection
//   llm.script.push({ status: 307, headers: { location: "http://127.0.0.1:9/v1/x" } }); // a redirect
//   llm.script.push({ body: "…", gzip: true });                // sent gzip-compressed (content-encoding)
// A 200 reply to an OpenAI request with `stream: true` is sent as server-sent events.
//   ... llm.baseUrl  (http://127.0.0.1:PORT/v1), llm.requests, await llm.waitForRequests(n),
//   await llm.close()
// When the script is empty, `fallback` (a function of the request) answers, default 500.
// `cors: true` lets pages of other origins call it (a preflight is answered and recorded too).
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";

export async function startLlmServer({ fallback, cors = false } = {}) {
  const script = [];
  const requests = [];
  const hanging = new Set();
  const waiters = new Set();
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      let json = null;
      try {
        json = JSON.parse(body);
      } catch {}
      const record = { method: req.method, url: req.url, headers: req.headers, body: json, raw: body, at: Date.now() };
      requests.push(record);
      for (const w of [...waiters]) if (requests.length >= w.n) (waiters.delete(w), w.resolve(record));
      if (cors) {
        res.setHeader("access-control-allow-origin", "*");
        res.setHeader("access-control-expose-headers", "*");
        if (req.method === "OPTIONS") {
          // (`*` would not cover Authorization: name what was asked for.)
          res.writeHead(204, { "access-control-allow-headers": req.headers["access-control-request-headers"] ?? "*", "access-control-allow-methods": "POST" });
          return res.end();
        }
      }
      const step = script.length ? script.shift() : fallback ? fallback(record) : { status: 500, body: { error: { message: "script exhausted" } } };
      answer(step, record, res);
    });
  });
  function answer(step, record, res) {
    if (step.hang) {
      hanging.add(res);
      return;
    }
    if (step.destroy) {
      res.socket.destroy();
      return;
    }
    const delay = step.delayMs ?? 0;
    setTimeout(() => {
      const status = step.status ?? 200;
      const headers = { "content-type": "application/json", ...(step.headers ?? {}) };
      let payload = step.body;
      if (payload === undefined && status === 200) {
        const content = step.content ?? JSON.stringify(step.json ?? {});
        const anthropic = record.url.endsWith("/messages");
        payload = anthropic
          ? { id: "msg_1", type: "message", role: "assistant", content: [{ type: "text", text: content }], stop_reason: "end_turn" }
          : { id: "chatcmpl-1", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }] };
        if (step.usage) payload.usage = step.usage;
      }
      if (status === 200 && step.body === undefined && record.body?.stream === true && !record.url.endsWith("/messages")) {
        streamAnswer(payload, res);
        return;
      }
      let bytes = typeof payload === "string" ? payload : JSON.stringify(payload ?? { error: { message: `scripted ${status}` } });
      if (step.gzip) {
        bytes = gzipSync(bytes);
        headers["content-encoding"] = "gzip";
      }
      res.writeHead(status, headers);
      // A client that stops reading early resets the connection: not an error here.
      res.on("error", () => {});
      res.end(bytes);
    }, delay);
  }
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    script,
    requests,
    port,
    origin: `http://127.0.0.1:${port}`,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    /** Resolves once `n` requests have arrived (at once if they already have). */
    waitForRequests(n) {
      if (requests.length >= n) return Promise.resolve(requests[n - 1]);
      return new Promise((resolve) => waiters.add({ n, resolve }));
    },
    /** The user prompt of request i (OpenAI or Anthropic shape). */
    prompt(i) {
      const b = requests[i]?.body;
      return b?.messages?.at(-1)?.content ?? "";
    },
    async close() {
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A chat completion sent as OpenAI's server-sent events (a request with `stream: true`):
 * the content in a few chunks, then the finish reason (and usage), then `[DONE]`. */
function streamAnswer(completion, res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const content = completion.choices[0].message.content;
  const base = { id: completion.id, object: "chat.completion.chunk", created: 0, model: "scripted" };
  const send = (chunk) => res.write(`data: ${JSON.stringify({ ...base, ...chunk })}\n\n`);
  const pieces = content.match(/[\s\S]{1,8}/g) ?? [];
  send({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
  for (const piece of pieces) send({ choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
  send({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }], ...(completion.usage ? { usage: completion.usage } : {}) });
  res.end("data: [DONE]\n\n");
}

/** A delta reply adding the given facts (confidence 0.9). */
export function factsReply(...contents) {
  return { json: { newFacts: contents.map((content) => ({ content, category: "knowledge", confidence: 0.9 })), factsToRemove: [] } };
}
