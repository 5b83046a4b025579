// The demo server (`npm start`): serves the chat page (www/) and the package (pkg/) on
// 127.0.0.1, and proxies LLM calls to an OpenAI-compatible endpoint so the API key stays
// on the server.
//
//   OPENAI_BASE_URL  API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1 (Ollama)
//   OPENAI_API_KEY   sent as `Authorization: Bearer …` (optional for local servers)
//   MODEL            the model every call uses, e.g. gpt-4o-mini or llama3.2
//   PORT             default 8787; if it is taken, a free port is used instead
//
// Routes:
//   GET  /api/config                 { configured, model, endpoint, problem } (never the key)
//   POST /api/llm/chat/completions   forwarded to ${OPENAI_BASE_URL}/chat/completions with the
//                                    key and the model added; answers (streamed ones as they
//                                    come) go back with the key masked (scripts/mask-key.mjs)
//   GET  /pkg/…                      the built package (pkg/)
//   GET  /…                          the page (www/)
//
// `startServer()` is exported for the tests.
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { staticHandler } from "../tests/helpers/static-server.mjs";
import { maskBody, maskText, StreamMask } from "./mask-key.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_PORT = 8787;
const MAX_BODY_BYTES = 8 * 1024 * 1024;
const OPENAI_DEFAULT_BASE = "https://api.openai.com/v1";

/** The LLM endpoint described by the environment. */
export function endpointFromEnv(env = process.env) {
  const key = env.OPENAI_API_KEY?.trim() || null;
  // A key alone means OpenAI itself.
  const baseUrl = (env.OPENAI_BASE_URL?.trim() || (key ? OPENAI_DEFAULT_BASE : "")).replace(/\/+$/, "");
  const model = env.MODEL?.trim() || null;
  let problem = null;
  let url = null;
  try {
    url = baseUrl ? new URL(baseUrl) : null;
  } catch {}
  if (!baseUrl) problem = "OPENAI_BASE_URL is not set";
  else if (!url || !/^https?:$/.test(url.protocol)) problem = "OPENAI_BASE_URL must be an http:// or https:// URL";
  else if (url.username || url.password)
    problem =
      "OPENAI_BASE_URL must not contain a user name or password (fetch refuses such URLs); put a key in OPENAI_API_KEY";
  else if (key && /[\r\n\0]/.test(key)) problem = "OPENAI_API_KEY contains a line break or NUL (a copy-paste slip?)";
  else if (!model) problem = "MODEL is not set";
  return { baseUrl, key, model, configured: !problem, problem };
}

/** What the page may know: the model and where it runs, never the key. */
function publicConfig(ep) {
  let endpoint = null;
  try {
    endpoint = ep.baseUrl ? new URL(ep.baseUrl).host : null;
  } catch {}
  return { configured: ep.configured, model: ep.model, endpoint, problem: ep.problem };
}

function sendJson(res, status, body) {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        // Stop reading (the answer, a 413, still gets through; the connection then closes).
        req.pause();
        req.removeAllListeners("data");
        reject(Object.assign(new Error(`request body over ${MAX_BODY_BYTES} bytes`), { status: 413 }));
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/**
 * Requests to /api/ must come from this server's own page: the Host must be the address we
 * listen on (no DNS rebinding) and a browser's Origin, when sent, must match it (no other
 * site can spend the key through a user's browser).
 */
function sameOrigin(req, port) {
  const allowed = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  if (!allowed.has(req.headers.host ?? "")) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

async function proxyChat(req, res, ep) {
  if (!ep.configured) {
    return sendJson(res, 503, {
      error: {
        message: `No LLM endpoint is configured (${ep.problem}). Start the demo with OPENAI_BASE_URL, OPENAI_API_KEY and MODEL set, e.g. OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=llama3.2 npm start`,
        code: "no_endpoint",
      },
    });
  }
  let body;
  try {
    body = JSON.parse(await readBody(req));
    if (!body || typeof body !== "object" || Array.isArray(body)) throw new Error("the body must be a JSON object");
  } catch (e) {
    if (e.status === 413) res.setHeader("connection", "close");
    return sendJson(res, e.status ?? 400, { error: { message: `bad request: ${e.message}` } });
  }
  body.model = ep.model;
  const headers = {
    "content-type": "application/json",
    accept: body.stream ? "text/event-stream" : "application/json",
  };
  if (ep.key) headers.authorization = `Bearer ${ep.key}`;

  // The browser going away (stop button, closed tab) cancels the upstream call.
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  let upstream;
  try {
    upstream = await fetch(`${ep.baseUrl}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: controller.signal,
    });
  } catch (e) {
    if (controller.signal.aborted) return;
    const cause = maskText(String(e.cause?.code ?? e.cause?.message ?? e.message), ep.key);
    return sendJson(res, 502, {
      error: { message: `could not reach the LLM endpoint ${new URL(ep.baseUrl).host}: ${cause}` },
    });
  }
  // Every answer is masked, successful ones too: a model asked to repeat its instructions
  // or headers may echo the key, plainly or one piece per streamed event.
  const type = upstream.headers.get("content-type") ?? "application/json";
  if (!type.includes("text/event-stream") || !upstream.body) {
    const text = maskBody(await upstream.text().catch(() => ""), ep.key);
    res.writeHead(upstream.status, { "content-type": type, "cache-control": "no-store" });
    return res.end(text);
  }
  res.writeHead(upstream.status, { "content-type": type, "cache-control": "no-store", "x-accel-buffering": "no" });
  res.flushHeaders();
  const mask = new StreamMask(ep.key);
  const decoder = new TextDecoder();
  try {
    for await (const bytes of upstream.body) {
      const out = mask.push(decoder.decode(bytes, { stream: true }));
      if (out && !res.write(out)) await new Promise((r) => res.once("drain", r));
    }
    res.end(mask.push(decoder.decode()) + mask.end());
  } catch {
    res.destroy();
  }
}

/**
 * Starts the demo server. Resolves to { url, port, endpoint, server, close }.
 * `port` 0 picks a free port; a taken port falls back to a free one when `fallback` is true.
 */
export async function startServer({ port = DEFAULT_PORT, env = process.env, fallback = true } = {}) {
  const ep = endpointFromEnv(env);
  const serveFile = staticHandler([
    ["/pkg/", join(ROOT, "pkg")],
    ["/", join(ROOT, "www")],
  ]);
  let bound = 0;
  const server = createServer(async (req, res) => {
    try {
      let path;
      try {
        path = new URL(req.url, "http://x").pathname;
        decodeURIComponent(path); // the static handler decodes it: refuse what cannot be
      } catch {
        return sendJson(res, 400, { error: { message: "malformed request URL" } });
      }
      if (path.startsWith("/api/")) {
        if (!sameOrigin(req, bound))
          return sendJson(res, 403, { error: { message: "cross-origin requests to /api/ are not allowed" } });
        if (path === "/api/config" && req.method === "GET") return sendJson(res, 200, publicConfig(ep));
        if (path === "/api/llm/chat/completions" && req.method === "POST") return await proxyChat(req, res, ep);
        return sendJson(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      }
      if ((req.method === "GET" || req.method === "HEAD") && serveFile(req, res)) return;
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
      res.end("not found");
    } catch (e) {
      if (!res.headersSent) sendJson(res, 500, { error: { message: maskText(String(e?.message ?? e), ep.key) } });
      else res.destroy();
    }
  });
  const listen = (p) =>
    new Promise((resolve, reject) => {
      const onError = (e) => reject(e);
      server.once("error", onError);
      server.listen(p, "127.0.0.1", () => {
        server.off("error", onError);
        resolve();
      });
    });
  let movedFrom = null;
  try {
    await listen(port);
  } catch (e) {
    if (e.code !== "EADDRINUSE" || !fallback) throw e;
    movedFrom = port;
    await listen(0);
  }
  bound = server.address().port;
  return {
    url: `http://127.0.0.1:${bound}/`,
    port: bound,
    movedFrom,
    endpoint: publicConfig(ep),
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

// `node scripts/serve.mjs`
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const requested = process.env.PORT ? Number(process.env.PORT) : DEFAULT_PORT;
  if (!Number.isInteger(requested) || requested < 0 || requested > 65535) {
    console.error(`PORT must be a port number, found "${process.env.PORT}"`);
    process.exit(2);
  }
  if (!existsSync(join(ROOT, "pkg", "browser.js"))) {
    console.error("pkg/ is not built: run `npm start` (or `node scripts/build.mjs`) first");
    process.exit(1);
  }
  const s = await startServer({ port: requested });
  if (s.movedFrom !== null) console.log(`port ${s.movedFrom} is taken; using ${s.port}`);
  console.log(`\n  user-memory demo: ${s.url}\n`);
  if (s.endpoint.configured) {
    console.log(
      `  LLM: ${s.endpoint.model} at ${s.endpoint.endpoint} (calls go through this server; the key stays here)`,
    );
  } else {
    console.log(`  No LLM endpoint (${s.endpoint.problem}). The memory tools work; for the chat, restart with e.g.`);
    console.log(`    OPENAI_API_KEY=sk-… MODEL=gpt-4o-mini npm start`);
    console.log(`    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=llama3.2 npm start   (Ollama)`);
  }
  console.log("");
  const stop = () => s.close().then(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
