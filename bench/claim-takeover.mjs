// How long another process's flush() waits after the process processing an entry is killed
// with SIGKILL mid-extraction (its claim on the entry is left behind), through the built
// package and a file store.
//
//   node scripts/build.mjs && node bench/claim-takeover.mjs [default|timeout1000|function …]
//
// Per case: process A opens the store, observes one conversation and calls flush(); its
// model never answers (a local server that holds the request, or a function that never
// resolves). As soon as A's extraction is in flight, A gets SIGKILL. Process B then opens
// the same folder with a model that answers and calls flush(); the figure is the time from
// the kill to B's flush() resolving (B's own extraction takes milliseconds).
//
// * default     — llm: { baseUrl, model } with the default timeoutMs (60 s) and maxRetries (2)
// * timeout1000 — the same with timeoutMs: 1000
// * function    — llm: an async function
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmServer } from "../tests/helpers/llm-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const CASES = { default: {}, timeout1000: { timeoutMs: 1000 }, function: null };
const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(CASES);

/** Runs `code` in a child Node process; resolves with the child and a promise of its stdout lines. */
function child(code) {
  const p = spawn(process.execPath, ["--input-type=module", "-e", code], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = [];
  const waiters = [];
  let partial = "";
  p.stdout.setEncoding("utf8");
  p.stdout.on("data", (c) => {
    partial += c;
    let i;
    while ((i = partial.indexOf("\n")) >= 0) {
      const line = partial.slice(0, i);
      partial = partial.slice(i + 1);
      lines.push(line);
      for (const w of [...waiters])
        if (line.startsWith(w.prefix)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(line));
    }
  });
  const exited = new Promise((r) => p.on("close", r));
  const line = (prefix) => {
    const seen = lines.find((l) => l.startsWith(prefix));
    return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ prefix, resolve }));
  };
  return { p, line, exited };
}

async function run(name) {
  const dir = mkdtempSync(join(tmpdir(), "um-takeover-"));
  const hanging = await startLlmServer({ fallback: () => ({ hang: true }) });
  const answering = await startLlmServer({
    fallback: () => ({ json: { newFacts: [{ content: "Sails on weekends", confidence: 0.9 }] } }),
  });
  const extra = CASES[name];
  const llmA =
    extra === null
      ? `async () => { console.log("llm"); return new Promise(() => {}); }`
      : JSON.stringify({ baseUrl: hanging.baseUrl, model: "m", ...extra });
  const a = child(`
    import { UserMemory } from "user-memory";
    import { fileStore } from "user-memory/node";
    const memory = await UserMemory.open({ storage: fileStore(${JSON.stringify(dir)}), autoProcess: false, llm: ${llmA} });
    await memory.observe("t1", [{ role: "user", content: "I sail on weekends" }, { role: "assistant", content: "Nice." }]);
    memory.flush().catch(() => {});
  `);
  if (extra === null) await a.line("llm");
  else await hanging.waitForRequests(1);
  a.p.kill("SIGKILL");
  const killedAt = Date.now();
  await a.exited;
  const b = child(`
    import { UserMemory } from "user-memory";
    import { fileStore } from "user-memory/node";
    const memory = await UserMemory.open({ storage: fileStore(${JSON.stringify(dir)}), autoProcess: false, llm: ${JSON.stringify({ baseUrl: answering.baseUrl, model: "m" })} });
    const report = await memory.flush();
    console.log("done " + JSON.stringify(report) + " " + (await memory.get()).facts.length);
    await memory.close();
  `);
  const done = await b.line("done");
  const waited = (Date.now() - killedAt) / 1000;
  await b.exited;
  await hanging.close();
  await answering.close();
  rmSync(dir, { recursive: true, force: true });
  return { name, waited, done };
}

const results = await Promise.all(names.map(run));
console.log("| case | flush() of another process after kill -9 |\n|---|--:|");
for (const r of results) console.log(`| ${r.name} | ${r.waited.toFixed(1)} s |`);
for (const r of results) if (!r.done.includes('"processed":["t1"]')) console.error(`${r.name}: unexpected ${r.done}`);
