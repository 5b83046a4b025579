// Wasm heap growth when the LLM endpoint answers with a huge body: a 50 MB reply, a gzip
// bomb (about 50 KB on the wire, 50 MB decoded) and a 50 MB error page, one fresh Node
// process each (wasm memory never shrinks, so each case starts from a fresh module).
//
//   node bench/bodies.mjs                 the built package (pkg/)
//   node bench/bodies.mjs /other/pkg      another build, e.g. of an older commit
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = resolve(process.argv[2] ?? join(root, "pkg"));
const MB = 1024 * 1024;
const cases = {
  "50 MB reply": `{ content: "a".repeat(50 * MB) }`,
  "gzip bomb (50 MB decoded)": `{ content: "a".repeat(50 * MB), gzip: true }`,
  "50 MB error page (HTTP 500)": `{ status: 500, body: "<html>" + "x".repeat(50 * MB), headers: { "content-type": "text/html" } }`,
};

if (process.argv[2] === "--case") {
  // Child: one case.
  const [, , , name, dir] = process.argv;
  const { UserMemory, initSync } = await import(pathToFileURL(join(dir, "node.js")));
  const { startLlmServer } = await import(pathToFileURL(join(root, "tests/helpers/llm-server.mjs")));
  const llm = await startLlmServer();
  const memory = await UserMemory.open({
    storage: "memory",
    debounceMs: 1e6,
    llm: { baseUrl: llm.baseUrl, model: "m", maxRetries: 0 },
  });
  llm.script.push(eval(`(${cases[name]})`));
  await memory.observe("t", [
    { role: "user", content: "hi" },
    { role: "assistant", content: "hello" },
  ]);
  const heap = () => initSync().memory.buffer.byteLength / MB;
  const before = heap();
  const t0 = performance.now();
  const outcome = await memory.flush().then(
    () => "ok",
    (e) => e.code,
  );
  const ms = performance.now() - t0;
  console.log(JSON.stringify({ before, after: heap(), outcome, ms }));
  await memory.close();
  await llm.close();
} else {
  console.log(`package: ${pkg}\n`);
  console.log("| body | outcome | wasm heap before → after | flush() |");
  console.log("|---|---|--:|--:|");
  for (const name of Object.keys(cases)) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--case", name, pkg], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(r.stderr);
    const { before, after, outcome, ms } = JSON.parse(r.stdout.trim().split("\n").pop());
    console.log(`| ${name} | ${outcome} | ${before.toFixed(1)} → ${after.toFixed(1)} MB | ${ms.toFixed(0)} ms |`);
  }
}
