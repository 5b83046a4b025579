// `user-memory mcp`: the memory as a Model Context Protocol server over stdio, for desktop and
// coding agents (any MCP client), with the official SDK (`@modelcontextprotocol/sdk`, an
// optional peer dependency loaded only here).
//
// Tools: search_memory, remember, forget, get_profile. Resources: the memory block (what
// inject() would put in a prompt) and the document as JSON. One instance stays open while the
// client is connected; every tool and resource first re-reads the store, so facts that another
// process (another agent, the CLI, a server) wrote meanwhile are seen. Nothing but protocol
// messages is written to stdout.
import { readFileSync } from "node:fs";
import { UserMemory } from "./node.js";
import { byConfidence, MAX_FACT_CHARS, SECTIONS } from "./memory-text.js";
import { openStore } from "./store-url.js";
import { errorCode, userMemoryError } from "./errors.js";
import { messageOf } from "./store-util.js";

/** @type {unknown[]} */
const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];

const TOOLS = [
  {
    name: "search_memory",
    description:
      "Search the long-term memory about the user for facts relevant to a query (any language). Returns the best matches with their ids.",
    inputSchema: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to look for, e.g. a topic, a name, or the user's question" },
        limit: { type: "integer", minimum: 1, maximum: 50, description: "At most this many facts (default 10)" },
      },
      required: ["query"],
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: "remember",
    description:
      "Store a lasting fact about the user (a preference, background, goal, or a correction of an earlier fact). Not for one-off task details.",
    inputSchema: {
      type: "object",
      properties: {
        content: { type: "string", maxLength: MAX_FACT_CHARS, description: "The fact, one short sentence" },
        category: { type: "string", enum: CATEGORIES, description: "Kind of fact (default context)" },
        confidence: { type: "number", minimum: 0, maximum: 1, description: "How sure this is (default 0.9)" },
      },
      required: ["content"],
    },
  },
  {
    name: "forget",
    description:
      "Remove a fact from the memory by its id (from search_memory or get_profile), e.g. when it is wrong or the user asks to forget it.",
    inputSchema: {
      type: "object",
      properties: { id: { type: "string", description: "The fact id, fact_xxxxxxxx" } },
      required: ["id"],
    },
    annotations: { destructiveHint: true },
  },
  {
    name: "get_profile",
    description:
      "Read the user's profile: the summaries (work, personal, top of mind, history) and every fact with its id.",
    inputSchema: { type: "object", properties: {} },
    annotations: { readOnlyHint: true },
  },
];

const fail = userMemoryError;

/** Loads the SDK's server parts, or says how to install them. */
async function loadSdk() {
  try {
    const [server, stdio, types] = await Promise.all([
      import("@modelcontextprotocol/sdk/server/index.js"),
      import("@modelcontextprotocol/sdk/server/stdio.js"),
      import("@modelcontextprotocol/sdk/types.js"),
    ]);
    return { Server: server.Server, StdioServerTransport: stdio.StdioServerTransport, types };
  } catch (e) {
    if (errorCode(e) === "ERR_MODULE_NOT_FOUND" || errorCode(e) === "MODULE_NOT_FOUND") {
      throw fail(
        "INVALID_INPUT",
        "user-memory mcp needs the MCP SDK: npm install @modelcontextprotocol/sdk (with npx: npx -y -p user-memory -p @modelcontextprotocol/sdk user-memory mcp --dir <folder>)",
      );
    }
    throw e;
  }
}

/**
 * A fact as the model reads it: its stored text through inject()'s defences (no invisible
 * or control characters, links reduced to their words, angle brackets escaped).
 * @param {import("./index.js").UserMemory} memory
 * @param {import("./index.js").Fact} f
 */
function factLine(memory, f) {
  /** @param {unknown} t */
  const safe = (t) => memory.safeText(String(t));
  return `${f.id} [${safe(f.category)} | ${Number(f.confidence).toFixed(2)}] ${safe(f.content)}`;
}

/**
 * What a tool call does; a failure becomes an error result the model can read.
 * @param {import("./index.js").UserMemory} memory
 * @param {string} name
 * @param {Record<string, unknown>} args the call's arguments, as the client sent them
 */
async function callTool(memory, name, args) {
  await memory.get(); // what other processes wrote meanwhile
  switch (name) {
    case "search_memory": {
      if (typeof args.query !== "string" || args.query.trim() === "")
        throw fail("INVALID_INPUT", "search_memory needs a non-empty `query`");
      if (
        args.limit !== undefined &&
        !(typeof args.limit === "number" && Number.isInteger(args.limit) && args.limit >= 1 && args.limit <= 50)
      )
        throw fail("INVALID_INPUT", "`limit` must be a whole number from 1 to 50");
      const limit = /** @type {number | undefined} */ (args.limit);
      const results = await memory.search(args.query, limit === undefined ? {} : { limit });
      return results.length
        ? results.map((r) => `- ${factLine(memory, r.fact)} (score ${r.score.toFixed(2)})`).join("\n")
        : "No fact in memory matches.";
    }
    case "remember": {
      if (typeof args.content !== "string" || args.content.trim() === "")
        throw fail("INVALID_INPUT", "remember needs a non-empty `content`");
      if (args.content.length > MAX_FACT_CHARS)
        throw fail(
          "INVALID_INPUT",
          `\`content\` is ${args.content.length} characters long; a fact is one short sentence, at most ${MAX_FACT_CHARS} characters: store the lasting point, not the text`,
        );
      if (args.category !== undefined && !CATEGORIES.includes(args.category))
        throw fail("INVALID_INPUT", `\`category\` must be one of ${CATEGORIES.join(", ")}`);
      if (
        args.confidence !== undefined &&
        !(typeof args.confidence === "number" && args.confidence >= 0 && args.confidence <= 1)
      ) {
        throw fail("INVALID_INPUT", "`confidence` must be a number from 0 to 1");
      }
      // What the user asked to forget stays forgotten, whoever brings it back.
      const [forgotten] = await memory.forgotten({ matching: args.content });
      if (forgotten)
        return `Not remembered: the user asked to forget this (forgotten fact ${forgotten.id}); do not store it again.`;
      /** @type {import("./index.js").NewFact} */
      const fact = { content: args.content };
      if (args.category !== undefined) fact.category = /** @type {import("./index.js").FactCategory} */ (args.category);
      if (args.confidence !== undefined) fact.confidence = args.confidence;
      return `Remembered: ${factLine(memory, await memory.addFact(fact))}`;
    }
    case "forget": {
      if (typeof args.id !== "string") throw fail("INVALID_INPUT", "forget needs the fact's `id`");
      // A tombstone, as the CLI's forget keeps: extraction and remember do not bring it back.
      return `Forgot: ${factLine(memory, await memory.removeFact(args.id, { forget: true }))}`;
    }
    case "get_profile":
      return profile(memory, await memory.get());
    default:
      throw fail("INVALID_INPUT", `unknown tool ${JSON.stringify(name)}`);
  }
}

/**
 * The document as readable text, every stored value through inject()'s defences.
 * @param {import("./index.js").UserMemory} memory
 * @param {import("./index.js").MemoryDocument} doc
 */
function profile(memory, doc) {
  /** @type {Record<string, Record<string, { summary?: string } | undefined> | undefined>} */
  const groups = /** @type {any} */ (doc);
  const lines = SECTIONS.filter(([g, k]) => groups[g]?.[k]?.summary).map(
    ([g, k, label]) => `${label}: ${memory.safeText(String(groups[g]?.[k]?.summary))}`,
  );
  if (doc.facts.length)
    lines.push(
      ...(lines.length ? [""] : []),
      "Facts:",
      ...byConfidence(doc.facts).map((f) => `- ${factLine(memory, f)}`),
    );
  return lines.length ? lines.join("\n") : "The memory is empty.";
}

/**
 * Serves the memory of `agent` in the store `spec` over stdio until the client disconnects.
 * @param {object} options
 * @param {Parameters<typeof openStore>[0]} options.spec where the memory is
 * @param {string} options.agent
 * @param {import("./index.js").Encryption} [options.encryption]
 * @param {import("node:stream").Readable} options.stdin
 * @param {import("node:stream").Writable} options.stdout
 * @param {import("node:stream").Writable} options.stderr
 * @returns {Promise<number>} the exit status
 */
export async function serveMcp({ spec, agent, encryption, stdin, stdout, stderr }) {
  const { Server, StdioServerTransport, types } = await loadSdk();
  const store = await openStore(spec);
  let memory;
  try {
    memory = await UserMemory.open({
      agent,
      storage: store.storage,
      autoProcess: false,
      llm: async () => "{}",
      ...(encryption ? { encryption } : {}),
    });
  } catch (e) {
    await store.close();
    throw e;
  }
  const version = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
  const base = `memory://${encodeURIComponent(agent)}`;
  const resources = [
    {
      uri: `${base}/block`,
      name: "memory-block",
      title: "Memory block",
      description: `What the memory "${agent}" adds to a prompt: the profile and the most confident facts`,
      mimeType: "text/plain",
    },
    {
      uri: `${base}/document`,
      name: "memory-document",
      title: "Memory document",
      description: `The memory "${agent}" as JSON (DeerFlow memory.json)`,
      mimeType: "application/json",
    },
  ];
  const server = new Server(
    { name: "user-memory", version },
    {
      capabilities: { tools: {}, resources: {} },
      instructions:
        "Long-term memory about the user, shared with the user's other agents. Search it when an answer depends on who the user is or what they prefer; remember lasting facts the user states; forget facts that are wrong or that the user asks you to forget.",
    },
  );
  server.setRequestHandler(types.ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(types.CallToolRequestSchema, async (request) => {
    try {
      return {
        content: [{ type: "text", text: await callTool(memory, request.params.name, request.params.arguments ?? {}) }],
      };
    } catch (e) {
      return { isError: true, content: [{ type: "text", text: `${errorCode(e) ?? "FAILED"}: ${messageOf(e)}` }] };
    }
  });
  server.setRequestHandler(types.ListResourcesRequestSchema, async () => ({ resources }));
  server.setRequestHandler(types.ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const doc = await memory.get();
    if (uri === resources[0].uri) return { contents: [{ uri, mimeType: "text/plain", text: await memory.inject([]) }] };
    if (uri === resources[1].uri)
      return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(doc, null, 2) }] };
    // Not an McpError: its message already starts "MCP error -32602:", and the client adds that
    // prefix again. The SDK sends any error's numeric `code` and `message` as they are.
    throw Object.assign(new Error(`unknown resource ${uri}`), { code: types.ErrorCode.InvalidParams });
  });

  const closed = new Promise((resolve) => (server.onclose = () => resolve(undefined)));
  const stop = () => server.close().catch(() => {});
  stdin.once("end", stop);
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  await server.connect(new StdioServerTransport(stdin, stdout));
  stderr.write(`user-memory MCP server: memory "${agent}" in ${store.label}\n`);
  await closed;
  await memory.close();
  await store.close();
  return 0;
}
