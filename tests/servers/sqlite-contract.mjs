// Runs the storage adapter contract on the SQLite store in this runtime (Node >= 22.5 or Bun)
// and prints the results as one JSON line: contract.test.mjs runs it under Node 22, Node 24
// and Bun. Each case gets a database file of its own in the folder given as argument; each
// client is a separate connection to it.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { sqliteStore } from "user-memory/sqlite";
import { runContract } from "../helpers/store-contract.mjs";

const dir = process.argv[2];
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
console.log(JSON.stringify(results));
