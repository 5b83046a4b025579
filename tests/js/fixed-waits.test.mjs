// No fixed sleeps (setTimeout, sleep, Playwright's page.waitForTimeout): CI is a busy 2-core machine, where "wait 700 ms, then it will have
// happened" is how a good change turns red. Every timer in a test file is one of:
//   * a wait for something to happen: `eventually(condition)` (tests/helpers/wait.mjs), or a
//     poll written out as `while (!condition) await …setTimeout(r, ≤ 50)`, bounded only by the
//     test's timeout;
//   * a fixed wait that cannot be an event, with a `fixed wait:` comment on its line or the
//     three lines above saying why: an absence check (nothing may happen meanwhile, so a slow
//     machine can only make it pass, never fail), time the code under test measures (a
//     debounce, a backoff), a jitter that places a fault, or a hang detector that fails a
//     test that would otherwise hang.
// A bounded short poll (`for (let i = 0; i < 100 && !x; i++) await sleep(10)`) is neither: it
// gives up after a second, which a loaded machine exceeds. tests/helpers/ holds the waiting
// primitives and the scripted servers' latencies, and is not scanned.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { root } from "../helpers/pipeline.mjs";

const TESTS = join(root, "tests");

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== "helpers" && name !== "fixtures" && name !== "data") yield* files(path);
    } else if (/\.(mjs|js|ts|rs)$/.test(name)) yield path;
  }
}

/** The nearest line above `i` indented less than it: the block (a loop?) the line sits in. */
function enclosing(lines, i) {
  const indent = (l) => /^\s*/.exec(l)[0].length;
  for (let k = i - 1; k >= 0; k--) if (lines[k].trim() && indent(lines[k]) < indent(lines[i])) return lines[k];
  return "";
}

/**
 * The timer lines of `source` that are neither an annotated fixed wait nor an open-ended poll.
 * Rust (`rust`: the wasm tests' `sleep(ms).await`) polls in a `while`/`loop` block; a `for`
 * over a count is the bounded short poll.
 */
function unexplainedWaits(source, rust = false) {
  const lines = source.split("\n");
  const out = [];
  for (const [i, line] of lines.entries()) {
    if (!/\bsetTimeout\(|\bsleep\(|\.waitForTimeout\(/.test(line)) continue;
    if (/^\s*(\/\/|\*)/.test(line) || /\bfunction sleep\b|const sleep =|\bfn sleep\(/.test(line)) continue;
    const context = lines.slice(Math.max(0, i - 3), i + 1).join("\n");
    if (/fixed wait:/.test(context)) continue;
    const poll = rust
      ? /^\s*(while |loop \{)/.test(enclosing(lines, i))
      : /^\s*(while \(|\} while \()/.test(line) || /^\s*while \(/.test(lines[i - 1] ?? "");
    const shortPoll = /setTimeout\(\s*\w+\s*,\s*(\d+)\s*\)|sleep\((\d+)\)/.exec(line);
    const ms = shortPoll ? Number(shortPoll[1] ?? shortPoll[2]) : Infinity;
    const doLoop = /^\s*do \{/.test(lines[i - 1] ?? "") && /^\s*\} while \(/.test(lines[i + 2] ?? lines[i + 1] ?? "");
    if ((poll || doLoop) && ms <= 50) continue;
    out.push({ line: i + 1, text: line.trim() });
  }
  return out;
}

test("every timer in a test file waits for an event, polls open-ended, or says why it is fixed", () => {
  const found = [];
  for (const file of files(TESTS)) {
    if (file.endsWith("fixed-waits.test.mjs")) continue;
    for (const w of unexplainedWaits(readFileSync(file, "utf8"), file.endsWith(".rs")))
      found.push(`${relative(root, file)}:${w.line}: ${w.text}`);
  }
  assert.deepEqual(
    found,
    [],
    `fixed waits without a reason (use eventually(), or say "fixed wait: why"):\n${found.join("\n")}`,
  );
});

test("the scanner flags a fixed sleep and a bounded short poll (JS and Rust), and passes polls, eventually() and annotated waits", () => {
  const flagged = (src) => unexplainedWaits(src).length;
  assert.equal(flagged("  await new Promise((r) => setTimeout(r, 700));\n  await server.stop();"), 1);
  assert.equal(flagged("  await sleep(500);"), 1);
  assert.equal(flagged("  for (let i = 0; i < 100 && !x; i++) await sleep(10);"), 1);
  assert.equal(flagged("  while (!x) await new Promise((r) => setTimeout(r, 10));"), 1 - 1);
  assert.equal(flagged("  while (!x) await new Promise((r) => setTimeout(r, 500));"), 1, "a slow poll is a sleep");
  assert.equal(
    flagged("  do {\n    await new Promise((r) => setTimeout(r, 50));\n    doc = await get();\n  } while (!doc);"),
    0,
  );
  assert.equal(flagged("  await eventually(() => x);"), 0);
  assert.equal(flagged("  await page.waitForTimeout(300); // the answer settles"), 1, "Playwright's sleep is a sleep");
  const rust = (src) => unexplainedWaits(src, true).length;
  assert.equal(
    rust("    for _ in 0..100 {\n        if done() {\n            break;\n        }\n        sleep(10).await;\n    }"),
    1,
  );
  assert.equal(
    rust(
      "    while now() < deadline {\n        if done() {\n            return;\n        }\n        sleep(10).await;\n    }",
    ),
    0,
  );
  assert.equal(rust("    let b = start();\n    sleep(100).await;\n    assert!(b.follows());"), 1);
  assert.equal(flagged("  // fixed wait: an absence check\n  await sleep(50);\n  assert.equal(calls, 0);"), 0);
});
