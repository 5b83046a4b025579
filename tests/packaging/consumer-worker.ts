// A Cloudflare Worker in TypeScript against the real Workers types (@cloudflare/workers-types,
// no DOM, no Node): the Durable Object storage adapter accepts `ctx.storage` as it is typed
// there, and the alarm pattern type-checks. Compiled by tests/packaging/types.test.mjs.
/// <reference types="@cloudflare/workers-types" />
import { DurableObject } from "cloudflare:workers";
import { UserMemory, type Message } from "user-memory";
import { durableObjectStore } from "user-memory/workers";

interface Env {
  MEMORY_AGENT: DurableObjectNamespace<MemoryAgent>;
  OPENAI_BASE_URL: string;
  OPENAI_API_KEY: string;
  MODEL: string;
}

export class MemoryAgent extends DurableObject<Env> {
  #memory?: Promise<UserMemory>;

  memory(): Promise<UserMemory> {
    return (this.#memory ??= UserMemory.open({
      storage: durableObjectStore(this.ctx.storage),
      autoProcess: false,
      llm: { baseUrl: this.env.OPENAI_BASE_URL, apiKey: this.env.OPENAI_API_KEY, model: this.env.MODEL },
    }));
  }

  async fetch(request: Request): Promise<Response> {
    const memory = await this.memory();
    const { threadId, messages } = await request.json<{ threadId: string; messages: Message[] }>();
    const block = await memory.inject(messages);
    await memory.observe(threadId, messages);
    const due = memory.nextDueAt();
    if (due !== null) await this.ctx.storage.setAlarm(due);
    return Response.json({ block });
  }

  async alarm(): Promise<void> {
    const memory = await this.memory();
    await memory.processDue();
    const due = memory.nextDueAt();
    if (due === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(due);
  }
}

export default {
  async fetch(request, env): Promise<Response> {
    const user = new URL(request.url).searchParams.get("user") ?? "anonymous";
    return env.MEMORY_AGENT.get(env.MEMORY_AGENT.idFromName(user)).fetch(request);
  },
} satisfies ExportedHandler<Env>;
