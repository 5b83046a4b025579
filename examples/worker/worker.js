// A Cloudflare Worker whose users each get a Durable Object holding their long-term memory.
//
//   POST /chat?user=alice   { "threadId": "t1", "messages": [{ "role": "user", "content": "…" }] }
//                           → { "reply": "…" }   (memory injected before, observed after)
//   GET  /memory?user=alice → the memory document
//   GET  /status?user=alice → the queue, and when the Durable Object's alarm is set
//
// Debounce without timers: a Worker cannot keep a 30 s timer alive, so memory is opened with
// `autoProcess: false`. Each chat request awaits `observe()` (the queued conversation is in
// Durable Object storage before the response is sent), then sets the object's alarm to
// `nextDueAt()`. The alarm calls `processDue()` (one LLM call per quiet thread) and re-arms
// itself for whatever is still queued (a new observation, a retry after a failure).
import { DurableObject } from "cloudflare:workers";
import { UserMemory } from "user-memory";
import { durableObjectStore } from "user-memory/workers";

const SYSTEM = "You are a helpful assistant.";

export class MemoryAgent extends DurableObject {
  /** @type {Promise<UserMemory> | undefined} */
  #memory;

  /** Memory of this object's user, opened once per instance (reopened after an eviction). */
  memory() {
    this.#memory ??= UserMemory.open({
      storage: durableObjectStore(this.ctx.storage),
      autoProcess: false,
      debounceMs: Number(this.env.MEMORY_DEBOUNCE_MS ?? 30_000),
      llm: { baseUrl: this.env.OPENAI_BASE_URL, apiKey: this.env.OPENAI_API_KEY, model: this.env.MODEL },
      // A secret binding (wrangler secret put MEMORY_PASSPHRASE) encrypts what the Durable
      // Object stores; without it memory is stored as plain JSON.
      encryption: this.env.MEMORY_PASSPHRASE ? { passphrase: this.env.MEMORY_PASSPHRASE } : undefined,
    }).catch((e) => {
      this.#memory = undefined; // let the next request try again
      throw e;
    });
    return this.#memory;
  }

  async fetch(request) {
    const memory = await this.memory();
    const { pathname } = new URL(request.url);
    if (request.method === "POST" && pathname === "/chat") {
      const { threadId, messages } = await request.json().catch(() => ({}));
      if (typeof threadId !== "string" || !Array.isArray(messages)) {
        return Response.json({ error: 'the body must be { "threadId": string, "messages": [...] }' }, { status: 400 });
      }
      const block = await memory.inject(messages);
      let reply;
      try {
        reply = await chat(this.env, [
          { role: "system", content: block ? `${SYSTEM}\n\n${block}` : SYSTEM },
          ...messages,
        ]);
      } catch (e) {
        return Response.json({ error: `the model call failed: ${e.message}` }, { status: 502 });
      }
      await memory.observe(threadId, [...messages, { role: "assistant", content: reply }]);
      await this.#arm(memory);
      return Response.json({ reply });
    }
    if (pathname === "/memory") return Response.json(await memory.get());
    if (pathname === "/status") return Response.json({ ...memory.status(), alarm: await this.ctx.storage.getAlarm() });
    return new Response("not found", { status: 404 });
  }

  /** The debounce timer fired: extract what is due, then wait for the rest. */
  async alarm() {
    const memory = await this.memory();
    await memory.processDue(); // failures are retried later: they stay queued with a backoff
    await this.#arm(memory);
  }

  async #arm(memory) {
    const due = memory.nextDueAt();
    if (due === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(due);
  }
}

/** One call to an OpenAI-compatible chat completions endpoint. */
async function chat(env, messages) {
  const res = await fetch(`${env.OPENAI_BASE_URL.replace(/\/+$/, "")}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: env.MODEL, messages }),
  });
  if (!res.ok) throw new Error(`the model answered HTTP ${res.status}`);
  return (await res.json()).choices[0].message.content;
}

export default {
  /** Routes each user to their own Durable Object (use your real authentication here). */
  async fetch(request, env) {
    const user = new URL(request.url).searchParams.get("user");
    if (!user) return new Response("add ?user=<id>", { status: 400 });
    return env.MEMORY_AGENT.get(env.MEMORY_AGENT.idFromName(user)).fetch(request);
  },
};
