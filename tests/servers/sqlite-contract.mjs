// Runs the storage adapter contract on the SQLite store in this runtime (Node >= 22.5 or Bun),
// then the encrypted round trip (tests/helpers/encrypted-roundtrip.mjs, extraction against the
// LLM server at the second argument), and prints the results as one JSON line: contract.test.mjs
// runs it under Node 22, Node 24 and Bun. Each case gets a database file of its own in the
// folder given as first argument; each client is a separate connection to it.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { UserMemory } from "user-memory";
import { sqliteStore } from "user-memory/sqlite";
import { runContract } from "../helpers/store-contract.mjs";
import { ENCRYPTED_CASE, encryptedRoundTrip } from "../helpers/encrypted-roundtrip.mjs";

const [dir, llmBaseUrl] = process.argv.slice(2);
let n = 0;
const results = await runContract({
  async fresh() {
    const file = join(dir, `sqlite-${process.pid}-${++n}.db`);
    const stores = [];
    return {
      async client() {
        const s = sqliteStore(file);
        stores.push(s);
        return s;
      },
      async close() {
        for (const s of stores) await s.close();
        for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
      },
    };
  },
});

/** Every row of the store's table, read with this runtime's own SQLite driver. */
async function rawRows(file) {
  const sql = "SELECT key, value FROM user_memory ORDER BY key";
  if (process.versions.bun) {
    const { Database } = await import("bun:sqlite");
    const db = new Database(file);
    return [db.query(sql).all(), db.close()][0];
  }
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(file);
  return [db.prepare(sql).all(), db.close()][0];
}

const file = join(dir, `sqlite-${process.pid}-encrypted.db`);
const stores = [];
try {
  await encryptedRoundTrip({
    UserMemory,
    storage: () => (stores.push(sqliteStore(file)), stores.at(-1)),
    raw: () => rawRows(file),
    llmBaseUrl,
  });
  results.push({ name: ENCRYPTED_CASE, ok: true });
} catch (e) {
  results.push({ name: ENCRYPTED_CASE, ok: false, message: e.stack ?? String(e) });
} finally {
  for (const s of stores) await s.close();
}
console.log(JSON.stringify(results));
