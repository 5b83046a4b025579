// A Worker using the D1 store with the real Workers types (@cloudflare/workers-types): the
// binding is accepted as typed there. Compiled by tests/servers/types.test.mjs.
/// <reference types="@cloudflare/workers-types" />
import { UserMemory } from "user-memory";
import { D1Store, d1Store } from "user-memory/workers";

interface Env {
  DB: D1Database;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const storage: D1Store = d1Store(env.DB, { table: "user_memory" });
    const memory = await UserMemory.open({
      agent: new URL(request.url).searchParams.get("user") ?? "anonymous",
      storage,
      autoProcess: false,
      llm: async () => "{}",
    });
    const block = await memory.inject([{ role: "user", content: await request.text() }]);
    await memory.close();
    return new Response(block);
  },
} satisfies ExportedHandler<Env>;
