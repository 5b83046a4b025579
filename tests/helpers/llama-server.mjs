// A real instruct model behind a small OpenAI-compatible endpoint, for the end-to-end test
// (tests/js/llm-real-model.test.mjs) and the benchmark (bench/models.mjs --local): a GGUF
// file run on the CPU by node-llama-cpp (a dev dependency, prebuilt binaries from npm),
// served on 127.0.0.1 as `POST /v1/chat/completions` and `GET /v1/models`.
//
//   import { startLlamaServer, MODELS } from "../helpers/llama-server.mjs";
//   const llm = await startLlamaServer({ model: MODELS.smollm2 });   // a child process
//   ... llm.baseUrl (http://127.0.0.1:PORT/v1), llm.model, llm.requests(), await llm.close()
//
//   node tests/helpers/llama-server.mjs --model target/models/X.gguf [--port 8080] [--threads 2] [--context 4096]
//
// What it honours of the request: `messages` (system, user, assistant), `max_tokens` /
// `max_completion_tokens` (then `finish_reason: "length"`), `temperature`, llama.cpp's
// repetition penalties (`repeat_penalty`, `repeat_last_n`, `frequency_penalty`,
// `presence_penalty`), `stream` with
// `stream_options.include_usage` (server-sent events, one event per piece of text as it is
// generated), and `response_format`: `json_object` constrains the reply to JSON and
// `json_schema` to the given schema, both through node-llama-cpp's grammars (a schema its
// grammar cannot express is a 400 naming `response_format`, as real servers answer). Every
// reply has `usage` (node-llama-cpp's token meter). Requests are served one at a time
// (one context sequence); a client that hangs up stops the generation.
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");

/** The GGUF files scripts/setup.sh --all fetches. */
export const MODELS = {
  smollm2: join(root, "target", "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
  qwen: join(root, "target", "models", "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"),
};

/**
 * Starts the server in a child process and waits until the model is loaded.
 * `requests()` fetches what it received: [{ body, reply, finish, usage, ms }].
 */
export async function startLlamaServer({
  model = MODELS.smollm2,
  threads = 2,
  context = 4096,
  timeoutMs = 120_000,
} = {}) {
  // --with-parent: the child exits when its stdin closes, so a killed test or benchmark
  // does not leave a model running.
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(import.meta.url),
      "--model",
      model,
      "--port",
      "0",
      "--threads",
      String(threads),
      "--context",
      String(context),
      "--with-parent",
    ],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  let output = "";
  child.stderr.on("data", (c) => (output += c));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const origin = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => (child.kill("SIGKILL"), reject(new Error(`llama-server did not start within ${timeoutMs} ms: ${output}`))),
      timeoutMs,
    );
    let line = "";
    child.stdout.on("data", (c) => {
      line += c;
      const m = /listening (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) (clearTimeout(timer), resolve(m[1]));
    });
    child.once("exit", (code) => (clearTimeout(timer), reject(new Error(`llama-server exited (${code}): ${output}`))));
  });
  return {
    baseUrl: `${origin}/v1`,
    model: basename(model, ".gguf"),
    async requests() {
      return (await fetch(`${origin}/_requests`)).json();
    },
    async close() {
      child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000)).then(() => child.kill("SIGKILL"))]);
    },
  };
}

/** Serves `modelPath` on 127.0.0.1:`port`; resolves to the bound origin. */
export async function serve({ modelPath, port = 0, threads = 2, context = 4096 }) {
  const { getLlama, LlamaChatSession } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", progressLogs: false, logLevel: "error" });
  const model = await llama.loadModel({ modelPath });
  const ctx = await model.createContext({ contextSize: context, threads });
  const sequence = ctx.getSequence();
  const name = basename(modelPath, ".gguf");
  const grammars = new Map();
  const log = [];
  let queue = Promise.resolve();

  async function grammarFor(format) {
    if (!format || format.type === "text") return undefined;
    if (format.type === "json_object") return llama.getGrammarFor("json");
    if (format.type !== "json_schema")
      throw httpError(400, `response_format.type ${JSON.stringify(format.type)} is not supported`);
    const schema = format.json_schema?.schema;
    if (!schema || typeof schema !== "object") throw httpError(400, "response_format.json_schema.schema is missing");
    const key = JSON.stringify(schema);
    if (!grammars.has(key)) {
      try {
        grammars.set(key, await llama.createGrammarForJsonSchema(schema));
      } catch (e) {
        throw httpError(400, `response_format: this json_schema cannot be turned into a grammar (${e.message})`);
      }
    }
    return grammars.get(key);
  }

  /** Runs one chat completion; `onText` gets each piece as it is generated. */
  async function complete(body, onText, signal) {
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const text = (m) =>
      typeof m.content === "string"
        ? m.content
        : Array.isArray(m.content)
          ? m.content.map((p) => p.text ?? "").join("")
          : "";
    const last = messages.at(-1);
    if (!last || last.role !== "user") throw httpError(400, "messages must end with a user message");
    const grammar = await grammarFor(body.response_format);
    const history = messages
      .slice(0, -1)
      .map((m) =>
        m.role === "system"
          ? { type: "system", text: text(m) }
          : m.role === "assistant"
            ? { type: "model", response: [text(m)] }
            : { type: "user", text: text(m) },
      );
    await sequence.clearHistory();
    const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
    try {
      session.setChatHistory(history);
      const before = sequence.tokenMeter.getState();
      const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
      const result = await session.promptWithMeta(text(last), {
        grammar,
        maxTokens: maxTokens ?? undefined,
        temperature: typeof body.temperature === "number" ? body.temperature : 0,
        repeatPenalty: repeatPenalty(body),
        onTextChunk: onText,
        signal,
        stopOnAbortSignal: true,
      });
      const used = sequence.tokenMeter.diff(before);
      return {
        reply: result.responseText,
        finish: result.stopReason === "maxTokens" ? "length" : "stop",
        usage: {
          prompt_tokens: used.usedInputTokens,
          completion_tokens: used.usedOutputTokens,
          total_tokens: used.usedInputTokens + used.usedOutputTokens,
        },
      };
    } catch (e) {
      if (/context size|too long|exceeds/i.test(e.message))
        throw httpError(400, `the prompt does not fit the context of ${context} tokens (${e.message})`);
      throw e;
    } finally {
      session.dispose({ disposeSequence: false });
    }
  }

  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/v1/models")
      return json(res, 200, { object: "list", data: [{ id: name, object: "model", owned_by: "local" }] });
    if (req.method === "GET" && req.url === "/_requests") return json(res, 200, log);
    if (req.method !== "POST" || req.url !== "/v1/chat/completions")
      return json(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        return json(res, 400, { error: { message: "the request body is not JSON" } });
      }
      const abort = new AbortController();
      res.on("close", () => abort.abort());
      const stream = body.stream === true;
      const id = `chatcmpl-${log.length + 1}`;
      const chunk = (delta, finish = null) => ({
        id,
        object: "chat.completion.chunk",
        model: name,
        choices: [{ index: 0, delta, finish_reason: finish }],
      });
      const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
      if (stream) {
        // Headers at once: a slow model's first token can take a while.
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        send(chunk({ role: "assistant", content: "" }));
      }
      const started = Date.now();
      queue = queue.then(async () => {
        if (abort.signal.aborted) return;
        try {
          const out = await complete(body, stream ? (t) => send(chunk({ content: t })) : undefined, abort.signal);
          log.push({ body, ...out, ms: Date.now() - started });
          if (stream) {
            send(chunk({}, out.finish));
            if (body.stream_options?.include_usage)
              send({ id, object: "chat.completion.chunk", model: name, choices: [], usage: out.usage });
            res.end("data: [DONE]\n\n");
          } else {
            json(res, 200, {
              id,
              object: "chat.completion",
              model: name,
              choices: [{ index: 0, message: { role: "assistant", content: out.reply }, finish_reason: out.finish }],
              usage: out.usage,
            });
          }
        } catch (e) {
          const status = e.status ?? 500;
          log.push({ body, error: e.message, status, ms: Date.now() - started });
          if (stream) res.end(`data: ${JSON.stringify({ error: { message: e.message } })}\n\n`);
          else json(res, status, { error: { message: e.message, type: "invalid_request_error" } });
        }
      });
    });
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, server };
}

/**
 * llama.cpp's server fields `repeat_penalty` (1 = off), `repeat_last_n` (default 64),
 * `frequency_penalty` and `presence_penalty` (0 = off), as node-llama-cpp's repeatPenalty;
 * `undefined` (no penalty) when none is given.
 */
function repeatPenalty(body) {
  const num = (k) => (typeof body[k] === "number" && Number.isFinite(body[k]) ? body[k] : undefined);
  const penalty = num("repeat_penalty");
  const frequencyPenalty = num("frequency_penalty");
  const presencePenalty = num("presence_penalty");
  if (penalty === undefined && !frequencyPenalty && !presencePenalty) return undefined;
  return {
    penalty: penalty ?? 1,
    frequencyPenalty: frequencyPenalty ?? 0,
    presencePenalty: presencePenalty ?? 0,
    lastTokens: num("repeat_last_n") ?? 64,
  };
}

function httpError(status, message) {
  return Object.assign(new Error(message), { status });
}

function json(res, status, obj) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(obj));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : fallback;
  };
  const modelPath = arg("model", MODELS.smollm2);
  const { origin } = await serve({
    modelPath,
    port: Number(arg("port", 8080)),
    threads: Number(arg("threads", 2)),
    context: Number(arg("context", 4096)),
  });
  console.log(`listening ${origin}/v1 (${basename(modelPath)})`);
  process.once("SIGTERM", () => process.exit(0));
  if (process.argv.includes("--with-parent")) {
    process.stdin.on("end", () => process.exit(0)).resume();
  }
}
