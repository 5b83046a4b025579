// Why the Redis store indexes its keys: keys(prefix) as a SCAN … MATCH of the database against
// the store's sorted-set index (ZRANGEBYLEX), with 1 000 and 10 000 users of four keys each
// (the library's layout: two pointers and two versions per user). open() lists keys twice.
//
//   node scripts/build.mjs && node bench/redis-keys.mjs
import { startRedis } from "../tests/helpers/servers.mjs";
import { createClient } from "redis";
import { redisStore } from "../pkg/redis-store.js";
const server = await startRedis();
const c = await createClient({ url: server.url }).connect();
const store = redisStore(c, { prefix: "m:" });
for (const users of [1000, 10000]) {
  const have = Number(
    await c.sendCommand(["ZCARD", Buffer.concat([Buffer.from("m:"), Buffer.from([0xff]), Buffer.from("keys")])]),
  );
  for (let u = Math.floor(have / 4); u < users; u++) {
    const p = `user-memory/user-${u}/`;
    await Promise.all([
      store.set(p + "doc", "{}"),
      store.set(p + "doc/v3-0000abcd", "x".repeat(2000)),
      store.set(p + "queue", "{}"),
      store.set(p + "queue/v2-0000abcd", "[]"),
    ]);
  }
  const prefix = "m:user-memory/user-7/doc/v";
  const scan = async () => {
    let cursor = "0";
    const out = [];
    do {
      const [next, keys] = await c.sendCommand(["SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"]);
      cursor = String(next);
      out.push(...keys);
    } while (cursor !== "0");
    return out;
  };
  const med = async (fn) => {
    const xs = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      await fn();
      xs.push(performance.now() - t);
    }
    xs.sort((a, b) => a - b);
    return xs[100];
  };
  console.log(
    `${users} users (${users * 4} keys): SCAN MATCH ${(await med(scan)).toFixed(3)} ms, index ${(await med(() => store.keys("user-memory/user-7/doc/v"))).toFixed(3)} ms`,
  );
}
await c.quit();
await server.close();
