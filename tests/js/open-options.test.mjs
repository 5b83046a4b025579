// What open() makes visible and allows, through the built package: options().storage names
// the storage in force; a Node process whose memory defaulted to "memory" is told once (a
// debug event); open() without llm reads and queues for an instance that has one; a
// mistyped option name gets "did you mean".
import { after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UserMemory } from "user-memory";
import { fileStore } from "user-memory/node";
import { closeAll, freshAgent, openMemory, runChild, test, turn } from "../helpers/pipeline.mjs";

const dir = mkdtempSync(join(tmpdir(), "um-open-"));
after(async () => {
  await closeAll();
  rmSync(dir, { recursive: true, force: true });
});

const llm = async () => JSON.stringify({ newFacts: [{ content: "Keeps bees", category: "context", confidence: 0.9 }] });
const mapStore = (name) => {
  const map = new Map();
  const s = { get: (k) => map.get(k) ?? null, set: (k, v) => void map.set(k, v), delete: (k) => void map.delete(k) };
  return name ? Object.assign(s, { name }) : s;
};

test("options().storage names the storage in force: the Node default, a named store, an adapter", async () => {
  const cases = [
    [undefined, "memory"],
    ["memory", "memory"],
    [fileStore(join(dir, "files")), `fileStore(${JSON.stringify(join(dir, "files"))})`],
    [mapStore("my kv"), "my kv"],
    [mapStore(), "adapter"],
  ];
  for (const [storage, expected] of cases) {
    const memory = await openMemory({ agent: freshAgent("storage"), storage, llm });
    assert.equal(memory.options().storage, expected);
    await memory.close();
  }
});

test("a Node process whose memory defaulted to in-memory storage is told once, at the first queued conversation", async () => {
  const run = await runChild(`
    import { UserMemory } from "user-memory";
    const llm = async () => '{"newFacts":[]}';
    const events = [];
    const listen = (m, name) => m.on("debug", (e) => e.code === "EPHEMERAL_STORAGE" && events.push([name, e.threadId, e.message]));
    const conv = ${JSON.stringify(turn("I keep bees", "Sweet"))};
    // Not told: storage chosen (even "memory"), or no timers extracting.
    const chosen = await UserMemory.open({ agent: "a", storage: "memory", llm });
    const manual = await UserMemory.open({ agent: "b", autoProcess: false, llm });
    listen(chosen, "chosen"); listen(manual, "manual");
    chosen.observe("t0", conv); manual.observe("t0", conv);
    // Told once for the process, however many instances queue.
    const first = await UserMemory.open({ agent: "c", llm });
    const second = await UserMemory.open({ agent: "d", llm });
    listen(first, "first"); listen(second, "second");
    first.observe("t1", [{ role: "user", content: "only a question" }]);   // nothing queued: not yet
    first.observe("t2", conv); first.observe("t3", conv); second.observe("t4", conv);
    for (const m of [chosen, manual, first, second]) await m.close();
    console.log(JSON.stringify({ events }));
  `);
  assert.equal(run.code, 0, run.stderr);
  const { events } = JSON.parse(run.stdout);
  assert.equal(events.length, 1, JSON.stringify(events));
  const [name, thread, message] = events[0];
  assert.deepEqual([name, thread], ["first", "t2"]);
  assert.match(message, /no `storage` was given.*\("memory"\) and lost on exit.*fileStore\(dir\)/s);
});

test("with no debug or error listener, ephemeral memory in Node says so once with console.warn", async () => {
  const script = (setup) => `
    import { UserMemory } from "user-memory";
    const llm = async () => '{"newFacts":[]}';
    const conv = ${JSON.stringify(turn("I keep bees", "Sweet"))};
    ${setup}
    const a = await UserMemory.open({ agent: "a", llm, ...options });
    const b = await UserMemory.open({ agent: "b", llm, ...options });
    listen(a);
    await a.observe("t1", conv); await a.observe("t2", conv); await b.observe("t3", conv);
    await a.close(); await b.close();
  `;
  const warnings = (stderr) => stderr.split("\n").filter((l) => l.startsWith("user-memory: "));
  // Nobody listens: one console.warn for the process, naming the fix.
  const quiet = await runChild(script("const options = {}; const listen = () => {};"));
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.equal(warnings(quiet.stderr).length, 1, quiet.stderr);
  assert.match(
    warnings(quiet.stderr)[0],
    /no `storage` was given.*lost on exit.*fileStore\(dir\).*storage: "memory" says it is meant/,
  );
  // Silenced: storage "memory" given on purpose; an error listener; a debug listener (which gets the event).
  for (const setup of [
    'const options = { storage: "memory" }; const listen = () => {};',
    'const options = {}; const listen = (m) => m.on("error", () => {});',
    'const options = {}; const listen = (m) => m.on("debug", (e) => console.log(e.code));',
  ]) {
    const run = await runChild(script(setup));
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(warnings(run.stderr), [], setup);
    if (setup.includes("debug")) assert.match(run.stdout, /EPHEMERAL_STORAGE/);
  }
});

test("open() without llm: reads, edits and queues; flush() and processDue() say why not; an instance with llm processes the queue", async () => {
  const storage = fileStore(join(dir, "read-only"));
  const agent = freshAgent("ro");
  const reader = await openMemory({ agent, storage });
  assert.equal(reader.options().autoProcess, false, "no timers without an llm");
  await reader.addFact({ content: "Lives in Porto" });
  assert.match(await reader.inject([{ role: "user", content: "Where do I live?" }]), /Lives in Porto/);
  assert.equal((await reader.search("Porto")).length, 1);
  assert.equal(await reader.observe("t1", turn("I keep bees", "Sweet")), true, "queued, in storage");
  assert.deepEqual(reader.status().pending, ["t1"]);
  for (const call of [() => reader.flush(), () => reader.processDue()]) {
    await assert.rejects(call(), {
      name: "UserMemoryError",
      code: "INVALID_INPUT",
      message: /opened without `llm`.*queue stays in storage/,
    });
  }
  assert.throws(() => reader.configure({ autoProcess: true }), { code: "INVALID_INPUT", message: /needs `llm`/ });
  await reader.close();

  // A worker with an llm, over the same storage, takes the queued conversation.
  const worker = await openMemory({ agent, storage, llm });
  assert.deepEqual(await worker.flush(), { processed: ["t1"], failed: [] });
  assert.deepEqual((await worker.get()).facts.map((f) => f.content).sort(), ["Keeps bees", "Lives in Porto"]);
  await worker.close();
});

test("open() with no options at all, or with autoProcess but no llm", async () => {
  const memory = await UserMemory.open();
  assert.equal(memory.options().agent, "default");
  await memory.close();
  await assert.rejects(UserMemory.open({ autoProcess: true }), {
    code: "INVALID_INPUT",
    message: "`autoProcess: true` needs `llm` (an instance without one never extracts)",
  });
  await assert.rejects(UserMemory.open({ llm: 42 }), { code: "INVALID_INPUT", message: /or left out \(read-only\)/ });
});

test("a mistyped option name gets a suggestion; an llm field at the top level is pointed inside llm", async () => {
  const cases = [
    [
      { llm: { baseURL: "http://127.0.0.1:9/v1", model: "m" } },
      "unknown option `llm.baseURL`: did you mean `baseUrl`? (known: ",
    ],
    [
      { llm: { base_url: "http://127.0.0.1:9/v1", model: "m" } },
      "unknown option `llm.base_url`: did you mean `baseUrl`?",
    ],
    [{ llm, debounce: 5000 }, "unknown option `debounce`: did you mean `debounceMs`?"],
    [{ llm, maxfacts: 5 }, "unknown option `maxfacts`: did you mean `maxFacts`?"],
    [{ apiKey: "k", model: "m" }, "unknown option `apiKey`: it belongs inside `llm` ({ llm: { apiKey, … } })"],
    [{ llm, storage: "indexedDB" }, 'found "indexedDB": did you mean `indexeddb`?'],
  ];
  for (const [options, message] of cases) {
    const e = await UserMemory.open(options).then(
      () => null,
      (e) => e,
    );
    assert.equal(e?.code, "INVALID_INPUT", JSON.stringify(options));
    assert.ok(e.message.includes(message), `${e.message}\n  should contain: ${message}`);
  }
  const memory = await openMemory({ agent: freshAgent("typo"), storage: "memory", llm });
  assert.throws(() => memory.configure({ debounceMS: 10 }), {
    code: "INVALID_INPUT",
    message: "unknown option `debounceMS`: did you mean `debounceMs`?",
  });
  await assert.rejects(memory.search("x", { limt: 3 }), { code: "INVALID_INPUT", message: /did you mean `limit`/ });
});

test("userId is an alias of agent in open(), inspect() and reset(); two different values are refused", async () => {
  const storage = fileStore(join(dir, "alias"));
  const byUser = await openMemory({ userId: "user-42", storage });
  assert.equal(byUser.options().agent, "user-42");
  await byUser.addFact({ content: "Keeps bees" });
  await byUser.close();
  // The same memory under its other name, in a fresh instance reading the folder.
  const byAgent = await openMemory({ agent: "user-42", userId: "user-42", storage });
  assert.deepEqual(
    (await byAgent.get()).facts.map((f) => f.content),
    ["Keeps bees"],
  );
  await byAgent.close();
  assert.match((await UserMemory.inspect({ userId: "user-42", storage })).document, /Keeps bees/);
  for (const call of [
    () => UserMemory.open({ agent: "alice", userId: "bob", storage }),
    () => UserMemory.inspect({ agent: "alice", userId: "bob", storage }),
    () => UserMemory.reset({ agent: "user-42", userId: "bob", storage }),
  ])
    await assert.rejects(call(), {
      code: "INVALID_INPUT",
      message: /`agent` and its alias `userId` differ \("(alice|user-42)", "bob"\): give one/,
    });
  // A userId that is not a string never falls back to the default memory.
  await assert.rejects(UserMemory.reset({ userId: 42, storage }), { code: "INVALID_INPUT", message: /`userId`/ });
  assert.match((await UserMemory.inspect({ agent: "user-42", storage })).document, /Keeps bees/, "nothing reset");
  await UserMemory.reset({ userId: "user-42", storage });
  assert.equal((await UserMemory.inspect({ agent: "user-42", storage })).document, null);
});
