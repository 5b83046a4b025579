// Helpers for the pipeline tests (tests/js/llm-*.test.mjs, tests/js/queue-*.test.mjs):
// conversations, an event recorder, a recording storage adapter, a port nobody listens on,
// a child Node process running a snippet against the built package, a test with a timeout,
// and the scripted LLM server of a test file.
import { spawn } from "node:child_process";
import { after, before, test as nodeTest } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UserMemory } from "user-memory";
import { startLlmServer } from "./llm-server.mjs";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** `node:test`'s test with a timeout: every test fails (rather than hangs) if what it
 * waits for never happens. */
export const test = (name, fn) => nodeTest(name, { timeout: 60_000 }, fn);

/**
 * The test file's scripted OpenAI-compatible server (tests/helpers/llm-server.mjs): started
 * before the first test, closed (with every instance `openMemory` opened) after the last.
 * The returned object gets the server's fields (`baseUrl`, `script`, `requests`, …) once it
 * has started, and `reset()` clears the script and the request log.
 */
export function useLlmServer() {
  const llm = {
    reset() {
      llm.script.length = 0;
      llm.requests.length = 0;
    },
  };
  before(async () => Object.assign(llm, await startLlmServer()));
  after(async () => {
    await closeAll();
    await llm.close?.();
  });
  return llm;
}

/** One user turn and its answer, OpenAI style. */
export function turn(user, assistant = "Noted.") {
  return [
    { role: "user", content: user },
    { role: "assistant", content: assistant },
  ];
}

const opened = new Set();

/**
 * `UserMemory.open(options)`, remembered so that `closeAll()` (in an `after` hook) closes
 * whatever a failed test left open: an open instance's timer would keep the test file's
 * process alive.
 */
export async function openMemory(options) {
  const memory = await UserMemory.open(options);
  opened.add(memory);
  return memory;
}

/** Closes every instance opened with `openMemory()` (errors ignored). */
export async function closeAll() {
  for (const memory of opened) await memory.close().catch(() => {});
  opened.clear();
}

const scratch = [];
after(async () => {
  if (scratch.length === 0) return;
  await closeAll();
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});
/**
 * A fresh folder under the system's temporary directory, removed after the test file's last
 * test, once every instance `openMemory` opened is closed (a file store must not lose its
 * folder while an instance still writes to it).
 */
export function scratchDir(prefix = "um-") {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

let agents = 0;
/** A fresh agent name, so tests sharing `storage: "memory"` in one process do not meet. */
export function freshAgent(prefix = "t") {
  return `${prefix}-${process.pid}-${++agents}`;
}

/** Records every event of an instance; `next(name)` resolves with the next one of a kind. */
export function record(memory, names = ["update", "error", "queued"]) {
  const events = [];
  const waiting = [];
  for (const name of names) {
    memory.on(name, (e) => {
      events.push(e);
      for (const w of [...waiting]) {
        if (w.name === name && w.pred(e)) {
          waiting.splice(waiting.indexOf(w), 1);
          w.resolve(e);
        }
      }
    });
  }
  return {
    events,
    of: (name) => events.filter((e) => e.type === name),
    codes: () => events.filter((e) => e.type === "error").map((e) => e.code),
    /** The next event `name` (from now on) for which `pred` holds. */
    next: (name, pred = () => true) => new Promise((resolve) => waiting.push({ name, pred, resolve })),
  };
}

/** A storage adapter over a Map, keeping every value ever written (to search for secrets). */
export function recordingAdapter() {
  const map = new Map();
  const written = [];
  return {
    map,
    written,
    name: "recording",
    get: async (k) => (map.has(k) ? map.get(k) : null),
    set: async (k, v) => {
      written.push([k, v]);
      map.set(k, v);
    },
    delete: async (k) => void map.delete(k),
    keys: async (prefix) => [...map.keys()].filter((k) => k.startsWith(prefix)),
  };
}

/** A 127.0.0.1 port with nothing listening on it (bound, then closed). */
export async function deadPort() {
  const s = createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

export { eventually, sleep } from "./wait.mjs";

/**
 * Runs `code` (an ES module importing "user-memory") in a child Node process with `args`
 * (extra node flags) and `env`. Resolves with { code, signal, stdout, stderr, lines } where
 * `lines` are the stdout lines with the time (Date.now()) each arrived at the parent.
 * `killAfterMs` kills a child that is still running then (so a hung child fails the test
 * instead of hanging it). With `go` (a promise), the child gets an IPC channel and the
 * message "go" once `go` resolves; the child waits for it with
 * `await new Promise((r) => process.once("message", r)); process.disconnect();`
 * (disconnecting, so the channel itself keeps nothing alive). `cwd` (default: the repository)
 * is where its imports resolve, e.g. a consumer project.
 */
export function runChild(code, { args = [], env = {}, killAfterMs = 120_000, go, cwd = root } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...args, "--input-type=module", "-e", code], {
      cwd,
      env: { ...process.env, ...env },
      stdio: go ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
    });
    if (go) go.then(() => child.connected && child.send("go"));
    let stdout = "";
    let stderr = "";
    const lines = [];
    let partial = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      partial += chunk;
      let i;
      while ((i = partial.indexOf("\n")) >= 0) {
        lines.push({ text: partial.slice(0, i), at: Date.now() });
        partial = partial.slice(i + 1);
      }
    });
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const killer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
    child.on("close", (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, lines, exitedAt: Date.now() });
    });
  });
}
