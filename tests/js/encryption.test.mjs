// Encryption at rest through the built package in Node (WebCrypto as globalThis.crypto), on
// real files and the scripted OpenAI-compatible server: the raw files hold none of the
// plaintext (facts, summaries, queued messages, tombstones, history), the passphrase opens
// it again, a wrong one is DECRYPT_FAILED with every file unchanged, a tampered file is
// CORRUPT_MEMORY, plain and encrypted memory are never mixed, encrypt() migrates in place
// and rotates the key (a new data key, every value re-sealed), and no key or passphrase shows in options, events or errors.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";
import { factsReply } from "../helpers/llm-server.mjs";
import { freshAgent, openMemory, record, scratchDir, test, turn, useLlmServer } from "../helpers/pipeline.mjs";

const llm = useLlmServer();
const scratch = () => scratchDir("um-enc-");

const PASS = "correct horse battery staple";

function open(dir, agent, encryption, options = {}) {
  return openMemory({
    agent,
    storage: fileStore(dir),
    autoProcess: false,
    llm: { baseUrl: llm.baseUrl, apiKey: "sk-e", model: "m", maxRetries: 0 },
    ...(encryption === undefined ? {} : { encryption }),
    ...options,
  });
}

/** Every stored file: name → text. */
function files(dir) {
  const out = {};
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out[join(d, e.name)] = readFileSync(join(d, e.name), "utf8");
    }
  };
  walk(dir);
  return out;
}
const allText = (dir) => Object.values(files(dir)).join("\n");

const SECRETS = ["penicillin", "Backend engineer", "Lisbon", "cello", "Rust", PASS];

/** A summary, a fact learned by extraction, a forgotten fact, a queued conversation. */
async function fill(memory) {
  await memory.updateSection("workContext", "Backend engineer");
  const f = await memory.addFact({ content: "Allergic to penicillin" });
  await memory.removeFact(f.id, { forget: true });
  llm.script.push(factsReply("Plays the cello"));
  await memory.observe("t1", turn("I play the cello in an orchestra", "Lovely"));
  await memory.flush();
  await memory.observe("t2", turn("I am moving to Lisbon and learning Rust", "Exciting"));
}

test("nothing stored is plaintext, and the passphrase opens it again in another instance", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("enc");
  const memory = await open(dir, agent, { passphrase: PASS });
  const events = record(memory, ["update", "processed", "error"]);
  await fill(memory);
  const text = allText(dir);
  for (const s of SECRETS) assert.ok(!text.toLowerCase().includes(s.toLowerCase()), `${s} is in the files`);
  assert.match(text, /umenc2:/);
  assert.match(text, /"kdf":"pbkdf2-sha256","iterations":600000/);
  assert.deepEqual(memory.options().encryption, true);
  assert.ok(!JSON.stringify(memory.options()).includes(PASS), "options() never shows the passphrase");
  assert.ok(!JSON.stringify(events).includes(PASS), "no event carries it");
  const raw = await UserMemory.inspect({ agent, storage: fileStore(dir) });
  assert.match(raw.document, /^umenc2:/, "inspect() shows the ciphertext");
  assert.match(raw.key, /"dek":/);
  await memory.close();

  const again = await open(dir, agent, { passphrase: PASS });
  const doc = await again.get();
  assert.deepEqual(
    doc.facts.map((f) => f.content),
    ["Plays the cello"],
  );
  assert.equal(doc.user.workContext.summary, "Backend engineer");
  assert.equal((await again.forgotten())[0].content, "allergic to penicillin");
  assert.equal(again.status().pending.length, 1, "the queued conversation decrypts");
  assert.ok((await again.history()).length >= 3);
  await again.close();
});

test("a wrong passphrase or key is DECRYPT_FAILED and every file is unchanged; no encryption is refused too", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("wrong");
  const memory = await open(dir, agent, { passphrase: PASS });
  await memory.addFact({ content: "Plays the cello" });
  await memory.close();
  const before = files(dir);
  await assert.rejects(open(dir, agent, { passphrase: "not it" }), (e) => {
    assert.equal(e.code, "DECRYPT_FAILED");
    assert.ok(!e.message.includes("not it") && !e.message.includes(PASS), e.message);
    return true;
  });
  const key = await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
  await assert.rejects(open(dir, agent, { key }), { code: "DECRYPT_FAILED" });
  await assert.rejects(open(dir, agent), { code: "DECRYPT_FAILED" }, "encrypted memory opened without encryption");
  assert.deepEqual(files(dir), before, "nothing was overwritten or deleted");
  for (const bad of [
    { passphrase: "" },
    { passphrase: 5 },
    { key: "k" },
    { key, passphrase: PASS },
    { pass: PASS },
    "x",
    { passphrase: PASS, salt: new Uint8Array(4) },
  ]) {
    await assert.rejects(open(dir, agent, bad), { code: "INVALID_INPUT" }, JSON.stringify(bad));
  }
});

test("a tampered value is CORRUPT_MEMORY naming the slot, never an empty memory", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("tamper");
  const memory = await open(dir, agent, { passphrase: PASS });
  await memory.addFact({ content: "Plays the cello" });
  await memory.close();
  const [file, text] = Object.entries(files(dir)).find(([, t]) => t.startsWith("umenc2:"));
  const i = text.length - 8;
  writeFileSync(file, text.slice(0, i) + (text[i] === "A" ? "B" : "A") + text.slice(i + 1));
  await assert.rejects(open(dir, agent, { passphrase: PASS }), (e) => {
    assert.equal(e.code, "CORRUPT_MEMORY");
    assert.match(e.message, /stored doc .*altered/);
    return true;
  });
  writeFileSync(file, text);
  await (await open(dir, agent, { passphrase: PASS })).close();
});

test("plain memory: refused with encryption, encrypted in place by encrypt(), then the key rotates", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("migrate");
  const plain = await open(dir, agent);
  assert.equal(plain.options().encryption, false);
  await fill(plain);
  await plain.close();
  const before = files(dir);
  await assert.rejects(open(dir, agent, { passphrase: PASS }), { code: "INVALID_INPUT" });
  assert.deepEqual(files(dir), before);

  await UserMemory.encrypt({ agent, storage: fileStore(dir), encryption: { passphrase: PASS } });
  const text = allText(dir);
  for (const s of SECRETS) assert.ok(!text.toLowerCase().includes(s.toLowerCase()), `${s} left in plaintext`);
  const enc = await open(dir, agent, { passphrase: PASS });
  assert.deepEqual(
    (await enc.get()).facts.map((f) => f.content),
    ["Plays the cello"],
  );
  assert.equal(enc.status().pending.length, 1);
  await enc.close();

  const key = await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
  const dataBefore = Object.values(files(dir)).filter((t) => t.startsWith("umenc2:"));
  await UserMemory.encrypt({
    agent,
    storage: fileStore(dir),
    encryption: { passphrase: PASS },
    newEncryption: { key },
  });
  const dataAfter = Object.values(files(dir)).filter((t) => t.startsWith("umenc2:"));
  assert.equal(dataAfter.length, dataBefore.length);
  for (const t of dataAfter) {
    assert.ok(t.startsWith("umenc2:2.") && !dataBefore.includes(t), "every value re-sealed under the new data key");
  }
  await assert.rejects(open(dir, agent, { passphrase: PASS }), { code: "DECRYPT_FAILED" });
  const rotated = await open(dir, agent, { key });
  assert.deepEqual(
    (await rotated.get()).facts.map((f) => f.content),
    ["Plays the cello"],
  );
  await rotated.close();
  await assert.rejects(UserMemory.encrypt({ agent, storage: fileStore(dir) }), { code: "INVALID_INPUT" });
});

test("two instances with the same passphrase work together on encrypted files", async () => {
  llm.reset();
  const dir = scratch();
  const agent = freshAgent("two");
  const a = await open(dir, agent, { passphrase: PASS });
  const b = await open(dir, agent, { passphrase: PASS });
  await a.addFact({ content: "Keeps bees" });
  await b.addFact({ content: "Drinks tea" });
  assert.deepEqual((await a.get()).facts.map((f) => f.content).sort(), ["Drinks tea", "Keeps bees"]);
  assert.ok(!allText(dir).includes("bees"));
  await a.close();
  await b.close();
});
