//! The TypeScript shapes shared by the exported API. wasm-bindgen copies this section into
//! the generated `.d.ts`; the exported functions refer to these names through
//! `unchecked_param_type` / `unchecked_return_type`, so the published types come straight
//! from the Rust signatures, with no patching afterwards.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/**
 * A chat message as the common SDKs make them: OpenAI style (`role`, `content`,
 * `tool_calls`), LangChain/DeerFlow style (`type`), AI SDK model messages (`content` parts)
 * and AI SDK UI messages (`parts`, from `useChat`). Only these fields are read; the SDKs'
 * own message types (`ModelMessage`, `UIMessage`, `ChatCompletionMessageParam`,
 * `BaseMessage`) are accepted as they are, with any other fields.
 */
export interface Message {
  role?: "user" | "assistant" | "system" | "tool" | "developer" | (string & {});
  type?: "human" | "ai" | "system" | "tool" | (string & {});
  /** A string, or a list of parts: text parts are read, tool parts end a step, `file` parts are uploads. */
  content?: string | readonly MessagePart[] | null;
  /** AI SDK UI messages: read instead of `content`, like it. */
  parts?: readonly MessagePart[];
  /** Assistant messages with tool calls are intermediate steps and are not remembered. */
  tool_calls?: readonly unknown[] | null;
  /**
   * When it was sent: a `Date`, an ISO-8601 string (its offset is kept: the writer's own
   * date is what "yesterday" means) or epoch milliseconds (seconds below 10^11). Also read
   * as `timestamp`, `created_at` or `date`, on the message or in its `metadata`,
   * `additional_kwargs` or `response_metadata`. The extraction prompt states the newest as
   * the conversation's date; a message without one takes its predecessor's. Typed
   * `unknown` so that any message type fits; other values are ignored.
   */
  createdAt?: unknown;
}

/** Options of `observe()`. */
export interface ObserveOptions {
  /**
   * When the conversation happened, for messages without a time of their own (a backfill of
   * old conversations): a `Date`, an ISO-8601 string or epoch milliseconds. Default: now.
   */
  at?: Date | string | number;
}

/**
 * One part of a message's `content` or `parts`. `text` / `input_text` / `output_text`
 * parts are its text; a tool part (`tool-call`, `tool-<name>`, `dynamic-tool`, `tool_use`)
 * makes the text before it an intermediate step (unless `providerExecuted`); a `file` part
 * is an upload (a turn of nothing but files is forgotten with its answer).
 */
export interface MessagePart {
  type?: string;
  text?: string;
  providerExecuted?: boolean;
}

/** One part of a list-shaped message content. */
export interface ContentPart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/** The built-in categories; other strings are kept as given. */
export type FactCategory =
  | "preference" | "knowledge" | "context" | "behavior" | "goal" | "correction" | (string & {});

/** A summary section. Unknown fields are kept. */
export interface Section {
  summary: string;
  /** ISO-8601 UTC (`…Z`), or `""` if never updated. */
  updatedAt: string;
  [key: string]: unknown;
}

/** A fact about the user. Unknown fields are kept. */
export interface Fact {
  /** `fact_` + 8 lowercase hex characters. */
  id: string;
  content: string;
  category: FactCategory;
  /** Within [0, 1]. */
  confidence: number;
  /** ISO-8601 UTC (`…Z`). */
  createdAt: string;
  /** The thread it came from, or `"manual"`. */
  source: string;
  /** Days the fact is expected to stay true, from its last confirmation (DeerFlow's field); past that it is not injected and is evicted first. */
  expected_valid_days?: number;
  /** On a `correction`: what was wrong; rendered as `(avoid: …)` in the block. */
  sourceError?: string;
  /** When the event the fact tells of happened: an ISO-8601 date or date-time (`"2023-05-07"`, `"2023-05"`, `"2023"`, `"2023-05-07T18:30:00Z"`). Set by extraction when the conversation dates it; `createdAt` stays when it was learned. A malformed value is kept but ignored. */
  happenedAt?: string;
  /** When the fact was last re-stated, merged into or reinforced (ISO-8601 UTC). */
  lastConfirmedAt?: string;
  /** How often that happened. */
  confirmationCount?: number;
  [key: string]: unknown;
}

/** The memory document, DeerFlow `memory.json` version "1.0". Unknown fields are kept. */
export interface MemoryDocument {
  version: string;
  lastUpdated: string;
  user: { workContext: Section; personalContext: Section; topOfMind: Section; [key: string]: unknown };
  history: { recentMonths: Section; earlierContext: Section; longTermBackground: Section; [key: string]: unknown };
  facts: Fact[];
  [key: string]: unknown;
}

/** The names of the six sections, as in `UpdateEvent.sections`. */
export type SectionName =
  | "workContext" | "personalContext" | "topOfMind" | "recentMonths" | "earlierContext" | "longTermBackground";

/** Argument of `addFact`. `id`, `createdAt` and `source` restore a removed fact exactly (undo). */
export interface NewFact {
  content: string;
  id?: string;
  createdAt?: string;
  source?: string;
  /** Default `"context"`. */
  category?: FactCategory;
  /** Default 0.9 (stated by the user). */
  confidence?: number;
  [key: string]: unknown;
}

/** Argument of `updateFact`: the fields to change (`null` removes an unknown field). */
export interface FactPatch {
  content?: string;
  category?: FactCategory;
  confidence?: number;
  [key: string]: unknown;
}

/** An HTTP LLM endpoint. */
export interface LlmEndpoint {
  /** Default `"openai"` (any OpenAI-compatible server: OpenAI, Ollama, vLLM, LM Studio, DeepSeek, OpenRouter …). */
  provider?: "openai" | "anthropic";
  /** API root, e.g. `http://127.0.0.1:11434/v1`; a trailing `/` is fine. A redirect to another origin is refused (the key and the conversation stay with this one). */
  baseUrl?: string;
  apiKey?: string;
  model: string;
  headers?: Record<string, string>;
  /** Abort one HTTP request after this many ms without an answer (streamed: without new data; each retry gets its own); `0` means no timeout; at most about 24 days (2^31 − 1 ms, what `setTimeout` takes). Default 60 000. */
  timeoutMs?: number;
  /** Abort the whole call after this many ms, its retries, their waits and a streamed reply included, however steadily the server drips data (`LLM_TIMEOUT`); `0` means none. Default 5 × `timeoutMs`. */
  deadlineMs?: number;
  /**
   * Retries within one attempt on 429, 5xx, timeouts and network errors, waiting 0.5 s, 1 s,
   * 2 s … or the server's `Retry-After` (at most 60 s); other 4xx are never retried.
   * Default 2, at most 10.
   */
  maxRetries?: number;
  /**
   * Reading a reply stops after this many bytes (decoded, so a gzip bomb stops too) with
   * `LLM_BAD_OUTPUT`; error bodies are read up to 64 KiB. Default 4 MiB, at least 1024.
   */
  maxResponseBytes?: number;
  /** Default 0; `null` leaves it out of the request (for models that refuse it). */
  temperature?: number | null;
  /**
   * Reply budget (`max_tokens`), default 1024 (the largest delta of the reply corpus is 381
   * tokens). A reply cut off by it (`finish_reason: "length"`, `stop_reason: "max_tokens"`)
   * before its delta is complete is asked for once more with 4× the budget (at most 8192),
   * then fails with `LLM_BAD_OUTPUT` naming the cause; one cut off in a repetition loop (a
   * small model writing the same piece over and over) is asked once more with the same
   * budget and `repeat_penalty: 1.1` instead (OpenAI-compatible endpoints, unless
   * `extraBody` sets `repeat_penalty`). `null` leaves it to the endpoint
   * (OpenAI-compatible only). Reasoning models spend it on thinking too: give them more.
   */
  maxTokens?: number | null;
  /**
   * How the reply is constrained. `"schema"` (default): the delta's JSON schema
   * (`DELTA_SCHEMA`) as OpenAI's strict `response_format` or Anthropic's forced tool call;
   * `true`: any JSON object (`response_format: { type: "json_object" }`, OpenAI-compatible
   * only); `false`: nothing. An endpoint that refuses one (HTTP 400/422 naming it) gets the
   * next, schema → JSON → text, remembered for the instance.
   */
  jsonMode?: "schema" | boolean;
  /**
   * Stream the reply (server-sent events), default true: headers arrive at once (Node's
   * fetch gives up after 300 s without them), `timeoutMs` counts from the last data
   * received, and reading stops as soon as the delta is complete. An endpoint answering
   * with plain JSON, or refusing the parameter, is read whole and asked without streaming
   * from then on.
   */
  stream?: boolean;
  /**
   * More fields of every request body, sent as given: the sampling settings of a local
   * server, e.g. `{ repeat_penalty: 1.1, top_k: 40 }` (llama.cpp, LM Studio),
   * `{ frequency_penalty: 0.3 }` (OpenAI-compatible), `{ options: { num_ctx: 8192 } }`
   * (Ollama's own fields). The fields the library writes itself (`model`, `messages`,
   * `system`, `stream`, `stream_options`, `max_tokens`, `max_completion_tokens`,
   * `response_format`, `temperature`, `tools`, `tool_choice`, `functions`, `function_call`)
   * are refused with `INVALID_INPUT`: use the options for those.
   */
  extraBody?: Record<string, unknown>;
}

/**
 * What an `LlmFunction` may return: the reply text, an AI SDK `generateText()` result (its
 * `text` is read), a list of content parts, or `{ content }`.
 */
export type LlmReply = string | { text: string; [key: string]: unknown } | ContentPart[] | { content: string | ContentPart[]; [key: string]: unknown };

/**
 * Any LLM as a function: an SDK, a server proxy, Workers AI … A throw or rejection is
 * `LLM_FAILED` (or the `code` of the error when it is one of ours, e.g. `LLM_HTTP` with
 * `status`); a reply without a memory delta is `LLM_BAD_OUTPUT`.
 */
export type LlmFunction = (request: LlmFunctionRequest) => LlmReply | Promise<LlmReply>;

/** What an `LlmFunction` is called with. */
export interface LlmFunctionRequest {
  /** The instructions and the delta format. */
  system: string;
  /** The current memory as JSON, then the filtered conversation. */
  prompt: string;
  /** Aborted by `close()`; pass it on to `fetch` or the SDK so the request stops too. */
  signal: AbortSignal;
}

/** An OpenAI-compatible embeddings endpoint (OpenAI, Ollama's `/v1`, vLLM, LM Studio …): `POST {baseUrl}/embeddings`. */
export interface EmbedEndpoint {
  /** API root; default `https://api.openai.com/v1`. */
  baseUrl?: string;
  apiKey?: string;
  model: string;
  headers?: Record<string, string>;
  /** Requested vector size (`dimensions` of the OpenAI API); vectors of another size are computed again. */
  dimensions?: number;
  /** Fact texts per request (1–2048). Default 32. */
  batchSize?: number;
  /** Timeout of a batch of facts (background). Default 60 000; `0` means none. */
  timeoutMs?: number;
  /** The whole call for a batch of facts, its retries and their waits included. Default 5 × `timeoutMs`; `0` means none. */
  deadlineMs?: number;
  /** Timeout of the query embedding before `inject()` (one try, no retry; on the chat's critical path). Default 2000. */
  queryTimeoutMs?: number;
  /** Put before each query text, for models that embed queries and documents differently (e5: `"query: "`). Default `""`. */
  queryPrefix?: string;
  /** Put before each fact text (e5: `"passage: "`); changing it embeds the facts again. Default `""`. */
  factPrefix?: string;
  /** Retries of a batch of facts on 429, 5xx, timeouts and network errors. Default 2. */
  maxRetries?: number;
  /** Longest response read. Default 4 MiB. */
  maxResponseBytes?: number;
}

/** Vectors, one per text, in order: `number[][]`, `Float32Array[]` … */
export type EmbedVectors = ArrayLike<number>[];

/** What an `EmbedFunction` is called with besides the texts. */
export interface EmbedFunctionOptions {
  /** Aborted on the timeout and by `close()`. */
  signal: AbortSignal;
  /** `"query"`: the recent turns before `inject()` (answer fast); `"facts"`: a batch of facts, in the background. */
  purpose: "query" | "facts";
}

/** Any embedding model as a function: transformers.js, Workers AI, an SDK. A throw or a rejection is `EMBED_FAILED`. */
export type EmbedFunction = (texts: string[], options: EmbedFunctionOptions) => EmbedVectors | Promise<EmbedVectors>;

/** An `EmbedFunction` with settings. */
export interface EmbedFunctionConfig {
  function: EmbedFunction;
  /** Names the vectors: change it when the function's model changes, and stored vectors are computed again. Default `"function"`. */
  model?: string;
  /** Default 32. */
  batchSize?: number;
  /** Default 60 000. */
  timeoutMs?: number;
  /** Default 2000. */
  queryTimeoutMs?: number;
}

/** The embedding model as `options()` shows it (never the key or header values). */
export interface ResolvedEmbed {
  /** The endpoint; `null` for an `EmbedFunction`. */
  baseUrl: string | null;
  model: string;
  dimensions: number | null;
  batchSize: number;
  timeoutMs: number;
  queryTimeoutMs: number;
}

/** A string key-value store: files, Durable Object storage, KV, anything. */
export interface StorageAdapter {
  get(key: string): Promise<string | null | undefined> | string | null | undefined;
  set(key: string, value: string): Promise<void> | void;
  delete(key: string): Promise<unknown> | unknown;
  /** Keys starting with `prefix`; lets the library remove leftovers of crashed commits. */
  keys?(prefix: string): Promise<string[]> | string[];
  /** Set only if the current value is `expected` (`null` = absent); with it concurrent writers never lose an update. */
  compareAndSet?(key: string, expected: string | null, value: string): Promise<boolean> | boolean;
  /** Shown in error messages. */
  name?: string;
  /** The default rollback mark of encrypted memory in this store (`encryption.mark`); kept outside the store. */
  rollbackMark?: RollbackMark;
}

/** Options of `UserMemory.open()`. All optional; without `llm` the instance only reads, edits and queues. */
export interface UserMemoryOptions {
  /** Memory namespace (1–64 characters, case-sensitive): one memory per agent or user. Default `"default"`. */
  agent?: string;
  /** Alias of `agent` (the name mem0 and Zep use). Giving both with different values is `INVALID_INPUT`. */
  userId?: string;
  /** Default `"indexeddb"` where it exists, else `"memory"`. */
  storage?: "indexeddb" | "localstorage" | "memory" | StorageAdapter;
  /**
   * `true`: ask the browser to keep IndexedDB/localStorage (`navigator.storage.persist()`),
   * without waiting for the answer (Firefox asks the user). Default false.
   */
  persist?: boolean;
  /**
   * The extraction model. Without it the instance is for reading (a request handler that
   * only injects): `observe()` still queues, in storage, for an instance with an `llm` to
   * process; `flush()` and `processDue()` reject with `INVALID_INPUT`; `autoProcess` is off.
   */
  llm?: LlmEndpoint | LlmFunction;
  /** Quiet time after the last `observe()` before extraction. Default 30 000. */
  debounceMs?: number;
  /** Longest wait of a queued conversation under a continuous stream. Default 300 000. */
  maxWaitMs?: number;
  /** Failed attempts before a queued conversation is dropped (with an `ABANDONED` error event). Default 5. */
  maxAttempts?: number;
  /** At most this many facts; extraction, `addFact` and `import` evict beyond it (a manual fact never by an extraction). Default 10 000: a user's whole history (an extraction shows only the facts that matter, `extractionMemoryTokens`). */
  maxFacts?: number;
  /** What goes first over `maxFacts` (expired facts always go first): `"confidence"` (lowest confidence, among equals the newest) or `"hybrid"` (0.7 × confidence + 0.3 × confirmation freshness, halving every 90 days). Default `"confidence"`. */
  evictionPolicy?: "confidence" | "hybrid";
  /** Token budget of one extraction call: instructions, memory, conversation and 1 024 tokens for the reply. A larger burst of new messages is split into several calls, oldest first. Default 8192 (an 8k-context model); at least 2048. */
  maxExtractionTokens?: number;
  /** Tokens of facts one extraction prompt shows at most. A larger memory shows the summaries, the facts the ranker puts on top for the new messages (manual facts and corrections first; hybrid with `embed`) and recent ones; a removal of a fact not shown is refused (`not-shown`). Duplicates, merges and forget tombstones still check the whole memory. Default 2000; 0 shows only the summaries. */
  extractionMemoryTokens?: number;
  /** New facts need at least this confidence. Default 0.7. */
  factConfidenceThreshold?: number;
  /** Budget of the injected block, tags and headers included. Default 2000. */
  maxInjectionTokens?: number;
  /** Default 15. */
  topFacts?: number;
  /** Up to this many facts beyond `topFacts` when that many more are clearly relevant
   * (similarity ≥ 0.3). Default 15; 0: exactly `topFacts`. */
  extraFacts?: number;
  /** Turns of the conversation used as the relevance query. Default 3. */
  recentTurns?: number;
  /** Default 0.6. */
  similarityWeight?: number;
  /** Default 0.4. */
  confidenceWeight?: number;
  /** Token counter for the budget (e.g. a tiktoken port). Default: a built-in CJK-aware estimate. */
  countTokens?: (text: string) => number;
  /** `false`: `inject()` returns `""`. Default true. */
  injectionEnabled?: boolean;
  /** Injected facts and summaries keep the words of links and images and drop their URLs (a bare URL keeps its host). Default true. */
  neutralizeLinks?: boolean;
  /** Each fact line shows its date, `- [context | 0.90 | 2023-05-07] …`: its `happenedAt` as written, else the day of its `createdAt`. Default true. */
  injectDates?: boolean;
  /** `false`: `observe()` queues nothing (pause learning). Default true. */
  enabled?: boolean;
  /** `false`: no timers; call `processDue()` yourself (Workers, alarms). Default true. */
  autoProcess?: boolean;
  /**
   * How long `close()` waits for storage (its last queue write, or an operation still running)
   * before it rejects with `STORAGE_UNAVAILABLE` naming the store. Default 10 000.
   */
  closeTimeoutMs?: number;
  /** Replace (`instructions`) or extend (`append`) the extraction prompt. */
  prompt?: { instructions?: string; append?: string };
  /** An embedding model fused with the lexical ranking (docs/injection.md: Semantic recall). `false`/`null`: none (the default). */
  embed?: EmbedEndpoint | EmbedFunction | EmbedFunctionConfig | false | null;
  /** History entries kept with the document (`history()`, `revert()`, `undo()`); `0` turns the history off. Default 100 (and at most 256 KiB of entries, the newest always kept). */
  historyLimit?: number;
  /** Encrypt everything stored (AES-256-GCM through WebCrypto) with your key or a passphrase (PBKDF2-SHA256, 600 000 iterations). Never stored, never in an event, option or error. */
  encryption?: Encryption;
}

/** The user's key for encryption at rest: an AES-GCM `CryptoKey` (usages encrypt, decrypt), or a passphrase (with an optional salt of ≥ 16 bytes for a new memory; random otherwise). */
export type Encryption = ({ key: CryptoKey } | { passphrase: string; salt?: Uint8Array }) & {
  /** Where this device keeps the rollback mark (the highest document revision it saw, sealed under the data key), outside the store, so a process started after the whole store was put back from an older backup reports `ROLLBACK`. Default: the storage adapter's `rollbackMark` (`fileStore`: a file under the OS cache folder), localStorage for IndexedDB and localStorage memory, else none. `false`: none. A missing or unreadable mark counts as none. */
  mark?: RollbackMark | false;
};

/** A small string store outside the memory's store, for the rollback mark (values are sealed: never a secret in the clear). */
export interface RollbackMark {
  get(name: string): Promise<string | null | undefined> | string | null | undefined;
  set(name: string, value: string): Promise<void> | void;
  /** Shown in a `ROLLBACK` message (where to delete the mark to accept an older copy on purpose). */
  name?: string;
}

/** Options of `UserMemory.encrypt()`. */
export interface EncryptOptions extends StorageOptions {
  /** The key of the memory (for plain memory: the key to encrypt it with). */
  encryption: Encryption;
  /** Rotate to this key: a new data key, every value re-sealed (crash-safe and resumable). */
  newEncryption?: Encryption;
}

/** Options that `configure()` can change on an open instance. */
export type RuntimeOptions = Partial<Omit<UserMemoryOptions, "agent" | "userId" | "llm" | "storage" | "persist" | "countTokens">>;

/** The options in force, as `options()` returns them. */
export interface ResolvedOptions {
  agent: string;
  /** The storage in force: `"indexeddb"`, `"localstorage"`, `"memory"` (the default where there is no IndexedDB: Node, Workers), or an adapter's `name` (`"adapter"` without one). */
  storage: "indexeddb" | "localstorage" | "memory" | (string & {});
  debounceMs: number;
  maxWaitMs: number;
  maxAttempts: number;
  maxFacts: number;
  evictionPolicy: "confidence" | "hybrid";
  factConfidenceThreshold: number;
  maxExtractionTokens: number;
  extractionMemoryTokens: number;
  maxInjectionTokens: number;
  topFacts: number;
  extraFacts: number;
  recentTurns: number;
  similarityWeight: number;
  confidenceWeight: number;
  injectionEnabled: boolean;
  neutralizeLinks: boolean;
  injectDates: boolean;
  enabled: boolean;
  autoProcess: boolean;
  closeTimeoutMs: number;
  historyLimit: number;
  prompt: { instructions: string | null; append: string | null };
  persist: boolean;
  /** Whether memory is encrypted at rest (the key itself is never shown). */
  encryption: boolean;
  persistence: Persistence;
  embed: ResolvedEmbed | null;
}

/**
 * Whether the browser keeps this origin's storage: `"persistent"` (until the user deletes it),
 * `"best-effort"` (it may be evicted: under storage pressure, or by Safari after 7 days without
 * a visit), `"unknown"` (no `navigator.storage` here, or storage that is not the browser's).
 */
export type Persistence = "persistent" | "best-effort" | "unknown";

/** Where to find stored memory, for `UserMemory.inspect()` and `UserMemory.reset()`. */
export interface StorageOptions {
  agent?: string;
  /** Alias of `agent`. */
  userId?: string;
  storage?: "indexeddb" | "localstorage" | "memory" | StorageAdapter;
}

/** Raw stored data, for recovery. */
export interface StoredData {
  document: string | null;
  queue: string | null;
  /** The fact vectors of the embedding model (`embed`), or `null`. */
  vectors: string | null;
  documentError?: UserMemoryError;
  queueError?: UserMemoryError;
  vectorsError?: UserMemoryError;
  /** The encryption key record (plain JSON: KDF parameters and the wrapped data key, never the key itself), or `null` for plain memory. */
  key: string | null;
  keyError?: UserMemoryError;
}

/** Options of `history()`. */
export interface HistoryOptions {
  /** At most this many entries (newest first). Default: all kept. */
  limit?: number;
  /** Only entries of revisions below this (paging: the `revision` of the last entry seen). */
  before?: number;
}

/** What one commit changed in the document (`history()`), newest first. */
export interface HistoryEntry {
  /** The revision the commit made. */
  revision: number;
  /** When (epoch ms). */
  at: number;
  reason: "extraction" | "addFact" | "updateFact" | "removeFact" | "updateSection" | "clear" | "import" | "revert";
  /** The thread of an extraction. */
  threadId?: string;
  /** For a revert: the revision whose document it restored. */
  revertedTo?: number;
  /** Sections whose summary (or `updatedAt`) changed. */
  sections: { name: SectionName; before: Section; after: Section }[];
  added: Fact[];
  /** Removed facts, whole: what a revert brings back. */
  removed: Fact[];
  /** Positions the removed facts had (in order). */
  removedAt: number[];
  /** Facts changed under their id, with the old values. */
  changed: { before: Fact; after: Fact }[];
  /** The ids of the facts before, when the commit re-ordered them. */
  order?: string[];
  /** The document's other fields before (`version`, unknown fields), when they changed (an import). */
  memory?: { version: string; extra: Record<string, unknown>; user: Record<string, unknown>; history: Record<string, unknown> };
  /** Ids of the facts this commit forgot (`removeFact(id, { forget: true })`). */
  forgot?: string[];
}

/** Options of `removeFact()`. */
export interface RemoveOptions {
  /** Keep a tombstone of the fact's content, so extraction does not learn it again (`forgotten()`, `unforget()`). */
  forget?: boolean;
}

/** Options of `forgotten()`. */
export interface ForgottenOptions {
  /** Only the tombstone this text matches (the same fact, or a trivial variant of it: an added word, a confusable letter, a one-letter slip; with `embed`, also a fact of the same meaning, as extraction compares), if any. */
  matching?: string;
}

/** Options of `clear()`. */
/** Options of `undo()`. */
export interface UndoOptions {
  /** The history entry to undo (a `revision` of `history()`); default: the newest entry at the time of the call. If another instance already undid it, `undo()` is a no-op; if a newer change is in effect on top of it, `CONFLICT` and nothing is written. */
  revision?: number;
}

export interface ClearOptions {
  /** Drop the forget tombstones too (by default they stay: the user still wants those things forgotten). */
  tombstones?: boolean;
}

/** A forget tombstone: only what matching needs. */
export interface ForgottenFact {
  /** The id the removed fact had. */
  id: string;
  /** Its content, normalised (lower-cased, whitespace collapsed). */
  content: string;
  /** When it was forgotten (epoch ms). */
  at: number;
}

/** Why one fact was or was not injected. */
export interface FactExplanation {
  id: string;
  content: string;
  category: FactCategory;
  /** Lexical similarity to the recent turns in [0, 1]: BM25 over CJK-aware terms, divided by the best match. */
  lexical: number;
  /** Embedding similarity in [0, 1] (the cosine, min-max normalised over the facts); `null` without `embed`, when the query could not be embedded, or while the fact has no vector yet. */
  dense: number | null;
  /** The similarity the score uses: `lexical`, or `(lexical + dense) / 2` when `dense` is known. */
  similarity: number;
  confidence: number;
  /** `similarityWeight × similarity + confidenceWeight × confidence`. */
  score: number;
  /** The date the fact's line shows (`happenedAt` as written, else the day of `createdAt`), also with `injectDates: false`; `null` without a valid one. */
  date: string | null;
  createdAt: string;
  /** The fact's event time, `null` without a valid one. */
  happenedAt: string | null;
  /** Tokens of the rendered fact line. */
  tokens: number;
  included: boolean;
  reason: string;
}

/** The result of `explain()`: the block `inject()` would return and every fact's numbers, in score order. */
export interface Explanation {
  block: string;
  tokens: number;
  facts: FactExplanation[];
}

/** Options of `explain()`. */
export interface ExplainOptions {
  /** Facts reported besides those in the block, best first (≥ 1, or `Infinity`). Default: the block's fact count + 20. */
  limit?: number;
}

/** Options of `search()`. */
export interface SearchOptions {
  /** At most this many results (≥ 1). Default 10. */
  limit?: number;
  /** Leave out results whose `score` is below this. Default 0. */
  minScore?: number;
}

/** One fact matching a `search()` query, with the numbers `inject()` ranks by. */
export interface SearchResult {
  fact: Fact;
  /** Lexical similarity in [0, 1]: BM25 over CJK-aware terms, divided by the best match of this query. */
  lexical: number;
  /** Embedding similarity in [0, 1]; `null` without `embed`, when the query could not be embedded, or while the fact has no vector yet. */
  dense: number | null;
  /** The similarity the score uses: `lexical`, or `(lexical + dense) / 2` when `dense` is known. */
  similarity: number;
  /** `similarityWeight × similarity + confidenceWeight × confidence`. */
  score: number;
  /** The date `inject()` shows for the fact (`happenedAt` as written, else the day of `createdAt`); `null` without a valid one. */
  date: string | null;
}

/** What `flush()` / `processDue()` did. */
export interface RunReport {
  processed: string[];
  failed: string[];
}

/** The queue as one instance sees it. */
export interface QueueStatus {
  pending: string[];
  nextDueAt: number | null;
  processing: boolean;
  revision: number;
  /** The browser storage's persistence; it changes when the browser answers `persist: true`. */
  persistence: Persistence;
  /** Extractions this instance committed since it opened, and how many of them learned nothing (`empty / total` near 1: the model never learns; see docs/local-models.md). */
  extractions: { total: number; empty: number };
}

/** Stable error codes. */
export type ErrorCode =
  | "INVALID_INPUT" | "STORAGE_QUOTA" | "STORAGE_UNAVAILABLE" | "STORAGE_FAILED" | "CORRUPT_MEMORY"
  | "LLM_HTTP" | "LLM_TIMEOUT" | "LLM_NETWORK" | "LLM_FAILED" | "LLM_BAD_OUTPUT"
  | "CONFLICT" | "NOT_FOUND" | "CLOSED" | "ABANDONED" | "EMBED_FAILED" | "DECRYPT_FAILED" | "ROLLBACK";

/** Every error thrown or reported is an `Error` with `name: "UserMemoryError"` and a stable `code`. */
export interface UserMemoryError extends Error {
  name: "UserMemoryError";
  code: ErrorCode;
  /** HTTP status, for `LLM_HTTP`. */
  status?: number;
}

/** Memory changed (here or in another tab/process). */
export interface UpdateEvent {
  type: "update";
  reason: "extraction" | "addFact" | "updateFact" | "removeFact" | "updateSection" | "clear" | "import" | "revert" | "remote";
  threadId: string | null;
  revision: number;
  added: Fact[];
  removed: string[];
  changed: Fact[];
  sections: SectionName[];
  /** Facts the `maxFacts` cap dropped in this change (stored ones are also in `removed`; an imported or new fact dropped at once only here). */
  evicted: Fact[];
}

/** Why part of a model reply was not applied as it stood (see docs/pipeline.md for every reason). */
export type SkipReason =
  | "invalid" | "below-threshold" | "scope-gated" | "assistant-copy" | "upload" | "duplicate" | "near-duplicate"
  | "unchanged" | "evicted" | "replacement-not-applied" | "no-fact-applied" | "too-many-removals" | "removal-unrelated"
  | "unknown-fact" | "not-shown" | "forgotten" | "secret" | "prompt-copy" | "fragment" | "task-residue";

/** One part of a model reply that was refused, or folded into an existing fact. */
export interface SkippedPart {
  /** Where in the reply, e.g. `"newFacts[2]"`, `"factsToRemove[0]"`, `"user.topOfMind"`. */
  path: string;
  reason: SkipReason;
  /** What exactly, in words. */
  detail: string;
  /** The fact concerned: the one merged into or confirmed, the one a refused removal named. */
  factId: string | null;
}

/** A queued conversation was extracted and applied, also when nothing was new. */
export interface ProcessedEvent {
  type: "processed";
  threadId: string;
  /** Whether memory changed (if so, an `update` event came first). */
  changed: boolean;
  revision: number;
  /** Parts of the model's reply that were refused or folded into an existing fact, with a stable reason (one bad fact never drops the rest). */
  skipped: SkippedPart[];
  /** Tokens of the extraction call: the provider's `usage` when it sent one (`reported: true`), else the token counter's estimate. */
  usage: { promptTokens: number; completionTokens: number; reported: boolean };
  /** What the reply proposed (new facts, section updates, removals, reinforcements); 0: the model said nothing changed. */
  proposed: number;
  /** What memory learned from it: facts added and sections replaced. 0 is an empty extraction. */
  learned: number;
}

/** Something failed in the background. */
export interface MemoryErrorEvent {
  type: "error";
  code: ErrorCode;
  message: string;
  /** The queued thread concerned; `null` for queue-wide problems (storage, a corrupt entry). */
  threadId: string | null;
  /** Which attempt of that thread failed (1-based); the entry is dropped after `maxAttempts` (then `code` is `"ABANDONED"`). */
  attempt: number | null;
  error: UserMemoryError;
}

/** A conversation was queued. */
export interface QueuedEvent {
  type: "queued";
  threadId: string;
  /** When the queue is due (epoch ms). */
  dueAt: number | null;
  pending: number;
}

/** A diagnostic note: nothing failed, but something happened an application may not expect. */
export interface DebugEvent {
  type: "debug";
  /** `NOT_QUEUED`: `observe()` resolved `false` (`reason` says why). `EPHEMERAL_STORAGE`: a Node process queued into memory that ends with the process (once per process). `EMPTY_EXTRACTIONS`: 5 extractions in a row learned nothing (`message` names the likely cause and the setting to try). `HISTORY_DROPPED`: storage was full, so `removeFact()` or `clear()` was written without its oldest history entries (or without any), which can no longer be undone (`reason: "storage-full"`). */
  code: "NOT_QUEUED" | "EPHEMERAL_STORAGE" | "EMPTY_EXTRACTIONS" | "HISTORY_DROPPED";
  message: string;
  threadId: string | null;
  /** For `NOT_QUEUED`: learning paused, no messages, no user message with text, or no final answer. */
  reason: "paused" | "empty" | "no-user-message" | "no-answer" | "already-extracted" | "nothing-proposed" | "all-refused" | "storage-full" | null;
}

/** Event names and their payloads. */
export interface MemoryEvents {
  update: UpdateEvent;
  error: MemoryErrorEvent;
  queued: QueuedEvent;
  processed: ProcessedEvent;
  debug: DebugEvent;
}

export interface UserMemory {
  /** Subscribes to an event; returns the unsubscribe function. */
  on<K extends keyof MemoryEvents>(event: K, listener: (event: MemoryEvents[K]) => void): () => void;
  /**
   * Queues the conversation of thread `threadId` for extraction (debounced). Returns at
   * once; the promise resolves to `true` once the entry is persisted, or `false` when there
   * was nothing worth remembering (a `debug` event with code `NOT_QUEUED` says why). Throws
   * `INVALID_INPUT` or `CLOSED` synchronously. Ignoring the promise is fine: a storage
   * failure is also an `error` event, and the promise never becomes an unhandled rejection.
   * `options.at` dates a backfill (see `ObserveOptions`).
   */
  observe<M extends Message>(threadId: string, messages: readonly M[], options?: ObserveOptions): Promise<boolean>;
  /** The `<memory>…</memory>` block for the next model call, or `""`. */
  inject<M extends Message>(messages: readonly M[]): Promise<string>;
  /**
   * Per fact: similarity, confidence, score, token cost, whether it was injected and why. Reports
   * the facts in the block and the first `limit` by score (default: the block's fact count + 20);
   * `limit: Infinity` reports every fact.
   */
  explain<M extends Message>(messages: readonly M[], options?: ExplainOptions): Promise<Explanation>;
}
"#;
