// The Worker of the workerd tests (bundled by tests/servers/workerd.mjs): the storage adapter
// contract on the Durable Object store (one object per case) and on the D1 store (one table per
// case), and UserMemory on D1 for the cross-request tests.
//
//   GET  /contract?backend=do|d1&case=<name>   → [{ name, ok, message }]
//   GET  /encrypted?backend=do|d1&llm=<url>     → [{ name, ok, message }] of the encrypted round trip
//   POST /memory?user=<id>  { add: "fact" }      → the document after adding it
//   GET  /memory?user=<id>                        → the document
//   GET  /d1-limits                               → values over D1's 2 MB limit, split and checked
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
    if (url.pathname === "/d1-limits") {
      // Values over D1's 2 MB limit: split into rows of one batch, read back checked.
      const table = `d1_limits_${++tables}`;
      const store = d1Store(env.DB, { table });
      const rows = async (prefix) =>
        (
          await env.DB.prepare(`SELECT key FROM ${table} WHERE key >= ? AND key < ?`)
            .bind(prefix, `${prefix}\uffff`)
            .all()
        ).results.length;
      const codeOf = (p) =>
        p.then(
          () => null,
          (e) => e.code,
        );
      const out = {};
      const a = "QUJD".repeat(750_000); // 3 MB of ASCII
      const b = "é研🐝".repeat(300_000); // 1.2 M code units, 2.7 MB of UTF-8
      await store.set("a", a);
      out.ascii = { same: (await store.get("a")) === a, rows: await rows("a"), keys: await store.keys("a") };
      await store.set("b", b);
      out.utf8 = { same: (await store.get("b")) === b, rows: await rows("b") };
      out.casStale = await store.compareAndSet("a", b, "x");
      out.casBig = await store.compareAndSet("a", a, b);
      out.afterCas = { same: (await store.get("a")) === b, rows: await rows("a") };
      out.casSmall = await store.compareAndSet("a", b, "small");
      out.afterSmall = { value: await store.get("a"), rows: await rows("a") };
      out.tooBig = await codeOf(store.set("a", "z".repeat(31_000_000)));
      out.keptAfterTooBig = await store.get("a");
      await store.delete("b");
      out.afterDelete = { value: await store.get("b"), rows: await rows("b") };
      await store.set("c", a);
      await env.DB.prepare(`UPDATE ${table} SET value = 'x' || substr(value, 2) WHERE key = ?`)
        .bind("c\u001fpart:001")
        .run();
      out.altered = await codeOf(store.get("c"));
      // UserMemory with 10 000 facts (a 2.3 MB record), plain and encrypted.
      for (const encrypted of [false, true]) {
        const open = () =>
          UserMemory.open({
            agent: encrypted ? "big-encrypted" : "big",
            storage: d1Store(env.DB, { table }),
            autoProcess: false,
            maxFacts: 20_000,
            llm: noLlm,
            ...(encrypted ? { encryption: { passphrase: "d1 limits passphrase" } } : {}),
          });
        let memory = await open();
        const doc = await memory.export();
        doc.facts = Array.from({ length: 10_000 }, (_, i) => ({
          id: `f${i}`,
          content: `Fact ${i}: the user mentioned project ${i * 7} and a preference for tool ${i % 13}`,
          category: "context",
          confidence: 0.9,
        }));
        await memory.import(doc);
        await memory.addFact({ content: "One more after ten thousand" });
        await memory.removeFact("f1");
        await memory.close();
        memory = await open();
        out[encrypted ? "encrypted10k" : "plain10k"] = (await memory.get()).facts.length;
        await memory.close();
      }
      const longest = await env.DB.prepare(`SELECT max(length(CAST(value AS BLOB))) AS n FROM ${table}`).first();
      out.largestRowBytes = longest.n;
      return Response.json(out);
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
