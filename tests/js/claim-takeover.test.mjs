// Claims on queue entries between real processes on one file store. A claim lasts 15 s
// unless renewed, and the process working on the entry renews it every 5 s, so:
// * a process killed mid-extraction (kill -9, its claim left behind) holds up another
//   process's flush() for at most that lease — it used to be the whole attempt budget:
//   6 minutes with the default options, 10 with an LLM function;
// * an extraction that takes longer than the lease keeps its entry: the other process
//   waits for it and never calls its own model for it.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { root } from "../helpers/pipeline.mjs";

const dirs = [];
const children = new Set();
after(() => {
  for (const c of children) c.kill("SIGKILL");
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

/** A child Node process running `code`; `line(prefix)` resolves with its first stdout line starting so. */
function child(code) {
  const p = spawn(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(p);
  const lines = [];
  const waiters = [];
  let partial = "";
  let stderr = "";
  p.stderr.setEncoding("utf8");
  p.stderr.on("data", (c) => (stderr += c));
  p.stdout.setEncoding("utf8");
  p.stdout.on("data", (c) => {
    partial += c;
    let i;
    while ((i = partial.indexOf("\n")) >= 0) {
      const text = partial.slice(0, i);
      partial = partial.slice(i + 1);
      lines.push(text);
      for (const w of [...waiters])
        if (text.startsWith(w.prefix)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(text));
    }
  });
  const exited = new Promise((r) => p.on("close", (code, signal) => (children.delete(p), r({ code, signal, stderr }))));
  const line = (prefix) =>
    lines.find((l) => l.startsWith(prefix)) ??
    new Promise((resolve, reject) => {
      waiters.push({ prefix, resolve });
      exited.then((e) =>
        reject(new Error(`child exited (${e.code ?? e.signal}) before printing "${prefix}": ${e.stderr}`)),
      );
    });
  return { p, lines, line, exited };
}

const open = (dir, llm) => `
  import { UserMemory } from "user-memory";
  import { fileStore } from "user-memory/node";
  const memory = await UserMemory.open({ storage: fileStore(${JSON.stringify(dir)}), autoProcess: false, llm: ${llm} });
`;
const observe = `await memory.observe("t1", [{ role: "user", content: "I sail on weekends" }, { role: "assistant", content: "Nice." }]);`;
const reply = (fact) => JSON.stringify(JSON.stringify({ newFacts: [{ content: fact, confidence: 0.9 }] }));

describe("claims between processes", { concurrency: 2 }, () => {
  it(
    "a process killed mid-extraction holds up another process's flush() for one lease, not the attempt budget",
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "um-claim-"));
      dirs.push(dir);
      const a = child(`${open(dir, `async () => { console.log("llm"); return new Promise(() => {}); }`)}
      ${observe}
      memory.flush().catch(() => {});`);
      await a.line("llm");
      a.p.kill("SIGKILL");
      const killedAt = Date.now();
      await a.exited;
      const b = child(`${open(dir, `async () => ${reply("Sails on weekends")}`)}
      const report = await memory.flush();
      console.log("done " + JSON.stringify({ report, facts: (await memory.get()).facts.map((f) => f.content) }));
      await memory.close();`);
      const done = JSON.parse((await b.line("done")).slice(5));
      console.log(
        `# flush() of the second process resolved ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`,
      );
      assert.deepEqual(done, { report: { processed: ["t1"], failed: [] }, facts: ["Sails on weekends"] });
      assert.equal((await b.exited).code, 0);
    },
  );

  it(
    "an extraction longer than the lease keeps its entry: the other process waits and never calls its model",
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "um-claim-"));
      dirs.push(dir);
      const a =
        // fixed wait: a model slower than the 15 s claim (the scenario), not a wait of the test
        child(`${open(dir, `async () => { console.log("llm"); await new Promise((r) => setTimeout(r, 22_000)); return ${reply("Sails (A)")}; }`)}
      ${observe}
      const report = await memory.flush();
      console.log("done " + JSON.stringify(report));
      await memory.close();`);
      await a.line("llm");
      const b = child(`${open(dir, `async () => { console.log("b-llm"); return ${reply("Sails (B)")}; }`)}
      const report = await memory.flush();
      console.log("done " + JSON.stringify({ report, facts: (await memory.get()).facts.map((f) => f.content) }));
      await memory.close();`);
      const aDone = JSON.parse((await a.line("done")).slice(5));
      const bDone = JSON.parse((await b.line("done")).slice(5));
      assert.deepEqual(aDone, { processed: ["t1"], failed: [] });
      assert.deepEqual(
        bDone,
        { report: { processed: [], failed: [] }, facts: ["Sails (A)"] },
        "B waited for A's result",
      );
      assert.ok(!b.lines.includes("b-llm"), "B never called its model");
      assert.equal((await a.exited).code, 0);
      assert.equal((await b.exited).code, 0);
    },
  );
});
