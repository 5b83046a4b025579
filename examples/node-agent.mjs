#!/usr/bin/env node
// A terminal chat with long-term memory, against any OpenAI-compatible endpoint.
//
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-… MODEL=gpt-4o-mini \
//   MEMORY_DIR=./memory node examples/node-agent.mjs
//
// Works with Ollama (OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=llama3.1), LM Studio,
// vLLM, DeepSeek, OpenRouter … The same endpoint is used to chat and to extract memory.
// Memory lives in MEMORY_DIR (default ./memory): before each model call the relevant part is
// injected into the system prompt; after each answer the conversation is observed; what is
// still queued is processed when you leave (Ctrl-D, Ctrl-C or "/exit"). Run it again and it
// remembers. "/memory" prints what it knows, and what is still queued with when it is due.
import { createInterface } from "node:readline";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";

const baseUrl = (process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1").replace(/\/+$/, "");
const apiKey = process.env.OPENAI_API_KEY ?? "";
const model = process.env.MODEL ?? "gpt-4o-mini";
const dir = process.env.MEMORY_DIR ?? "./memory";
const tty = process.stdin.isTTY;

const memory = await UserMemory.open({
  agent: process.env.MEMORY_AGENT ?? "terminal",
  storage: fileStore(dir),
  llm: { baseUrl, apiKey, model },
});
memory.on("update", (e) =>
  note(`memory updated: +${e.added.length} facts, -${e.removed.length}, sections: ${e.sections.join(", ") || "none"}`),
);
memory.on("error", (e) => note(`memory error ${e.code}: ${e.message}`));

const threadId = `terminal-${new Date().toISOString()}`;
/** @type {{ role: "user" | "assistant", content: string }[]} */
const messages = [];

/** Status lines go to stderr, so stdout holds only the conversation. */
function note(text) {
  console.error(`[memory] ${text}`);
}

async function chat(system) {
  const res = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify({ model, messages: [{ role: "system", content: system }, ...messages] }),
  });
  if (!res.ok) throw new Error(`the model answered HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const body = await res.json();
  return body.choices?.[0]?.message?.content ?? "";
}

async function turn(text) {
  messages.push({ role: "user", content: text });
  // Before the call: the memory that matters for the last turns, as a <memory> block.
  const block = await memory.inject(messages);
  const answer = await chat(`You are a helpful assistant.${block ? `\n\n${block}` : ""}`);
  messages.push({ role: "assistant", content: answer });
  console.log(`assistant> ${answer}`);
  // After the call: queue the conversation; it is extracted after 30 s of quiet (or on exit).
  memory.observe(threadId, messages);
}

/** What "/memory" says about the queue: right after chatting, extraction is still up to
 * `debounceMs` (30 s) away, so say when, rather than nothing. */
function pendingLine(known) {
  const { pending, nextDueAt, processing } = memory.status();
  if (processing) return "(learning from the conversation right now…)";
  if (!pending.length) return known ? "(nothing waiting to be learned)" : "(nothing remembered yet)";
  const due =
    nextDueAt === null
      ? "when you leave"
      : `in ${Math.max(0, Math.ceil((nextDueAt - Date.now()) / 1000))} s (or when you leave)`;
  return `(${pending.length} conversation${pending.length === 1 ? "" : "s"} queued: extraction due ${due})`;
}

let leaving;
/** Processes what is queued, closes memory and exits (once, however we leave). */
function leave(code = 0) {
  leaving ??= (async () => {
    rl.close();
    try {
      if (memory.status().pending.length) note("saving what I learned… (Ctrl-C again to skip)");
      await memory.flush();
    } catch (e) {
      note(`could not process everything now (${e.code}); it stays queued for the next run`);
      code = 1;
    }
    await memory.close();
    process.exit(code);
  })();
  return leaving;
}

note(`memory in ${fileStore(dir).dir}; ${(await memory.get()).facts.length} facts known`);

// Created after the last await before the loop: lines read before `for await` starts
// would be lost.
const rl = createInterface({ input: process.stdin, output: tty ? process.stdout : undefined, prompt: "you> " });
/** Ctrl-C: leave; a second one while leaving skips the processing (what is queued is
 * already saved in the folder and is processed on the next run). */
function interrupt() {
  if (!leaving) return leave();
  note("leaving without processing; the queued conversation is kept for the next run");
  memory.close().finally(() => process.exit(1));
  return leaving;
}

rl.on("SIGINT", interrupt); // Ctrl-C at the prompt
process.on("SIGINT", interrupt); // SIGINT from outside (no TTY)
process.on("SIGTERM", () => leave());
if (tty) rl.prompt();
for await (const line of rl) {
  const text = line.trim();
  if (text === "/exit") break;
  if (text === "/memory") {
    const doc = await memory.get();
    for (const f of doc.facts) console.log(`- [${f.category} | ${f.confidence.toFixed(2)}] ${f.content}`);
    console.log(pendingLine(doc.facts.length));
  } else if (text) {
    try {
      await turn(text);
    } catch (e) {
      messages.pop();
      console.error(`error: ${e.message}`);
    }
  }
  if (leaving) break;
  if (tty) rl.prompt();
}
await leave();
