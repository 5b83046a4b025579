// Encrypted memory with history and undo through one server store, end to end: the check that
// the server stores carry encryption and history like every other backend. Plain JavaScript
// with no imports (UserMemory is passed in), so it runs in Node 20 (Postgres, Redis), in the
// SQLite child processes (Node 22/24, Bun) and inside workerd (Durable Object, D1): see
// tests/servers/contract.test.mjs.
//
//   await encryptedRoundTrip({ UserMemory, storage: () => adapter, raw: () => rows, llmBaseUrl });
//
// `storage()` makes (or resolves to) one more adapter on the same namespace; `raw()` reads every stored value
// with the database's own client (not through the adapter) as something JSON.stringify can
// show. The LLM at `llmBaseUrl` must answer every extraction with the fact "Keeps bees".
// Throws an Error saying what differed.

/** The name of the check, as the test runners register it. */
export const ENCRYPTED_CASE =
  "encrypted memory: facts, extraction, history and undo round-trip; nothing stored is plaintext; a wrong passphrase changes nothing";

const PASSPHRASE = "correct horse battery staple on the server";
/** What the memory holds in plain text: none of it may appear in a stored value. */
const PLAINTEXT = ["penicillin", "Lisbon", "lisbon", "bees", "hives", PASSPHRASE];

function check(ok, what) {
  if (!ok) throw new Error(what);
}

const same = (a, b, what) =>
  check(JSON.stringify(a) === JSON.stringify(b), `${what}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`);
const contents = (doc) => doc.facts.map((f) => f.content).sort();

/** Resolves to the error code `promise` rejects with; throws if it resolves. */
async function codeOf(promise, what) {
  let memory;
  try {
    memory = await promise;
  } catch (e) {
    return e.code;
  }
  await memory.close();
  throw new Error(`${what} opened`);
}

export async function encryptedRoundTrip({ UserMemory, storage, raw, llmBaseUrl }) {
  const llm = { baseUrl: llmBaseUrl, apiKey: "sk-roundtrip", model: "m", maxRetries: 0 };
  const options = async (encryption) => ({
    agent: "encrypted",
    storage: await storage(),
    llm,
    autoProcess: false,
    ...(encryption ? { encryption } : {}),
  });
  const open = async (passphrase) => UserMemory.open(await options({ passphrase }));

  let memory = await open(PASSPHRASE);
  try {
    await memory.addFact({ content: "Allergic to penicillin", category: "context" });
    await memory.addFact({ content: "Lives in Lisbon" });
    await memory.observe("t1", [
      { role: "user", content: "I keep three hives of bees" },
      { role: "assistant", content: "Noted." },
    ]);
    const report = await memory.flush();
    same(report.processed, ["t1"], "flush() processed the queued thread");
  } finally {
    await memory.close();
  }

  const all = ["Allergic to penicillin", "Keeps bees", "Lives in Lisbon"];
  memory = await open(PASSPHRASE);
  try {
    same(contents(await memory.get()), all, "facts after reopening");
    const history = await memory.history();
    same(
      history.map((e) => e.reason),
      ["extraction", "addFact", "addFact"],
      "history reasons, newest first",
    );
    same([history[0].threadId, history[0].added.map((f) => f.content)], ["t1", ["Keeps bees"]], "the extraction entry");
    const extracted = history[0].revision;
    same(contents(await memory.undo()), ["Allergic to penicillin", "Lives in Lisbon"], "undo() of the extraction");
    same(contents(await memory.revert(extracted)), all, "revert() to the extraction's revision");
    same(
      (await memory.history({ limit: 2 })).map((e) => e.reason),
      ["revert", "revert"],
      "undo and revert are entries of their own",
    );
  } finally {
    await memory.close();
  }

  // Reopened once more: the reverted document and the history were stored encrypted too.
  memory = await open(PASSPHRASE);
  try {
    same(contents(await memory.get()), all, "facts after undo, revert and reopening");
    check((await memory.history()).length === 5, "five history entries stored");
  } finally {
    await memory.close();
  }

  const stored = JSON.stringify(await raw());
  check(stored.includes("umenc2:"), `the stored values are ciphertext: ${stored.slice(0, 300)}`);
  for (const text of PLAINTEXT) check(!stored.includes(text), `a stored value contains ${JSON.stringify(text)}`);

  same(await codeOf(open("a wrong passphrase"), "a wrong passphrase"), "DECRYPT_FAILED", "a wrong passphrase");
  same(
    await codeOf(UserMemory.open(await options(null)), "no encryption"),
    "DECRYPT_FAILED",
    "opened without encryption",
  );
  same(JSON.stringify(await raw()), stored, "the stored values after the refused opens");
}
