import type { LanguageModelMiddleware, Tool } from "ai";
import type { FactCategory, UserMemory } from "./index.js";

/** The parameters of one language model call, as middleware sees them. */
export type LanguageModelCallParams = Parameters<NonNullable<LanguageModelMiddleware["transformParams"]>>[0]["params"];

/** Options of {@link userMemoryMiddleware}. */
export interface UserMemoryMiddlewareOptions {
  /** The memory (or the promise `UserMemory.open()` returned). */
  memory: UserMemory | PromiseLike<UserMemory>;
  /**
   * The conversation's thread id, or a function of the call that returns it. A call's
   * `providerOptions: { userMemory: { threadId } }` takes precedence. Without either, an id
   * is derived from the first user message (stable while the conversation grows).
   */
  threadId?: string | ((params: LanguageModelCallParams) => string | undefined);
  /** Add the memory block to the system prompt before each call. Default true. */
  inject?: boolean;
  /** Observe the conversation and the answer after each call. Default true. */
  observe?: boolean;
  /**
   * Called when injecting or observing fails; the model call itself still succeeds.
   * Default: `console.warn`.
   */
  onError?: (error: unknown) => void;
}

/** Per-call options, under `providerOptions.userMemory`. */
export interface UserMemoryProviderOptions {
  threadId?: string;
}

/** The `providerOptions` key the middleware reads: `"userMemory"`. */
export declare const PROVIDER_OPTIONS_KEY: "userMemory";

/**
 * A Vercel AI SDK (6 or 7) language model middleware: injects the memory block into the
 * system prompt before each call, and observes the conversation with the model's answer
 * after `generateText` and at the end of `streamText`.
 *
 * ```ts
 * import { wrapLanguageModel, streamText } from "ai";
 * import { userMemoryMiddleware } from "user-memory/ai-sdk";
 * const model = wrapLanguageModel({ model: baseModel, middleware: userMemoryMiddleware({ memory }) });
 * streamText({ model, messages, providerOptions: { userMemory: { threadId: "chat-42" } } });
 * ```
 */
export declare function userMemoryMiddleware(options: UserMemoryMiddlewareOptions): LanguageModelMiddleware;

/** Options of {@link memoryTools}. */
export interface MemoryToolsOptions {
  /** The memory (or the promise `UserMemory.open()` returned). */
  memory: UserMemory | PromiseLike<UserMemory>;
  /** Facts `searchMemory` returns when the model does not say (1–50). Default 5. */
  limit?: number;
  /** `searchMemory` leaves out facts scoring below this. Default 0. */
  minScore?: number;
}

/** A fact as the tools hand it to the model. */
export interface ToolFact {
  id: string;
  content: string;
  category: FactCategory;
}

/** What a tool returns when the model's input cannot be used (the model may retry). */
export interface ToolInputError {
  error: string;
}

/** The three memory tools, for `generateText({ tools })` / `streamText({ tools })` (a type
 * alias, not an interface, so it is assignable to the SDK's `ToolSet`). */
export type MemoryTools = {
  /** Searches memory (`memory.search()`): `{ query, limit? }` → the matching facts, best first, their text through `inject()`'s defences (`memory.safeText()`). */
  searchMemory: Tool<
    { query: string; limit?: number },
    { facts: (ToolFact & { confidence: number; score: number })[] } | ToolInputError
  >;
  /** Saves a fact (`memory.addFact()`): `{ content, category? }` → the stored fact; at most 1000 characters (longer is an `error` result); a fact the user asked to forget (or a trivial variant of it; with `embed`, also one of the same meaning) is not stored: `{ notStored, forgotten }` names the tombstone. */
  remember: Tool<
    { content: string; category?: FactCategory },
    { remembered: ToolFact } | { notStored: string; forgotten: string } | ToolInputError
  >;
  /** Removes a fact by id (`memory.removeFact(id, { forget: true })`, so it keeps a tombstone): `{ id }` → the removed fact; an unknown id is an `error` result. */
  forget: Tool<{ id: string }, { forgotten: { id: string; content: string } } | ToolInputError>;
};

/**
 * AI SDK tools that let the model search, add and remove memories itself (an agent's
 * "tool mode"), built on `search()`, `addFact()` and `removeFact()`. Their input schemas are
 * plain JSON Schema (the SDK's `jsonSchema()`), so no schema library is needed.
 *
 * ```ts
 * import { generateText, stepCountIs } from "ai";
 * import { memoryTools } from "user-memory/ai-sdk";
 * await generateText({ model, tools: memoryTools({ memory }), stopWhen: stepCountIs(5), messages });
 * ```
 */
export declare function memoryTools(options: MemoryToolsOptions): MemoryTools;
