// The CLI as people use it, over a folder (pkg/cli.js as a subprocess): per-command help,
// suggestions for typos, one JSON value per command with --json, undo / redo / revert that
// step like an editor's, a history that names the facts, `show` naming the memories a folder
// holds, typed values refused when out of range, stored terminal control sequences printed
// escaped, and a --passphrase-env argument never echoed.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { ROOT } from "../helpers/pack.mjs";
import { scratchDir } from "../helpers/pipeline.mjs";

const CLI = join(ROOT, "pkg/cli.js");
const scratch = scratchDir("um-cli-commands-");
let dirs = 0;
const freshDir = () => ["--dir", join(scratch, `d${++dirs}`)];

/** Runs pkg/cli.js with `args`; resolves { status, stdout, stderr }. */
function run(args, { env = {}, input = "" } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (status, signal) => resolve({ status: status ?? signal, stdout, stderr }));
    child.stdin.end(input);
  });
}

async function ok(args, options) {
  const r = await run(args, options);
  assert.equal(r.status, 0, `user-memory ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

async function refused(args, status, pattern, options) {
  const r = await run(args, options);
  assert.equal(r.status, status, `user-memory ${args.join(" ")}: ${r.stderr}`);
  assert.match(r.stderr, pattern);
  return r;
}

const facts = async (dir) => JSON.parse(await ok(["export", ...dir])).facts.map((f) => f.content);

test("help: the list of commands with exit codes, and each command's own help", async () => {
  const all = await ok(["help"]);
  for (const c of ["show", "add", "undo", "redo", "revert <revision>", "history", "mcp"])
    assert.match(all, new RegExp(`\\n  ${c.replace(/[<>]/g, ".")}\\s`), c);
  assert.match(
    all,
    /Exit status:\n {2}0 {2}done\n[\s\S]*\n {2}2 {2}INVALID_INPUT[\s\S]*\n {2}5 {2}CORRUPT_MEMORY, DECRYPT_FAILED/,
  );
  assert.equal(await ok([]), all, "no command: the list");
  const addHelp = await ok(["help", "add"]);
  assert.match(addHelp, /^user-memory add <text…> — add a fact\n/);
  assert.match(addHelp, /--category <name> +one of preference, knowledge/);
  assert.match(addHelp, /--confidence <0\.\.1>/);
  assert.match(addHelp, /With --json: \{ revision, added \}/);
  assert.doesNotMatch(addHelp, /^Commands:/m, "not the global help");
  assert.equal(await ok(["add", "--help"]), addHelp);
  assert.equal(await ok(["add", "-h"]), addHelp);
  await refused(["help", "ad"], 2, /unknown command "ad": did you mean add\?/);
});

test("typos get a suggestion; an option of another command says which one takes it", async () => {
  const dir = freshDir();
  await refused(["shwo", ...dir], 2, /^error INVALID_INPUT: unknown command "shwo": did you mean show\?/);
  await refused(["hist", ...dir], 2, /did you mean history\?/);
  await refused(
    ["add", ...dir, "--confidance", "0.5", "x"],
    2,
    /unknown option --confidance: did you mean --confidence\?/,
  );
  await refused(["show", ...dir, "--category", "goal"], 2, /show takes no --category \(add does\)/);
  await refused(
    ["search", ...dir, "--yes", "x"],
    2,
    /search takes no --yes \(import, reset do\); its options: --limit/,
  );
  assert.deepEqual(await facts(dir), [], "nothing was added");
});

test("values a user types are refused when out of range, with a clear error, and nothing changes", async () => {
  const dir = freshDir();
  await ok(["add", ...dir, "Keeps bees"]);
  for (const value of ["2", "-0.1", "1.5", "1e5", "0.5x", "NaN", ""])
    await refused(
      ["add", ...dir, "--confidence", value, "Lives in Lisbon"],
      2,
      /--confidence must be a number from 0 to 1/,
    );
  await refused(
    ["add", ...dir, "--category", "prefrence", "x"],
    2,
    /--category must be one of .*\(did you mean preference\?\)/,
  );
  for (const value of ["0", "1001", "2.5", "-3", "ten"])
    for (const command of [["history"], ["search", "bees"]])
      await refused([...command, ...dir, "--limit", value], 2, /--limit must be a whole number from 1 to 1000/);
  await refused(["revert", ...dir, "abc"], 2, /revert needs one revision number/);
  await refused(["revert", ...dir, "9"], 2, /revision 9 is not in the past: memory is at revision 1/);
  await refused(["add", ...dir, "x".repeat(1001)], 2, /the fact is 1001 characters long; .* at most 1000 characters/);
  const added = JSON.parse(await ok(["add", ...dir, "--json", "--confidence", "1", "--category", "goal", "Runs"]));
  assert.deepEqual([added.added.confidence, added.added.category], [1, "goal"]);
  assert.deepEqual(await facts(dir), ["Keeps bees", "Runs"]);
});

test("undo steps back change by change, redo steps forward, revert goes to a revision; history says which is which", async () => {
  const dir = freshDir();
  for (const f of ["Keeps bees", "Lives in Lisbon", "Plays the oboe"]) await ok(["add", ...dir, f]);
  assert.match(
    await ok(["undo", ...dir]),
    /^undid revision 3 \(addFact: \+1 fact\); memory is at revision 4\n {6}- .*Plays the oboe$/m,
  );
  assert.deepEqual(await facts(dir), ["Keeps bees", "Lives in Lisbon"]);
  assert.match(await ok(["undo", ...dir]), /^undid revision 2 /, "the second undo takes back the change before");
  assert.deepEqual(await facts(dir), ["Keeps bees"]);
  assert.match(await ok(["redo", ...dir]), /^redid: took back the undo of revision 5; memory is at revision 6/);
  assert.deepEqual(await facts(dir), ["Keeps bees", "Lives in Lisbon"]);
  const redo = JSON.parse(await ok(["redo", ...dir, "--json"]));
  assert.deepEqual(redo, { revision: 7, revertedTo: 3, redid: { revision: 4, reason: "revert" } });
  assert.deepEqual((await facts(dir)).sort(), ["Keeps bees", "Lives in Lisbon", "Plays the oboe"]);
  await refused(["redo", ...dir], 3, /nothing to redo: no undo since the last change/);
  const history = await ok(["history", ...dir]);
  assert.match(history, /^ {2}7 .* revert \(redo\) to revision 3: \+1 fact$/m);
  assert.match(history, /^ {2}5 .* revert \(undo\) to revision 1: -1 fact$/m);
  // A new change after an undo: nothing to redo.
  await ok(["undo", ...dir]);
  await ok(["add", ...dir, "Sails dinghies"]);
  await refused(["redo", ...dir], 3, /nothing to redo/);
  assert.match(await ok(["revert", ...dir, "1"]), /^reverted to revision 1; memory is at revision 10\n/);
  assert.deepEqual(await facts(dir), ["Keeps bees"]);
  await ok(["undo", ...dir]);
  assert.deepEqual((await facts(dir)).sort(), ["Keeps bees", "Lives in Lisbon", "Sails dinghies"]);
  await refused(["undo", ...freshDir()], 3, /nothing to undo: the history is empty/);
});

test("--json: every command prints one JSON object on stdout; errors one JSON line on stderr", async () => {
  const dir = freshDir();
  const json = async (args, options) => {
    const out = await ok([...args, "--json"], options);
    const value = JSON.parse(out);
    assert.equal(typeof value, "object");
    assert.ok(!Array.isArray(value), `${args[0]} prints an object, not a bare array`);
    return value;
  };
  const { added } = await json(["add", ...dir, "Keeps bees"]);
  await json(["add", ...dir, "Lives in Lisbon"]);
  assert.equal((await json(["show", ...dir])).document.facts.length, 2);
  assert.equal((await json(["search", ...dir, "bees"])).results[0].fact.id, added.id);
  assert.equal((await json(["history", ...dir])).entries.length, 2);
  assert.deepEqual(Object.keys(await json(["undo", ...dir])).sort(), ["revertedTo", "revision", "undid"]);
  assert.deepEqual(Object.keys(await json(["redo", ...dir])).sort(), ["redid", "revertedTo", "revision"]);
  assert.deepEqual(await json(["revert", ...dir, "1"]), { revision: 5, revertedTo: 1 });
  assert.equal((await json(["forget", ...dir, "bees"])).removed[0].id, added.id);
  assert.deepEqual((await json(["agents", ...dir])).agents, ["default"]);
  assert.ok("document" in (await json(["inspect", ...dir])));
  const doc = await json(["export", ...dir]);
  assert.deepEqual((await json(["import", ...freshDir(), "-"], { input: JSON.stringify(doc) })).imported, 0);
  await ok(["add", ...dir, "Plays the oboe"]);
  assert.equal(
    (await json(["remove", ...dir, JSON.parse(await ok(["show", ...dir, "--json"])).document.facts[0].id])).removed
      .length,
    1,
  );
  assert.deepEqual(await json(["reset", ...dir, "--yes"]), { reset: "default" });
  const e = await run(["remove", ...dir, "fact_00000000", "--json"]);
  assert.equal(e.status, 3);
  assert.equal(e.stderr.trimEnd().split("\n").length, 1);
  assert.equal(JSON.parse(e.stderr).error.code, "NOT_FOUND");
});

test("show on an empty memory names the memories the folder holds", async () => {
  const dir = freshDir();
  await ok(["add", ...dir, "--agent", "terminal", "Prefers dark mode"]);
  const shown = await ok(["show", ...dir]);
  assert.match(
    shown,
    /Memory "default" in folder .*: 0 facts, revision 0\n\n\(empty\)\nThis store holds the memory "terminal": pick one with --agent terminal\n$/,
  );
  assert.deepEqual(JSON.parse(await ok(["show", ...dir, "--json"])).agents, ["terminal"]);
  await ok(["add", ...dir, "--agent", "coder", "Writes Rust"]);
  assert.match(await ok(["show", ...dir]), /the memories "coder", "terminal": pick one with --agent coder/);
  assert.match(await ok(["show", ...dir, "--agent", "terminal"]), /Prefers dark mode/);
});

test("stored terminal control sequences are printed escaped, in every human-readable output; add and import strip them on store", async () => {
  const dir = freshDir();
  // OSC 52 (write the clipboard), OSC 8 (a link), cursor up + erase line (hide what is above),
  // an 8-bit CSI, a forged second line.
  const evil = [
    "Likes \u001b]52;c;ZWNobyBwd25lZA==\u0007 tea",
    "See \u001b]8;;https://evil.example\u001b\\docs\u001b]8;;\u001b\\ page",
    "Hides\u001b[2A\u001b[2K lines",
    "Colour \u009b31m red",
    "Two\nfact_00000000 [preference | 1.00] forged line",
  ];
  // Planted in the files (`add` and `import` strip control characters on store, see below):
  // what an older version or another writer left in the store. Imported as placeholders,
  // each then replaced by its JSON-escaped sequence in every stored file (history included).
  const facts = evil.map((_, i) => ({
    id: `fact_1000000${i}`,
    content: `PLACEHOLDER${i}X`,
    category: "preference",
    confidence: 0.9,
  }));
  await ok(["import", ...dir, "-"], { input: JSON.stringify({ version: "1.0", user: {}, history: {}, facts }) });
  await ok(["add", ...dir, "Plain fact"]); // what `undo` below undoes
  let planted = 0;
  for (const name of readdirSync(dir[1])) {
    const file = join(dir[1], name);
    const text = readFileSync(file, "utf8");
    const evilText = text.replace(/PLACEHOLDER(\d)X/g, (_, i) => JSON.stringify(evil[Number(i)]).slice(1, -1));
    if (evilText !== text) {
      writeFileSync(file, evilText);
      planted++;
    }
  }
  assert.ok(planted > 0, "the placeholders were found in the stored files");
  const outputs = [
    await ok(["show", ...dir]),
    await ok(["search", ...dir, "tea", "docs", "lines", "red", "forged"]),
    await ok(["history", ...dir]),
    await ok(["undo", ...dir]),
    (await run(["forget", ...dir, "e"])).stderr,
    (await run(["forget", ...dir, "\u001b[2Jnothing"])).stderr,
  ];
  for (const out of outputs) {
    assert.doesNotMatch(out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, `a raw control character in:\n${out}`);
    assert.doesNotMatch(out, /^fact_00000000/m, "a fact cannot start a line of its own");
  }
  assert.match(outputs[0], /Likes \\x1b\]52;c;ZWNobyBwd25lZA==\\x07 tea/);
  assert.match(outputs[0], /Colour \\x9b31m red/);
  assert.match(outputs[0], /Two\\nfact_00000000/);
  // --json keeps the text exactly (JSON escapes), with C1 escaped too.
  const json = await ok(["show", ...dir, "--json"]);
  assert.doesNotMatch(json, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  assert.ok(JSON.parse(json).document.facts.some((f) => f.content === "Colour \u009b31m red"));
  // `add` strips them on store.
  const clean = freshDir();
  await ok(["add", ...clean, evil[0]]);
  const stored = JSON.parse(await ok(["show", ...clean, "--json"])).document.facts[0].content;
  assert.equal(stored, "Likes ]52;c;ZWNobyBwd25lZA== tea");
  // `import` too.
  const imported = freshDir();
  await ok(["import", ...imported, "-"], {
    input: JSON.stringify({ version: "1.0", user: {}, history: {}, facts: [{ content: evil[2] }] }),
  });
  const kept = JSON.parse(await ok(["show", ...imported, "--json"])).document.facts[0].content;
  assert.equal(kept, "Hides[2A[2K lines");
});

test("--passphrase-env never echoes its argument", async () => {
  const dir = freshDir();
  for (const arg of ["hunter2secret", "correct horse battery", "pass=word"]) {
    for (const form of [["--passphrase-env", arg], [`--passphrase-env=${arg}`]]) {
      const r = await run(["show", ...dir, ...form]);
      assert.equal(r.status, 2, r.stderr);
      assert.ok(!r.stderr.includes(arg) && !r.stdout.includes(arg), `echoed ${arg}: ${r.stderr}`);
      const j = await run(["show", ...dir, ...form, "--json"]);
      assert.ok(!j.stderr.includes(arg), `echoed in JSON: ${j.stderr}`);
    }
  }
  // Nor a value typed after a mistyped option name.
  const typo = await run(["show", ...dir, "--passphrase=hunter2secret"]);
  assert.equal(typo.status, 2);
  assert.match(typo.stderr, /unknown option --passphrase: did you mean --passphrase-env\?/);
  assert.ok(!typo.stderr.includes("hunter2secret"));
});
