// `user-memory/ai-sdk`: memory as a Vercel AI SDK language model middleware.
//
//   import { wrapLanguageModel, generateText } from "ai";
//   import { userMemoryMiddleware } from "user-memory/ai-sdk";
//   const model = wrapLanguageModel({ model: openai("gpt-4o-mini"), middleware: userMemoryMiddleware({ memory }) });
//   await generateText({ model, messages, providerOptions: { userMemory: { threadId: "chat-42" } } });
//
// Before each call (`transformParams`) the memory block is added to the system prompt; after
// it (`wrapGenerate`, `wrapStream`) the conversation plus the model's answer is observed. For
// streams the text is collected as it passes and observed when the stream ends (a stream
// that fails, is cancelled, or reports an error in-band, as providers do with an `error`
// part or a finish reason of "error", observes nothing). Tool calls the provider ran itself
// (`providerExecuted`, e.g. web search) come with the final answer and do not make it an
// intermediate step. The middleware needs nothing from `ai` at
// runtime; it follows the LanguageModelV3 middleware contract (AI SDK 6), which AI SDK 7
// runs unchanged (its V4 middleware has the same hooks and parts).

/** The `providerOptions` key read by the middleware: `{ userMemory: { threadId } }`. */
export const PROVIDER_OPTIONS_KEY = "userMemory";

/**
 * @param {import("./ai-sdk.js").UserMemoryMiddlewareOptions} options
 * @returns {import("ai").LanguageModelMiddleware}
 */
export function userMemoryMiddleware({ memory, threadId, inject = true, observe = true, onError = warn }) {
  if (!memory) throw Object.assign(new TypeError("userMemoryMiddleware({ memory }) needs a UserMemory (or the promise of one)"), { code: "INVALID_INPUT" });

  /** Observes `params.prompt` followed by the model's answer; never throws. */
  async function remember(params, answer) {
    if (!observe) return;
    try {
      const m = await memory;
      await m.observe(threadOf(params, threadId), [...toMessages(params.prompt), answer]);
    } catch (e) {
      onError(e);
    }
  }

  return {
    specificationVersion: "v3",

    async transformParams({ params }) {
      if (!inject) return params;
      let block = "";
      try {
        block = await (await memory).inject(toMessages(params.prompt));
      } catch (e) {
        onError(e); // answer without memory rather than not at all
      }
      return block ? { ...params, prompt: withSystem(params.prompt, block) } : params;
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      const text = result.content.filter((p) => p.type === "text").map((p) => p.text).join("");
      const calls = result.content.filter(isClientToolCall);
      if (!failed(result.finishReason)) await remember(params, assistant(text, calls));
      return result;
    },

    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      let text = "";
      const calls = [];
      let error = false;
      const tap = new TransformStream({
        transform(part, controller) {
          if (part.type === "text-delta") text += part.delta;
          else if (isClientToolCall(part)) calls.push(part);
          else if (part.type === "error" || (part.type === "finish" && failed(part.finishReason))) error = true;
          controller.enqueue(part);
        },
        flush: () => (error ? undefined : remember(params, assistant(text, calls))),
      });
      return { ...rest, stream: stream.pipeThrough(tap) };
    },
  };
}

/** The thread id: `providerOptions.userMemory.threadId`, the option, or one derived from the first user message. */
function threadOf(params, option) {
  const fromCall = params.providerOptions?.[PROVIDER_OPTIONS_KEY]?.threadId;
  if (typeof fromCall === "string" && fromCall) return fromCall;
  const fromOption = typeof option === "function" ? option(params) : option;
  if (typeof fromOption === "string" && fromOption) return fromOption;
  // The first user message stays the same as the conversation grows: a stable id per
  // conversation without any help from the caller.
  const first = toMessages(params.prompt).find((m) => m.role === "user");
  return `auto-${hash(JSON.stringify(first?.content ?? ""))}`;
}

/** AI SDK prompt messages → the library's OpenAI-style messages (text parts only). */
function toMessages(prompt) {
  const out = [];
  for (const m of prompt) {
    if (m.role === "system") {
      out.push({ role: "system", content: m.content });
    } else if (m.role === "user") {
      out.push({ role: "user", content: textParts(m.content) });
    } else if (m.role === "assistant") {
      const calls = m.content.filter(isClientToolCall);
      out.push(assistant(textParts(m.content), calls));
    } else {
      out.push({ role: "tool", content: "" });
    }
  }
  return out;
}

function textParts(content) {
  return content.filter((p) => p.type === "text").map((p) => ({ type: "text", text: p.text }));
}

/** A tool call the application runs (its answer comes in a later step); not one the
 * provider already ran inside this response. */
function isClientToolCall(part) {
  return part.type === "tool-call" && !part.providerExecuted;
}

/** Whether a finish reason (V3: `{ unified, raw }`; older: a string) says the call failed. */
function failed(reason) {
  return (typeof reason === "string" ? reason : reason?.unified) === "error";
}

/** An assistant message; one with tool calls is an intermediate step the library skips. */
function assistant(content, calls) {
  const message = { role: "assistant", content };
  if (calls.length) message.tool_calls = calls.map((c) => ({ id: c.toolCallId, type: "function", function: { name: c.toolName } }));
  return message;
}

/** The prompt with `block` appended to its first system message (or a new one in front). */
function withSystem(prompt, block) {
  if (prompt[0]?.role === "system") {
    return [{ ...prompt[0], content: `${prompt[0].content}\n\n${block}` }, ...prompt.slice(1)];
  }
  return [{ role: "system", content: block }, ...prompt];
}

/** cyrb53: a small, well-mixed 53-bit string hash, as hex. */
function hash(s) {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16);
}

function warn(error) {
  console.warn("user-memory middleware:", error);
}
