// The demo server (scripts/serve.mjs) on its own, without a browser: what it serves, what
// it tells the page, and how it proxies LLM calls (key and model added on the server).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { createServer } from "node:net";
import { endpointFromEnv, startServer } from "../../scripts/serve.mjs";
import { startLlmServer } from "../helpers/llm-server.mjs";

const KEY = "sk-demo-secret-0123456789";
const MODEL = "scripted-model";
let llm;
let demo;
let bare;

before(async () => {
  llm = await startLlmServer();
  demo = await startServer({ port: 0, env: { OPENAI_BASE_URL: `${llm.baseUrl}/`, OPENAI_API_KEY: KEY, MODEL } });
  bare = await startServer({ port: 0, env: {} });
});

after(async () => {
  await demo?.close();
  await bare?.close();
  await llm?.close();
});

/** A raw HTTP request (no URL normalisation, any Host/Origin header). */
function raw(server, { method = "GET", path = "/", headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: server.port, method, path, headers: { host: `127.0.0.1:${server.port}`, ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    if (body !== undefined) req.write(typeof body === "string" ? body : JSON.stringify(body));
    req.end();
  });
}

const chatBody = { model: "whatever-the-page-says", messages: [{ role: "user", content: "hi" }] };
const post = (server, body = chatBody, headers = {}) =>
  raw(server, {
    method: "POST",
    path: "/api/llm/chat/completions",
    headers: { "content-type": "application/json", ...headers },
    body,
  });

test("/api/config names the model and the endpoint host, never the API key", async () => {
  const res = await raw(demo, { path: "/api/config" });
  assert.equal(res.status, 200);
  const cfg = JSON.parse(res.text);
  assert.deepEqual(cfg, { configured: true, model: MODEL, endpoint: `127.0.0.1:${llm.port}`, problem: null });
  assert.ok(!res.text.includes(KEY));
});

test("the proxy forwards to OPENAI_BASE_URL/chat/completions with the server's key and MODEL", async () => {
  llm.script.push({ content: "Hello from the model" });
  const n = llm.requests.length;
  const res = await post(demo, chatBody, { authorization: "Bearer sk-from-the-page" });
  assert.equal(res.status, 200);
  assert.equal(JSON.parse(res.text).choices[0].message.content, "Hello from the model");
  const sent = llm.requests[n];
  assert.equal(sent.url, "/v1/chat/completions", "a trailing / on OPENAI_BASE_URL is fine");
  assert.equal(sent.headers.authorization, `Bearer ${KEY}`, "the server's key replaces anything the page sends");
  assert.equal(sent.body.model, MODEL, "MODEL replaces the page's model");
  assert.deepEqual(sent.body.messages, chatBody.messages);
});

test("streamed answers pass through as server-sent events, unchanged", async () => {
  const events =
    'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\ndata: {"choices":[{"delta":{"content":"lo"}}]}\n\ndata: [DONE]\n\n';
  llm.script.push({ headers: { "content-type": "text/event-stream" }, body: events });
  const n = llm.requests.length;
  const res = await post(demo, { ...chatBody, stream: true });
  assert.equal(res.status, 200);
  assert.match(res.headers["content-type"], /^text\/event-stream/);
  assert.equal(res.text, events);
  assert.equal(llm.requests[n].body.stream, true);
});

test("a successful answer that echoes the key reaches the browser with the key masked, also JSON-escaped", async () => {
  llm.script.push({ content: `Your server sends Authorization: Bearer ${KEY}` });
  const plain = await post(demo);
  assert.equal(plain.status, 200);
  assert.ok(!plain.text.includes(KEY), plain.text);
  assert.equal(JSON.parse(plain.text).choices[0].message.content, "Your server sends Authorization: Bearer ***");
  // The same key with its dashes as JSON escapes: only decoding finds it.
  const escaped = KEY.replaceAll("-", "\\u002d");
  llm.script.push({ body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"key ${escaped}"}}]}` });
  const res = await post(demo);
  assert.equal(JSON.parse(res.text).choices[0].message.content, "key ***");
});

test("a streamed answer that echoes the key, a few characters per event, is masked as a whole", async () => {
  // The scripted server streams the content in 8-character pieces: no event holds the key.
  const content = `Sure. The key is ${KEY}, and again: ${KEY.slice(0, 9)}${KEY.slice(9)}. Done.`;
  llm.script.push({ content, pieceDelayMs: 5 });
  const res = await post(demo, { ...chatBody, stream: true });
  assert.equal(res.status, 200);
  assert.match(res.headers["content-type"], /^text\/event-stream/);
  const events = res.text.split("\n\n").filter((e) => e.startsWith("data: ") && e !== "data: [DONE]");
  const text = events.map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? "").join("");
  assert.equal(text, "Sure. The key is ***, and again: ***. Done.", "the browser reads the whole answer, masked");
  for (const part of [KEY, KEY.slice(3), KEY.slice(-10)])
    assert.ok(!res.text.includes(part), `"${part}" does not reach the browser`);
  assert.ok(res.text.trimEnd().endsWith("data: [DONE]"));
  assert.ok(events.length > 5, "still streamed in many events");
});

test("upstream errors keep their status and body, with the key masked", async () => {
  llm.script.push({ status: 401, body: { error: { message: `Incorrect API key provided: ${KEY}` } } });
  const res = await post(demo);
  assert.equal(res.status, 401);
  assert.ok(!res.text.includes(KEY), res.text);
  assert.match(JSON.parse(res.text).error.message, /Incorrect API key provided: \*\*\*/);
});

test("an unreachable endpoint is a 502 that names the endpoint", async () => {
  // A port that was free a moment ago: nothing listens there.
  const port = await new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const dead = await startServer({ port: 0, env: { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, MODEL } });
  try {
    const res = await post(dead);
    assert.equal(res.status, 502);
    assert.match(
      JSON.parse(res.text).error.message,
      new RegExp(`could not reach the LLM endpoint 127\\.0\\.0\\.1:${port}`),
    );
  } finally {
    await dead.close();
  }
});

test("without an endpoint, /api/config says what is missing and the proxy answers 503 with setup instructions", async () => {
  const cfg = JSON.parse((await raw(bare, { path: "/api/config" })).text);
  assert.deepEqual(cfg, { configured: false, model: null, endpoint: null, problem: "OPENAI_BASE_URL is not set" });
  const res = await post(bare);
  assert.equal(res.status, 503);
  const message = JSON.parse(res.text).error.message;
  for (const word of ["OPENAI_BASE_URL", "MODEL", "http://127.0.0.1:11434/v1"])
    assert.ok(message.includes(word), `${word} in: ${message}`);
});

test("the environment decides the endpoint: a key alone means OpenAI; a missing MODEL or a bad URL is reported", () => {
  assert.deepEqual(endpointFromEnv({ OPENAI_API_KEY: "k", MODEL: "gpt-4o-mini" }), {
    baseUrl: "https://api.openai.com/v1",
    key: "k",
    model: "gpt-4o-mini",
    configured: true,
    problem: null,
  });
  assert.equal(endpointFromEnv({ OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" }).problem, "MODEL is not set");
  assert.match(endpointFromEnv({ OPENAI_BASE_URL: "127.0.0.1:11434", MODEL: "m" }).problem, /must be an http/);
  // What fetch would refuse with a message quoting the secret is refused up front instead.
  const creds = endpointFromEnv({ OPENAI_BASE_URL: "http://user:s3cretpass@127.0.0.1:9/v1", MODEL: "m" });
  assert.equal(creds.configured, false);
  assert.doesNotMatch(creds.problem, /s3cretpass/);
  const broken = endpointFromEnv({
    OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    OPENAI_API_KEY: "sk-abc\ndef",
    MODEL: "m",
  });
  assert.equal(broken.configured, false);
  assert.doesNotMatch(broken.problem, /sk-abc/);
  assert.equal(endpointFromEnv({ OPENAI_BASE_URL: "http://127.0.0.1:11434/v1", MODEL: "llama3.2" }).key, null);
});

test("requests to /api/ from another origin or through another host name are refused", async () => {
  const n = llm.requests.length;
  const fromSite = await post(demo, chatBody, { origin: "https://evil.example" });
  assert.equal(fromSite.status, 403);
  const rebound = await raw(demo, { path: "/api/config", headers: { host: `evil.example:${demo.port}` } });
  assert.equal(rebound.status, 403);
  assert.equal(llm.requests.length, n, "nothing reached the LLM");
  const own = await raw(demo, { path: "/api/config", headers: { origin: `http://127.0.0.1:${demo.port}` } });
  assert.equal(own.status, 200, "the page's own origin is fine");
});

test("only the page (www/) and the package (pkg/) are served", async () => {
  const page = await raw(demo, { path: "/" });
  assert.equal(page.status, 200);
  assert.match(page.headers["content-type"], /^text\/html/);
  assert.equal((await raw(demo, { path: "/app.js" })).status, 200);
  assert.equal((await raw(demo, { path: "/pkg/browser.js" })).status, 200);
  const wasm = await raw(demo, { path: "/pkg/wasm/user_memory_bg.wasm" });
  assert.equal(wasm.headers["content-type"], "application/wasm");
  for (const path of [
    "/scripts/serve.mjs",
    "/package.json",
    "/pkg/../package.json",
    "/pkg/%2e%2e/package.json",
    "/..%2fpackage.json",
    "/src/lib.rs",
  ]) {
    assert.equal((await raw(demo, { path })).status, 404, path);
  }
  assert.equal((await raw(demo, { path: "/api/nothing" })).status, 404);
});

test(
  "malformed requests get a 4xx and the server keeps running: a URL that does not parse, bad escapes, an oversized body",
  { timeout: 30_000 },
  async () => {
    const { connect } = await import("node:net");
    const rawLine = (line) =>
      new Promise((resolve, reject) => {
        const socket = connect(demo.port, "127.0.0.1", () =>
          socket.write(`${line}\r\nHost: x\r\nConnection: close\r\n\r\n`),
        );
        let text = "";
        socket.on("data", (c) => (text += c));
        socket.on("end", () => resolve(text));
        socket.on("error", reject);
      });
    assert.match(await rawLine("GET //[ HTTP/1.1"), /^HTTP\/1\.1 400/);
    assert.equal((await raw(demo, { path: "/%E0%A4%A" })).status, 400);
    const big = await post(demo, { ...chatBody, pad: "x".repeat(9_000_000) });
    assert.equal(big.status, 413, "the 413 itself arrives");
    assert.equal((await raw(demo, { path: "/api/config" })).status, 200, "still serving");
  },
);

test("a taken port falls back to a free one", async () => {
  const second = await startServer({ port: demo.port, env: {} });
  try {
    assert.equal(second.movedFrom, demo.port);
    assert.notEqual(second.port, demo.port);
    assert.equal((await raw(second, { path: "/api/config" })).status, 200);
  } finally {
    await second.close();
  }
});
