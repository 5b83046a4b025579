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
// intermediate step. The middleware needs nothing from `ai` at runtime (the tools use its
// `jsonSchema()`); it follows the LanguageModelV3 middleware contract (AI SDK 6), which AI SDK 7
// runs unchanged (its V4 middleware has the same hooks and parts).

import { jsonSchema } from "ai";
import { errorCode, invalidInput } from "./errors.js";
import { MAX_FACT_CHARS } from "./memory-text.js";

/** @typedef {import("ai").LanguageModelMiddleware} Middleware */
/** The call options of the wrapped model (V3): `prompt`, `providerOptions`, …  */
/** @typedef {Parameters<NonNullable<Middleware["transformParams"]>>[0]["params"]} CallOptions */
/** @typedef {CallOptions["prompt"]} Prompt */
/** A part of a model's answer or of its stream (text, tool calls, …). */
/** @typedef {{ type: string, text?: string, toolCallId?: string, toolName?: string, providerExecuted?: boolean }} AnswerPart */
/** @typedef {import("./index.js").Message} Message */

/** The `providerOptions` key read by the middleware: `{ userMemory: { threadId } }`. */
export const PROVIDER_OPTIONS_KEY = "userMemory";

/**
 * @param {import("./ai-sdk.js").UserMemoryMiddlewareOptions} options
 * @returns {import("ai").LanguageModelMiddleware}
 */
export function userMemoryMiddleware({ memory, threadId, inject = true, observe = true, onError = warn }) {
  if (!memory) throw invalidInput("userMemoryMiddleware({ memory }) needs a UserMemory (or the promise of one)");

  /**
   * Observes `params.prompt` followed by the model's answer; never throws.
   * @param {CallOptions} params @param {Message} answer
   */
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
      const text = result.content
        .filter((p) => p.type === "text")
        .map((p) => p.text)
        .join("");
      const calls = result.content.filter(isClientToolCall);
      if (!failed(result.finishReason)) await remember(params, assistant(text, calls));
      return result;
    },

    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      let text = "";
      /** @type {AnswerPart[]} */
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

/**
 * The thread id: `providerOptions.userMemory.threadId`, the option, or one derived from the first user message.
 * @param {CallOptions} params
 * @param {import("./ai-sdk.js").UserMemoryMiddlewareOptions["threadId"]} option
 */
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

/**
 * AI SDK prompt messages → the library's OpenAI-style messages (text parts only).
 * @param {Prompt} prompt
 * @returns {Message[]}
 */
function toMessages(prompt) {
  /** @type {Message[]} */
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

/**
 * The text parts of a message's content.
 * @param {ReadonlyArray<{ type: string, text?: string }>} content
 * @returns {import("./index.js").MessagePart[]}
 */
function textParts(content) {
  return content.filter((p) => p.type === "text").map((p) => ({ type: "text", text: p.text ?? "" }));
}

/**
 * A tool call the application runs (its answer comes in a later step); not one the
 * provider already ran inside this response.
 * @param {AnswerPart} part
 */
function isClientToolCall(part) {
  return part.type === "tool-call" && !part.providerExecuted;
}

/**
 * Whether a finish reason (V3: `{ unified, raw }`; older: a string) says the call failed.
 * @param {string | { unified?: string } | undefined} reason
 */
function failed(reason) {
  return (typeof reason === "string" ? reason : reason?.unified) === "error";
}

/**
 * An assistant message; one with tool calls is an intermediate step the library skips.
 * @param {Message["content"]} content @param {AnswerPart[]} calls
 * @returns {Message}
 */
function assistant(content, calls) {
  /** @type {Message} */
  const message = { role: "assistant", content };
  if (calls.length)
    message.tool_calls = calls.map((c) => ({ id: c.toolCallId, type: "function", function: { name: c.toolName } }));
  return message;
}

/**
 * The prompt with `block` appended to its first system message (or a new one in front).
 * @param {Prompt} prompt @param {string} block
 * @returns {Prompt}
 */
function withSystem(prompt, block) {
  if (prompt[0]?.role === "system") {
    return [{ ...prompt[0], content: `${prompt[0].content}\n\n${block}` }, ...prompt.slice(1)];
  }
  return [{ role: "system", content: block }, ...prompt];
}

/** cyrb53: a small, well-mixed 53-bit string hash, as hex. @param {string} s */
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

/** @param {unknown} error */
function warn(error) {
  console.warn("user-memory middleware:", error);
}

/** The fact categories the tools offer the model (others are kept as given, but a model
 * picks better from a short list). */
/** @type {string[]} */
const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];

/**
 * @param {import("./ai-sdk.js").MemoryToolsOptions} options
 * @returns {import("./ai-sdk.js").MemoryTools}
 */
export function memoryTools({ memory, limit = 5, minScore = 0 }) {
  if (!memory) throw invalidInput("memoryTools({ memory }) needs a UserMemory (or the promise of one)");
  if (!Number.isInteger(limit) || limit < 1 || limit > 50) {
    throw invalidInput(`memoryTools: \`limit\` must be an integer from 1 to 50, found ${JSON.stringify(limit)}`);
  }
  return {
    searchMemory: {
      description:
        "Search the long-term memory about the user (preferences, background, goals, earlier decisions) for facts relevant to a question. Returns matching facts with their ids, best first.",
      inputSchema: jsonSchema({
        type: "object",
        properties: {
          query: { type: "string", description: "What to look for, in words the user would use." },
          limit: {
            type: "integer",
            minimum: 1,
            maximum: 50,
            description: `At most this many facts (default ${limit}).`,
          },
        },
        required: ["query"],
        additionalProperties: false,
      }),
      execute: async (input) => {
        const query = input?.query;
        if (typeof query !== "string" || !query.trim()) return { error: "`query` must be a non-empty string" };
        const asked = input.limit;
        const n = typeof asked === "number" && Number.isInteger(asked) && asked >= 1 ? Math.min(asked, 50) : limit;
        const m = await memory;
        const hits = await m.search(query, { limit: n, minScore });
        // Stored text reaches the model through inject()'s defences.
        return {
          facts: hits.map(({ fact, score }) => ({
            id: fact.id,
            content: m.safeText(fact.content),
            category: m.safeText(fact.category),
            confidence: fact.confidence,
            score,
          })),
        };
      },
    },
    remember: {
      description:
        "Save one lasting fact about the user to long-term memory: something they stated about themselves (a preference, their work, a goal) or asked you to remember. One short sentence in the user's language; not one-off task details.",
      inputSchema: jsonSchema({
        type: "object",
        properties: {
          content: { type: "string", description: 'The fact, e.g. "Prefers answers with code examples in Go".' },
          category: { type: "string", enum: CATEGORIES, description: "Default: context." },
        },
        required: ["content"],
        additionalProperties: false,
      }),
      execute: async (input) => {
        const raw = typeof input?.content === "string" ? input.content : "";
        if (raw.length > MAX_FACT_CHARS)
          return {
            error: `\`content\` is ${raw.length} characters long; a fact is one short sentence, at most ${MAX_FACT_CHARS} characters: store the lasting point, not the text`,
          };
        const content = raw.trim();
        if (!content) return { error: "`content` must be a non-empty string" };
        const category = CATEGORIES.includes(/** @type {string} */ (input.category)) ? input.category : undefined;
        const m = await memory;
        // What the user asked to forget stays forgotten, whoever brings it back.
        const [forgotten] = await m.forgotten({ matching: content });
        if (forgotten)
          return { notStored: "the user asked to forget this; do not store it again", forgotten: forgotten.id };
        // A fact with the same content (case and spacing aside) is returned as it is.
        const fact = await m.addFact(category ? { content, category } : { content });
        return { remembered: { id: fact.id, content: m.safeText(fact.content), category: fact.category } };
      },
    },
    forget: {
      description:
        "Remove one fact from long-term memory by its id (from searchMemory), when the user says it is wrong or asks you to forget it.",
      inputSchema: jsonSchema({
        type: "object",
        properties: { id: { type: "string", description: "The fact's id, e.g. fact_1a2b3c4d." } },
        required: ["id"],
        additionalProperties: false,
      }),
      execute: async (input) => {
        const id = input?.id;
        if (typeof id !== "string" || !id) return { error: "`id` must be a fact id from searchMemory" };
        try {
          // A tombstone, as the CLI's forget keeps: extraction and remember do not bring it back.
          const m = await memory;
          const fact = await m.removeFact(id, { forget: true });
          return { forgotten: { id: fact.id, content: m.safeText(fact.content) } };
        } catch (e) {
          // A wrong id is the model's mistake to correct, not a failure of the call.
          if (errorCode(e) === "NOT_FOUND") return { error: `no fact has the id ${id}; search first` };
          throw e;
        }
      },
    },
  };
}
