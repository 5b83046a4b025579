// A skipped suite fails npm test unless docs/development.md says why: the reporter that
// scripts/test.mjs adds to every node:test step reports each skip with its reason, and the
// reasons that do not fail the run are read from the guide.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { allowedSkips } from "../../scripts/skip-reporter.mjs";
import { root, scratchDir } from "../helpers/pipeline.mjs";

test("the skip reporter names every skipped test and suite with its reason, and nothing else", () => {
  const dir = scratchDir("um-skips-");
  const file = join(dir, "sample.test.mjs");
  writeFileSync(
    file,
    `import { describe, test } from "node:test";
    test("runs", () => {});
    test("skips itself", (t) => t.skip("no Node 22 binary for this platform"));
    test("skipped by option", { skip: "firefox is not installed: no Firefox" }, () => {});
    test("not skipped", { skip: false }, () => {});
    describe("a suite", { skip: "webkit is not installed" }, () => { test("inside", () => {}); });`,
  );
  const log = join(dir, "skips.jsonl");
  execFileSync(
    process.execPath,
    [
      "--test",
      "--test-reporter=tap",
      "--test-reporter-destination=/dev/null",
      `--test-reporter=${join(root, "scripts/skip-reporter.mjs")}`,
      `--test-reporter-destination=${log}`,
      file,
    ],
    // Without the parent runner's NODE_TEST_CONTEXT, which would route the child's report to it.
    { cwd: dir, env: { ...process.env, NODE_TEST_CONTEXT: undefined } },
  );
  const skips = readFileSync(log, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    skips.map((s) => [s.name, s.reason, s.file]),
    [
      ["skips itself", "no Node 22 binary for this platform", "sample.test.mjs"],
      ["skipped by option", "firefox is not installed: no Firefox", "sample.test.mjs"],
      ["a suite", "webkit is not installed", "sample.test.mjs"],
    ],
  );
});

test("the reasons that do not fail npm test are the ones docs/development.md lists; a missing browser is not one", () => {
  const allowed = allowedSkips(readFileSync(join(root, "docs/development.md"), "utf8"));
  assert.deepEqual([...allowed].sort(), ["WebKitGTK has no navigator.storage", "no Node 22 binary for this platform"]);
  for (const missing of ["firefox is not installed: no Firefox", "no chromedriver", "(no reason given)"])
    assert.ok(!allowed.has(missing), missing);
  assert.deepEqual(
    [...allowedSkips("# Guide\n\n## Skipped tests\n\n* `a reason`: why\n* `another`\n\n## Next\n\n* `not this one`\n")],
    ["a reason", "another"],
  );
  assert.equal(allowedSkips("# Guide without the section\n").size, 0);
});
