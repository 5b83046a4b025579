import type { LanguageModelMiddleware } from "ai";
import type { UserMemory } from "./index.js";

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
