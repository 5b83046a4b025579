// A TypeScript consumer of every public API, compiled with `tsc --strict --noEmit` against
// the packed tarball (tests/packaging/types.test.mjs). Besides compiling, it asserts at the
// type level that the public signatures are precise: no `any`, exact parameter and result
// types, typed event payloads, and misuse rejected (`@ts-expect-error` fails the build when
// the line does compile).
import {
  init,
  initSync,
  UserMemory,
  type ErrorCode,
  type MemoryErrorEvent,
  type Explanation,
  type Fact,
  type FactPatch,
  type LlmEndpoint,
  type LlmFunction,
  type LlmFunctionRequest,
  type MemoryDocument,
  type Message,
  type NewFact,
  type QueuedEvent,
  type QueueStatus,
  type RunReport,
  type SearchOptions,
  type SearchResult,
  type SectionName,
  type StorageAdapter,
  type StoredData,
  type UpdateEvent,
  type UserMemoryError,
  type UserMemoryOptions,
  type EmbedEndpoint,
  type EmbedFunction,
  type ResolvedEmbed,
  type HistoryEntry,
  type ForgottenFact,
  type Encryption,
} from "user-memory";
import wasmUrl from "user-memory/wasm";
import { memoryPool, type MemoryLease } from "user-memory/node";
import { fileName, FileStore, fileStore, type FileStoreOptions } from "user-memory/node";
import { DurableObjectStore, durableObjectStore, type DurableObjectStorageLike } from "user-memory/workers";
import {
  memoryTools,
  PROVIDER_OPTIONS_KEY,
  userMemoryMiddleware,
  type MemoryTools,
  type UserMemoryMiddlewareOptions,
} from "user-memory/ai-sdk";
import {
  generateText,
  stepCountIs,
  streamText,
  wrapLanguageModel,
  type LanguageModel,
  type LanguageModelMiddleware,
} from "ai";

// ---- type-level checks ----
type IsAny<T> = 0 extends 1 & T ? true : false;
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;
type Method = (...args: never[]) => unknown;
/** true when no parameter and not the result of `F` is `any`. */
type Precise<F extends Method> =
  IsAny<ReturnType<F>> extends true
    ? false
    : true extends { [K in keyof Parameters<F>]: IsAny<Parameters<F>[K]> }[number]
      ? false
      : true;

type M = UserMemory;
export type Checks = [
  Expect<Equal<ReturnType<typeof UserMemory.open>, Promise<UserMemory>>>,
  Expect<Equal<Parameters<typeof UserMemory.open>[0], UserMemoryOptions>>,
  Expect<Equal<Parameters<M["observe"]>[0], string>>,
  Expect<Equal<Parameters<M["observe"]>[1], readonly Message[]>>,
  Expect<Equal<ReturnType<M["observe"]>, Promise<boolean>>>,
  Expect<Equal<ReturnType<M["inject"]>, Promise<string>>>,
  Expect<Equal<ReturnType<M["explain"]>, Promise<Explanation>>>,
  Expect<Equal<ReturnType<M["flush"]>, Promise<RunReport>>>,
  Expect<Equal<ReturnType<M["processDue"]>, Promise<RunReport>>>,
  Expect<Equal<ReturnType<M["nextDueAt"]>, number | null>>,
  Expect<Equal<ReturnType<M["status"]>, QueueStatus>>,
  Expect<Equal<ReturnType<M["get"]>, Promise<MemoryDocument>>>,
  Expect<Equal<ReturnType<M["export"]>, Promise<MemoryDocument>>>,
  Expect<Equal<Parameters<M["import"]>[0], MemoryDocument | string>>,
  Expect<Equal<Parameters<M["addFact"]>[0], NewFact>>,
  Expect<Equal<ReturnType<M["addFact"]>, Promise<Fact>>>,
  Expect<Equal<Parameters<M["updateFact"]>, [id: string, patch: FactPatch]>>,
  Expect<Equal<ReturnType<M["removeFact"]>, Promise<Fact>>>,
  Expect<Equal<ReturnType<M["clear"]>, Promise<void>>>,
  Expect<Equal<ReturnType<M["search"]>, Promise<SearchResult[]>>>,
  Expect<Equal<Parameters<M["search"]>[0], string>>,
  Expect<Precise<M["search"]>>,
  Expect<Equal<ReturnType<M["close"]>, Promise<void>>>,
  Expect<Equal<ReturnType<typeof UserMemory.inspect>, Promise<StoredData>>>,
  Expect<Equal<ReturnType<typeof UserMemory.reset>, Promise<void>>>,
  Expect<Precise<M["observe"]>>,
  Expect<Precise<M["inject"]>>,
  Expect<Precise<M["explain"]>>,
  Expect<Precise<M["import"]>>,
  Expect<Precise<M["addFact"]>>,
  Expect<Precise<M["updateFact"]>>,
  Expect<Precise<M["removeFact"]>>,
  Expect<Precise<typeof UserMemory.open>>,
  Expect<Precise<typeof UserMemory.inspect>>,
  Expect<Precise<typeof UserMemory.reset>>,
  Expect<Precise<typeof init>>,
  Expect<Precise<typeof initSync>>,
  Expect<Precise<typeof fileStore>>,
  Expect<Precise<typeof durableObjectStore>>,
  Expect<Precise<typeof userMemoryMiddleware>>,
  Expect<Precise<FileStore["compareAndSet"]>>,
  Expect<Precise<DurableObjectStore["compareAndSet"]>>,
  Expect<Equal<ReturnType<typeof userMemoryMiddleware>, LanguageModelMiddleware>>,
  Expect<Equal<typeof PROVIDER_OPTIONS_KEY, "userMemory">>,
  Expect<Equal<UserMemoryError["code"], ErrorCode>>,
  Expect<IsAny<Fact[keyof Fact]> extends true ? false : true>,
];

// ---- a storage adapter of one's own ----
class MapStore implements StorageAdapter {
  readonly name = "map";
  private readonly map = new Map<string, string>();
  get(key: string): string | null {
    return this.map.get(key) ?? null;
  }
  set(key: string, value: string): void {
    this.map.set(key, value);
  }
  delete(key: string): boolean {
    return this.map.delete(key);
  }
  async keys(prefix: string): Promise<string[]> {
    return [...this.map.keys()].filter((k) => k.startsWith(prefix));
  }
  async compareAndSet(key: string, expected: string | null, value: string): Promise<boolean> {
    if ((this.map.get(key) ?? null) !== expected) return false;
    this.map.set(key, value);
    return true;
  }
}
// @ts-expect-error an adapter needs get, set and delete
const incomplete: StorageAdapter = { get: async () => null, set: async () => {} };
void incomplete;

export async function everything(): Promise<void> {
  await init();
  // The README's esbuild recipe: the file loader's URL of the .wasm, passed to init().
  const url: string = wasmUrl;
  await init(url);
  const endpoint: LlmEndpoint = {
    baseUrl: "http://127.0.0.1:11434/v1",
    model: "llama3.1",
    timeoutMs: 60_000,
    maxRetries: 2,
    headers: { "x-app": "demo" },
  };
  const fn: LlmFunction = async ({ system, prompt, signal }: LlmFunctionRequest) => {
    const aborted: boolean = signal.aborted;
    return `${system.length}${prompt.length}${aborted}`;
  };
  const options: UserMemoryOptions = {
    agent: "coder",
    storage: new MapStore(),
    llm: fn,
    debounceMs: 30_000,
    maxWaitMs: 300_000,
    maxAttempts: 5,
    maxFacts: 100,
    factConfidenceThreshold: 0.7,
    maxInjectionTokens: 2000,
    topFacts: 15,
    recentTurns: 3,
    similarityWeight: 0.6,
    confidenceWeight: 0.4,
    countTokens: (text) => Math.ceil(text.length / 4),
    injectionEnabled: true,
    enabled: true,
    autoProcess: true,
    prompt: { append: "Remember the user's favourite editor." },
    embed: {
      function: async (texts, { signal, purpose }) =>
        texts.map(() => (signal.aborted || purpose === "query" ? [1, 0] : new Float32Array([0, 1]))),
      model: "toy",
      queryTimeoutMs: 500,
    },
  };
  // Without llm: for reading (and queueing for an instance that has one).
  const reader = await UserMemory.open({ agent: "x", storage: "memory" });
  const where: string = reader.options().storage;
  void where;
  // @ts-expect-error llm is an endpoint or a function
  await UserMemory.open({ agent: "x", llm: "gpt-4o-mini" });
  // @ts-expect-error storage names are checked
  await UserMemory.open({ llm: endpoint, storage: "sessionstorage" });

  const memory = await UserMemory.open(options);
  const messages: Message[] = [
    { role: "user", content: "I write Go microservices" },
    { role: "assistant", content: [{ type: "text", text: "Nice." }] },
    { type: "human", content: "and some Rust" },
  ];
  const queued: boolean = await memory.observe("thread-1", messages);
  // @ts-expect-error thread ids are strings
  memory.observe(42, messages);
  const block: string = await memory.inject(messages);
  const why: Explanation = await memory.explain(messages);
  for (const f of why.facts) {
    const parts: [string, number, number, number, number, boolean, string] = [
      f.id,
      f.similarity,
      f.confidence,
      f.score,
      f.tokens,
      f.included,
      f.reason,
    ];
    const halves: [number, number | null] = [f.lexical, f.dense];
    void halves;
    void parts;
  }
  const searchOptions: SearchOptions = { limit: 5, minScore: 0.3 };
  for (const hit of [...(await memory.search("editor")), ...(await memory.search("editor", searchOptions))]) {
    const numbers: [Fact, number, number, number] = [hit.fact, hit.lexical, hit.similarity, hit.score];
    void numbers;
  }
  // @ts-expect-error search options are checked
  await memory.search("editor", { top: 3 });
  const http: EmbedEndpoint = {
    baseUrl: "http://127.0.0.1:11434/v1",
    model: "nomic-embed-text",
    dimensions: 256,
    batchSize: 16,
    queryTimeoutMs: 1500,
  };
  const fnEmbed: EmbedFunction = async (texts) => texts.map(() => [0.1, 0.2]);
  memory.configure({ embed: http });
  memory.configure({ embed: fnEmbed });
  memory.configure({ embed: false });
  const resolved: ResolvedEmbed | null = memory.options().embed;
  void resolved;
  // @ts-expect-error embed options are checked
  memory.configure({ embed: { baseUrl: "http://x", dims: 3 } });
  const report: RunReport = await memory.flush();
  const due: number | null = memory.nextDueAt();
  const { pending, nextDueAt, processing, revision }: QueueStatus = memory.status();
  const doc: MemoryDocument = await memory.get();
  const work: string = doc.user.workContext.summary;
  const exported = await memory.export();
  await memory.import(exported);
  await memory.import(JSON.stringify(exported));
  const fact: Fact = await memory.addFact({ content: "Uses Neovim", category: "preference", confidence: 0.9 });
  await memory.updateFact(fact.id, { confidence: 0.8 });
  await memory.removeFact(fact.id);
  await memory.clear();
  // History, undo and forget; encryption options.
  const entries: HistoryEntry[] = await memory.history({ limit: 5, before: 10 });
  const reason:
    "extraction" | "addFact" | "updateFact" | "removeFact" | "updateSection" | "clear" | "import" | "revert" =
    entries[0].reason;
  const restored: MemoryDocument = await memory.revert(entries[0].revision);
  await memory.undo();
  const forgotten: ForgottenFact[] = await memory.forgotten();
  await memory.removeFact(fact.id, { forget: true });
  await memory.unforget(forgotten[0].id);
  await memory.clear({ tombstones: true });
  const encrypted: boolean = memory.options().encryption;
  const passphrase: Encryption = { passphrase: "p" };
  await UserMemory.encrypt({
    agent: "coder",
    storage: "indexeddb",
    encryption: passphrase,
    newEncryption: { key: {} as CryptoKey },
  });
  const decryptFailed: ErrorCode = "DECRYPT_FAILED";
  void [reason, restored, encrypted, decryptFailed];
  await memory.processDue();

  const offUpdate: () => void = memory.on("update", (e) => {
    const added: Fact[] = e.added;
    const removed: string[] = e.removed;
    const sections: SectionName[] = e.sections;
    const reason: UpdateEvent["reason"] = e.reason;
    const extracted: boolean = reason === "extraction";
    void [added, removed, sections, extracted];
  });
  memory.on("error", (e: MemoryErrorEvent) => {
    const code: ErrorCode = e.code;
    const err: UserMemoryError = e.error;
    const attempt: number | null = e.attempt;
    void [code, err.status, attempt, e.threadId];
  });
  memory.on("queued", (e) => {
    const t: string = e.threadId;
    const at: number | null = e.dueAt;
    void [t, at, e.pending];
  });
  memory.on("debug", (e) => {
    const code: "NOT_QUEUED" | "EPHEMERAL_STORAGE" | "EMPTY_EXTRACTIONS" | "HISTORY_DROPPED" = e.code;
    if (e.reason === "no-answer") console.log(e.message, e.threadId);
    void code;
  });
  // @ts-expect-error unknown event names are rejected
  memory.on("updated", () => {});
  // @ts-expect-error an update listener does not receive queued events
  memory.on("update", (e: QueuedEvent) => void e);
  offUpdate();

  const stored: StoredData = await UserMemory.inspect({ agent: "coder", storage: new MapStore() });
  const raw: string | null = stored.document;
  const vectors: string | null = stored.vectors;
  void vectors;
  await UserMemory.reset({ agent: "coder", storage: "memory" });
  await memory.close();
  memory.free();
  void [queued, block, report, due, pending, nextDueAt, processing, revision, work, raw];

  try {
    await UserMemory.open({ llm: endpoint, storage: "indexeddb" });
  } catch (e) {
    const err = e as UserMemoryError;
    if (err.code === "STORAGE_UNAVAILABLE") console.log(err.message);
  }
}

// ---- Node: the file store ----
export async function node(): Promise<void> {
  const opts: FileStoreOptions = { staleLockMs: 5_000 };
  const store: FileStore = fileStore("./memory", opts);
  const same: StorageAdapter = new FileStore("./memory");
  const dir: string = store.dir;
  const file: string = fileName("user-memory/default/doc");
  const memory = await UserMemory.open({
    storage: store,
    llm: { baseUrl: "https://api.openai.com/v1", apiKey: "sk-…", model: "gpt-4o-mini" },
  });
  const swapped: boolean = await store.compareAndSet("k", null, "v");
  await memory.close();
  void [same, dir, file, swapped];
}

// ---- Workers: the Durable Object store, with a structural storage ----
export async function workers(storage: DurableObjectStorageLike): Promise<void> {
  const store: DurableObjectStore = durableObjectStore(storage);
  const memory = await UserMemory.open({ storage: store, autoProcess: false, llm: async () => "{}" });
  await memory.processDue();
  const due = memory.nextDueAt();
  if (due !== null) console.log(new Date(due));
  // @ts-expect-error the adapter needs a Durable Object's storage
  durableObjectStore({ get: async () => null });
}

// ---- Vercel AI SDK: the middleware ----
export async function aiSdk(model: Exclude<LanguageModel, string>, memory: UserMemory): Promise<void> {
  const options: UserMemoryMiddlewareOptions = {
    memory: UserMemory.open({ storage: "memory", llm: async () => "{}" }),
    threadId: (params) => (params.providerOptions?.app?.chatId as string | undefined) ?? undefined,
    inject: true,
    observe: true,
    onError: (error) => console.warn(error),
  };
  const wrapped = wrapLanguageModel({
    model: model as Parameters<typeof wrapLanguageModel>[0]["model"],
    middleware: userMemoryMiddleware(options),
  });
  const simple = wrapLanguageModel({
    model: model as Parameters<typeof wrapLanguageModel>[0]["model"],
    middleware: userMemoryMiddleware({ memory, threadId: "chat-1" }),
  });
  const { text } = await generateText({
    model: wrapped,
    prompt: "Hello",
    providerOptions: { [PROVIDER_OPTIONS_KEY]: { threadId: "chat-42" } },
  });
  const stream = streamText({ model: simple, messages: [{ role: "user", content: text }] });
  for await (const chunk of stream.textStream) void chunk;
  // @ts-expect-error memory is required
  userMemoryMiddleware({ threadId: "x" });

  // The memory tools: a ToolSet generateText accepts, with typed tool results.
  const tools: MemoryTools = memoryTools({ memory, limit: 3, minScore: 0.2 });
  const agent = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "What do you know about me?" });
  for (const r of agent.toolResults) {
    if (r.dynamic) continue; // tools added at run time (MCP) are untyped
    if (r.toolName === "searchMemory" && "facts" in r.output) {
      const firstScore: number | undefined = r.output.facts[0]?.score;
      void firstScore;
    }
    if (r.toolName === "remember" && "remembered" in r.output) void r.output.remembered.id.toUpperCase();
  }
  // @ts-expect-error memoryTools needs the memory
  memoryTools({ limit: 3 });
}

// ---- Node servers: a pool of open instances, one per user ----
export async function pooled(): Promise<number> {
  const pool = memoryPool({
    max: 10,
    open: (userId) => UserMemory.open({ agent: userId, storage: "memory", llm: async () => "{}" }),
  });
  const count: number = await pool.use("user-1", async (memory) => (await memory.get()).facts.length);
  const lease: MemoryLease = await pool.acquire("user-2");
  lease.release();
  // @ts-expect-error the pool needs open()
  memoryPool({ max: 3 });
  await pool.close();
  return count + pool.size;
}
