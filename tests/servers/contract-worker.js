// The Worker of the workerd tests (bundled by tests/servers/workerd.mjs): the storage adapter
// contract on the Durable Object store (one object per case) and on the D1 store (one table per
// case), and UserMemory on D1 for the cross-request tests.
//
//   GET  /contract?backend=do|d1&case=<name>   → [{ name, ok, message }]
//   GET  /encrypted?backend=do|d1&llm=<url>     → [{ name, ok, message }] of the encrypted round trip
//   POST /memory?user=<id>  { add: "fact" }      → the document after adding it
//   GET  /memory?user=<id>                        → the document
//   GET  /too-big                                 → the codes of a value over D1's 2 MB limit
//   GET  /limits?case=<name>                      → [{ name, ok, message, data }] of a value-size case
// backend=do-kv: a key-value-backed Durable Object with production's 128 KiB value limit.
import { DurableObject } from "cloudflare:workers";
import { UserMemory } from "../../pkg/workers.js";
import { d1Store, durableObjectStore } from "../../pkg/durable-object-store.js";
import { runContract } from "../helpers/store-contract.mjs";
import { ENCRYPTED_CASE, encryptedRoundTrip } from "../helpers/encrypted-roundtrip.mjs";
import { limitedStorage } from "../helpers/do-limits.mjs";
import { runLimitCases } from "../helpers/do-limit-cases.mjs";

/** The encrypted round trip on `storage()` as a contract result. */
async function encrypted(url, storage, raw) {
  try {
    await encryptedRoundTrip({ UserMemory, storage, raw, llmBaseUrl: url.searchParams.get("llm") });
    return Response.json([{ name: ENCRYPTED_CASE, ok: true }]);
  } catch (e) {
    return Response.json([{ name: ENCRYPTED_CASE, ok: false, message: e.stack ?? String(e) }]);
  }
}

export class ContractObject extends DurableObject {
  /** The storage the adapter is given: the object's own. */
  storage() {
    return this.ctx.storage;
  }

  async fetch(request) {
    const url = new URL(request.url);
    const storage = this.storage();
    if (url.pathname === "/limits")
      return Response.json(
        await runLimitCases({
          storage: this.ctx.storage,
          durableObjectStore,
          UserMemory,
          only: url.searchParams.get("case"),
        }),
      );
    // The raw values: the object's storage itself, not the adapter.
    if (url.pathname === "/encrypted")
      return encrypted(
        url,
        () => durableObjectStore(storage),
        async () => [...(await this.ctx.storage.list()).entries()],
      );
    const name = url.searchParams.get("case");
    const backend = {
      fresh: async () => ({
        client: async () => durableObjectStore(storage),
        close: () => this.ctx.storage.deleteAll(),
      }),
    };
    return Response.json(await runContract(backend, [name]));
  }
}

/** A key-value-backed object (`useSQLite: false`) with production's value limits enforced. */
export class KvLimitObject extends ContractObject {
  storage() {
    return limitedStorage(this.ctx.storage);
  }
}

let tables = 0;
const noLlm = async () => {
  throw new Error("no LLM in this test");
};

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/contract") {
      const name = url.searchParams.get("case");
      if (url.searchParams.get("backend") === "do")
        return env.CONTRACT.get(env.CONTRACT.idFromName(name)).fetch(request);
      if (url.searchParams.get("backend") === "do-kv")
        return env.KV_LIMIT.get(env.KV_LIMIT.idFromName(name)).fetch(request);
      const backend = {
        async fresh() {
          const table = `contract_${++tables}`;
          return {
            client: async () => d1Store(env.DB, { table }),
            close: () => env.DB.prepare(`DROP TABLE IF EXISTS ${table}`).run(),
          };
        },
      };
      return Response.json(await runContract(backend, [name]));
    }
    if (url.pathname === "/encrypted") {
      if (url.searchParams.get("backend") === "do")
        return env.CONTRACT.get(env.CONTRACT.idFromName("encrypted")).fetch(request);
      if (url.searchParams.get("backend") === "do-kv")
        return env.KV_LIMIT.get(env.KV_LIMIT.idFromName("encrypted")).fetch(request);
      const table = "encrypted_roundtrip";
      return encrypted(
        url,
        () => d1Store(env.DB, { table }),
        async () => (await env.DB.prepare(`SELECT key, value FROM ${table} ORDER BY key`).all()).results,
      );
    }
    if (url.pathname === "/limits")
      return env.KV_LIMIT.get(env.KV_LIMIT.idFromName(`limits ${url.searchParams.get("case")}`)).fetch(request);
    if (url.pathname === "/too-big") {
      // A value over D1's 2 MB limit, through the store and through UserMemory.
      const store = d1Store(env.DB, { table: "too_big" });
      const direct = await store.set("k", "x".repeat(3_000_000)).then(
        () => null,
        (e) => e.code,
      );
      const memory = await UserMemory.open({ agent: "big", storage: d1Store(env.DB), autoProcess: false, llm: noLlm });
      try {
        await memory.addFact({ content: "Kept before the big import" });
        const doc = await memory.export();
        doc.facts.push({ content: "y".repeat(3_000_000) });
        const viaLibrary = await memory.import(doc).then(
          () => null,
          (e) => e.code,
        );
        return Response.json({ direct, viaLibrary, kept: (await memory.get()).facts.map((f) => f.content) });
      } finally {
        await memory.close();
      }
    }
    if (url.pathname === "/memory") {
      const memory = await UserMemory.open({
        agent: url.searchParams.get("user"),
        storage: d1Store(env.DB),
        autoProcess: false,
        llm: noLlm,
      });
      try {
        if (request.method === "POST") await memory.addFact({ content: (await request.json()).add });
        return Response.json(await memory.get());
      } catch (e) {
        return Response.json({ error: { code: e.code, message: e.message } }, { status: 500 });
      } finally {
        await memory.close();
      }
    }
    return new Response("not found", { status: 404 });
  },
};
