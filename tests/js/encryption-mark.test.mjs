// The rollback mark of encrypted memory, through the built package in Node on real files and
// real processes: the highest document revision this device saw, kept outside the store
// (fileStore's `markDir`, or any `encryption.mark` object), sealed under the data key.
// * a process started after the WHOLE store (key record included) was put back from an
//   older backup reports ROLLBACK; without the mark it cannot tell (the documented limit);
// * a missing, corrupt or forged mark never locks the owner out, and the next commit
//   writes it again;
// * any store can keep its mark in an `encryption.mark` object; `false` turns it off; a mark
//   without get/set is INVALID_INPUT.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";
import { freshAgent, openMemory, runChild, scratchDir, test } from "../helpers/pipeline.mjs";

const PASS = "correct horse battery staple";

/** Every stored file: name → text. */
function files(dir) {
  const out = {};
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isFile()) out[e.name] = readFileSync(join(dir, e.name), "utf8");
  }
  return out;
}

/** Puts back exactly `snapshot`: the whole store, key record included (a restored backup). */
function restore(dir, snapshot) {
  for (const name of Object.keys(files(dir))) if (!(name in snapshot)) rmSync(join(dir, name));
  for (const [name, text] of Object.entries(snapshot)) writeFileSync(join(dir, name), text);
}

/**
 * Runs `body` in a fresh Node process with `m`, the memory of `agent` in `dir` opened with
 * fileStore's `markDir` (`false`: none); it prints `OPEN <facts>` or `<code> <message>`.
 */
async function inChild(dir, markDir, agent, body = "") {
  const child = await runChild(`
    import { UserMemory } from "user-memory";
    import { fileStore } from "user-memory/node";
    let m;
    try {
      m = await UserMemory.open({ agent: ${JSON.stringify(agent)}, autoProcess: false,
        storage: fileStore(${JSON.stringify(dir)}, { markDir: ${JSON.stringify(markDir)} }),
        encryption: { passphrase: ${JSON.stringify(PASS)} } });
      console.log("OPEN " + JSON.stringify((await m.get()).facts.map((f) => f.content)));
    } catch (e) { console.log(e.code + " " + e.message); process.exit(0); }
    ${body}
    await m.close();
  `);
  assert.equal(child.stderr, "", child.stdout);
  return child.stdout.trim();
}

test("a process started after the whole store was restored from an older backup is ROLLBACK", async () => {
  const dir = scratchDir("um-mark-");
  const marks = join(scratchDir("um-marks-"), "marks");
  const agent = freshAgent("mark");
  assert.equal(await inChild(dir, marks, agent, `await m.addFact({ content: "Allergic to penicillin" });`), "OPEN []");
  const backup = files(dir);
  // The next process forgets the fact and is killed (no close()).
  const killed = await inChild(
    dir,
    marks,
    agent,
    `await m.removeFact((await m.get()).facts[0].id, { forget: true }); process.kill(process.pid, "SIGKILL");`,
  );
  assert.equal(killed, 'OPEN ["Allergic to penicillin"]');
  restore(dir, backup);
  const after = await inChild(dir, marks, agent);
  assert.match(after, /^ROLLBACK .*older than revision \d+.*rollback mark in the rollback mark folder/, after);
  assert.ok(after.includes(marks), after);
  // Without a mark a fresh process cannot tell: the forgotten fact is back (the limit the
  // mark removes), and opening so does not lower the mark.
  assert.equal(await inChild(dir, false, agent), 'OPEN ["Allergic to penicillin"]');
  assert.match(await inChild(dir, marks, agent), /^ROLLBACK /);
  // The mark is sealed: no revision or fact in the clear.
  const [mark] = Object.values(files(marks));
  assert.match(mark, /^umark1:1:[A-Za-z0-9+/=]+$/);
});

test("a missing, corrupt or forged mark does not lock the owner out; the next commit writes it again", async () => {
  const dir = scratchDir("um-mark-");
  const marks = join(scratchDir("um-marks-"), "marks");
  const agent = freshAgent("mark");
  await inChild(dir, marks, agent, `await m.addFact({ content: "Plays the cello" });`);
  const backup = files(dir);
  await inChild(
    dir,
    marks,
    agent,
    `await m.addFact({ content: "Lives in Lyon" }); process.kill(process.pid, "SIGKILL");`,
  );
  const [name] = Object.keys(files(marks));
  const genuine = readFileSync(join(marks, name), "utf8");
  restore(dir, backup);
  // Corrupt, forged (a well-formed mark that does not open under the data key), then gone.
  for (const planted of ["garbage", genuine.replace(/.{8}$/, "AAAAAAA="), `umark1:1:${"A".repeat(60)}`, null]) {
    if (planted === null) rmSync(marks, { recursive: true });
    else writeFileSync(join(marks, name), planted);
    assert.equal(await inChild(dir, marks, agent), 'OPEN ["Plays the cello"]', String(planted));
  }
  // The genuine mark put back refuses again; a commit after the owner's open raises it anew.
  writeFileSync(join(marks, name), genuine);
  assert.match(await inChild(dir, marks, agent), /^ROLLBACK /);
  rmSync(marks, { recursive: true });
  const before = files(dir);
  await inChild(dir, marks, agent, `await m.addFact({ content: "Speaks Basque" });`);
  restore(dir, before);
  assert.match(await inChild(dir, marks, agent), /^ROLLBACK /);
});

/** A storage adapter over `map`; `name` tells the process-wide mark apart (a "new process"). */
function mapAdapter(map, name) {
  return {
    name,
    get: (k) => map.get(k) ?? null,
    set: (k, v) => void map.set(k, v),
    delete: (k) => void map.delete(k),
    keys: (prefix) => [...map.keys()].filter((k) => k.startsWith(prefix)),
  };
}

test("any store keeps its mark in an encryption.mark object; false turns it off; a bad one is refused", async () => {
  const data = new Map();
  const markMap = new Map();
  const mark = {
    name: "the test's mark map",
    get: async (n) => markMap.get(n),
    set: async (n, v) => void markMap.set(n, v),
  };
  const agent = freshAgent("mark");
  const open = (name, m = mark) =>
    openMemory({
      agent,
      storage: mapAdapter(data, name),
      autoProcess: false,
      encryption: { passphrase: PASS, mark: m },
    });
  let memory = await open("first");
  await memory.addFact({ content: "Allergic to penicillin" });
  const backup = new Map(data);
  await memory.removeFact((await memory.get()).facts[0].id, { forget: true });
  await memory.close();
  assert.equal(markMap.size, 1);
  data.clear();
  for (const [k, v] of backup) data.set(k, v);
  await assert.rejects(open("second"), (e) => e.code === "ROLLBACK" && e.message.includes("the test's mark map"));
  memory = await open("third", false);
  assert.deepEqual(
    (await memory.get()).facts.map((f) => f.content),
    ["Allergic to penicillin"],
  );
  await memory.close();
  for (const bad of [{ get: () => null }, "file", 1, true]) {
    await assert.rejects(open("fourth", bad), (e) => e.code === "INVALID_INPUT" && /`mark` must be/.test(e.message));
  }
  // fileStore refuses marks kept inside the store folder itself.
  const dir = scratchDir("um-mark-");
  assert.throws(() => fileStore(dir, { markDir: join(dir, "marks") }), { code: "INVALID_INPUT" });
  assert.equal(typeof UserMemory.open, "function");
});
