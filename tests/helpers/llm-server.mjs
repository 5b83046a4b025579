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
//   llm.script.push({ json: {...}, finish: "length" });        // cut off by the token limit
// A 200 reply to a request with `stream: true` is sent as server-sent events (OpenAI's or
// Anthropic's), in 8-character pieces (or the step's `pieces`), then the step's `tail` pieces,
// `pieceDelayMs` apart (`stall: true`: then silence, the connection left open); `stream:
// false` answers such a request with plain JSON instead; `sse` sends that raw event text.
// `record.piecesSent` (written as the client reads) and `record.clientClosed` tell how far it
// read. A request that
// forces Anthropic's tool gets the JSON content back as the tool's input.
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
          res.writeHead(204, {
            "access-control-allow-headers": req.headers["access-control-request-headers"] ?? "*",
            "access-control-allow-methods": "POST",
          });
          return res.end();
        }
      }
      const step = script.length
        ? script.shift()
        : fallback
          ? fallback(record)
          : { status: 500, body: { error: { message: "script exhausted" } } };
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
    // A client that stops reading early resets the connection: not an error here.
    res.on("error", () => {});
    res.on("close", () => (record.clientClosed = !res.writableEnded));
    const delay = step.delayMs ?? 0;
    setTimeout(() => {
      const status = step.status ?? 200;
      const headers = { "content-type": "application/json", ...(step.headers ?? {}) };
      const anthropic = record.url.endsWith("/messages");
      if (status === 200 && step.body === undefined) {
        const content = step.content ?? JSON.stringify(step.json ?? {});
        // A forced tool call (Anthropic structured output) answers with the tool's input.
        let input;
        if (anthropic && record.body?.tool_choice?.type === "tool") {
          try {
            input = JSON.parse(content);
          } catch {}
        }
        const reply = { content, input, tool: record.body?.tool_choice?.name, finish: step.finish, usage: step.usage };
        if (step.sse !== undefined) {
          res.writeHead(200, { "content-type": "text/event-stream" });
          return res.end(step.sse);
        }
        if (record.body?.stream === true && step.stream !== false)
          return (anthropic ? streamAnthropic : streamOpenAi)(reply, step, record, res);
        step.body = anthropic ? anthropicMessage(reply) : openAiCompletion(reply);
      }
      const payload = step.body;
      let bytes =
        typeof payload === "string" ? payload : JSON.stringify(payload ?? { error: { message: `scripted ${status}` } });
      if (step.gzip) {
        bytes = gzipSync(bytes);
        headers["content-encoding"] = "gzip";
      }
      res.writeHead(status, headers);
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

/** OpenAI's finish reason and Anthropic's stop reason for a scripted `finish`. */
const openAiFinish = (finish) => (finish === "length" ? "length" : (finish ?? "stop"));
const anthropicStop = (reply) =>
  reply.finish === "length" ? "max_tokens" : (reply.finish ?? (reply.input ? "tool_use" : "end_turn"));

function openAiCompletion(reply) {
  const c = {
    id: "chatcmpl-1",
    object: "chat.completion",
    choices: [
      { index: 0, message: { role: "assistant", content: reply.content }, finish_reason: openAiFinish(reply.finish) },
    ],
  };
  if (reply.usage) c.usage = reply.usage;
  return c;
}

function anthropicMessage(reply) {
  const block = reply.input
    ? { type: "tool_use", id: "toolu_1", name: reply.tool, input: reply.input }
    : { type: "text", text: reply.content };
  const m = { id: "msg_1", type: "message", role: "assistant", content: [block], stop_reason: anthropicStop(reply) };
  if (reply.usage) m.usage = reply.usage;
  return m;
}

/** The pieces a reply is streamed in: its content in 8-character pieces (or the step's own
 * `pieces`), then the step's `tail` pieces (a model running on after its answer). */
function pieces(reply, step) {
  return [...(step.pieces ?? reply.content.match(/[\s\S]{1,8}/g) ?? []), ...(step.tail ?? [])];
}

/** Writes server-sent events one by one, `step.pieceDelayMs` apart, until done or the
 * client goes away; `record.piecesSent` counts the content pieces that went out. */
async function sendEvents(res, step, record, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  record.piecesSent = 0;
  for (const [data, isPiece] of events) {
    if (res.destroyed || res.writableEnded) return;
    // Waits for the client to read (backpressure), so piecesSent is what it took.
    if (!res.write(typeof data === "string" ? data : `data: ${JSON.stringify(data)}\n\n`)) {
      await new Promise((r) => (res.once("drain", r), res.once("close", r)));
    }
    if (isPiece) record.piecesSent++;
    if (step.pieceDelayMs) await new Promise((r) => setTimeout(r, step.pieceDelayMs));
    if (step.stall && record.piecesSent === step.pieces?.length) return; // goes silent, open
  }
  if (!res.destroyed) res.end();
}

/** A chat completion as OpenAI's server-sent events (a request with `stream: true`): the
 * content in pieces, then the finish reason (and usage), then `[DONE]`. */
function streamOpenAi(reply, step, record, res) {
  const base = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "scripted" };
  const chunk = (choice) => ({ ...base, choices: [{ index: 0, finish_reason: null, ...choice }] });
  const events = [[chunk({ delta: { role: "assistant", content: "" } })]];
  for (const piece of pieces(reply, step)) events.push([chunk({ delta: { content: piece } }), true]);
  events.push([chunk({ delta: {}, finish_reason: openAiFinish(reply.finish) })]);
  if (reply.usage) events.push([{ ...base, choices: [], usage: reply.usage }]);
  events.push(["data: [DONE]\n\n"]);
  return sendEvents(res, step, record, events);
}

/** A message as Anthropic's server-sent events: message_start (input tokens), one text or
 * tool_use block in pieces, message_delta (stop reason, output tokens), message_stop. */
function streamAnthropic(reply, step, record, res) {
  const ev = (data) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
  const block = reply.input
    ? { type: "tool_use", id: "toolu_1", name: reply.tool, input: {} }
    : { type: "text", text: "" };
  const events = [
    [
      ev({
        type: "message_start",
        message: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          content: [],
          usage: { input_tokens: reply.usage?.input_tokens ?? 0, output_tokens: 1 },
        },
      }),
    ],
    [ev({ type: "content_block_start", index: 0, content_block: block })],
  ];
  for (const piece of pieces(reply, step)) {
    const delta = reply.input ? { type: "input_json_delta", partial_json: piece } : { type: "text_delta", text: piece };
    events.push([ev({ type: "content_block_delta", index: 0, delta }), true]);
  }
  events.push([ev({ type: "content_block_stop", index: 0 })]);
  events.push([
    ev({
      type: "message_delta",
      delta: { stop_reason: anthropicStop(reply) },
      usage: { output_tokens: reply.usage?.output_tokens ?? 0 },
    }),
  ]);
  events.push([ev({ type: "message_stop" })]);
  return sendEvents(res, step, record, events);
}

/** A delta reply adding the given facts (confidence 0.9). */
export function factsReply(...contents) {
  return {
    json: {
      newFacts: contents.map((content) => ({ content, category: "knowledge", confidence: 0.9 })),
      factsToRemove: [],
    },
  };
}
