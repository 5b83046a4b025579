// Encryption at rest in Node with a file store: open (with PBKDF2) and commit (addFact)
// times with and without `encryption`, at 100 and 500 facts; PBKDF2 alone.
//   node bench/encryption.mjs
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";

const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];
const time = async (f) => {
  const t = performance.now();
  await f();
  return performance.now() - t;
};

const enc = new TextEncoder();
const pbkdf2 = [];
for (let i = 0; i < 5; i++) {
  pbkdf2.push(
    await time(async () => {
      const base = await crypto.subtle.importKey("raw", enc.encode("a passphrase"), "PBKDF2", false, ["deriveKey"]);
      await crypto.subtle.deriveKey(
        { name: "PBKDF2", hash: "SHA-256", salt: new Uint8Array(16), iterations: 600000 },
        base,
        { name: "AES-GCM", length: 256 },
        false,
        ["encrypt", "decrypt"],
      );
    }),
  );
}
console.log(`PBKDF2-SHA256 600000 iterations: ${median(pbkdf2).toFixed(0)} ms`);

for (const n of [100, 500]) {
  for (const encryption of [undefined, { passphrase: "a passphrase" }, "key"]) {
    const dir = mkdtempSync(join(tmpdir(), "um-bench-"));
    const key =
      encryption === "key"
        ? await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"])
        : null;
    const opt = encryption === "key" ? { key } : encryption;
    const options = { agent: "b", storage: fileStore(dir), ...(opt ? { encryption: opt } : {}) };
    const m = await UserMemory.open(options);
    await m.import({
      user: {},
      history: {},
      facts: Array.from({ length: n }, (_, i) => ({
        content: `Fact number ${i} about the user's work, tools and habits`,
      })),
    });
    const commits = [];
    for (let i = 0; i < 20; i++) commits.push(await time(() => m.addFact({ content: `Extra fact ${i}` })));
    await m.close();
    const opens = [];
    for (let i = 0; i < 5; i++) opens.push(await time(async () => (await UserMemory.open(options)).close()));
    const label = encryption === undefined ? "plain     " : encryption === "key" ? "CryptoKey " : "passphrase";
    console.log(`${n} facts, ${label}: commit ${median(commits).toFixed(1)} ms, open ${median(opens).toFixed(1)} ms`);
    rmSync(dir, { recursive: true, force: true });
  }
}
