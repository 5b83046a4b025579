// Every static method of `UserMemory` works as the first call of a page, in each engine: the
// browser entry (js/browser.js) loads the wasm lazily, so a static that did not wait for it
// would throw `TypeError: Cannot read properties of undefined` (as encrypt() did when the entry
// wrapped a hand-kept list). The statics are read from the class, so one added in Rust without
// an entry in CALLS fails the first test here.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { ENGINES, launch, skipReason } from "../helpers/engines.mjs";
import { staticHandler } from "../helpers/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** Each static's options, for a fresh agent (no LLM is ever called). */
const CALLS = {
  open: (agent) => ({
    agent,
    storage: "indexeddb",
    llm: { baseUrl: "http://127.0.0.1:9/v1", apiKey: "test", model: "unused", maxRetries: 0 },
  }),
  inspect: (agent) => ({ agent, storage: "indexeddb" }),
  encrypt: (agent) => ({ agent, storage: "indexeddb", encryption: { passphrase: "the first call of the page" } }),
  reset: (agent) => ({ agent, storage: "indexeddb" }),
};

let server;
let seq = 0;

before(async () => {
  const serveFile = staticHandler([
    ["/pkg/", join(ROOT, "pkg")],
    ["/", join(ROOT, "tests/browser/pages")],
  ]);
  const http = createServer((req, res) => {
    if (!serveFile(req, res)) {
      res.writeHead(404);
      res.end("not found");
    }
  });
  await new Promise((resolve) => http.listen(0, "127.0.0.1", resolve));
  server = {
    url: `http://127.0.0.1:${http.address().port}/`,
    close: () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(resolve);
      }),
  };
});

after(() => server?.close());

for (const engine of ENGINES)
  describe(engine, { skip: skipReason(engine) }, () => {
    let browser;
    before(async () => {
      browser = await launch(engine);
    });
    after(() => browser?.close());

    /** A new window on index.html, which imports the package but calls nothing. */
    async function freshPage() {
      const page = await browser.newPage(server.url);
      await page.waitFor(() => window.ready === true);
      return page;
    }

    test("the statics found on the class are the ones this test calls", async () => {
      const page = await freshPage();
      const found = await page.evaluate(() =>
        Object.getOwnPropertyNames(window.UserMemory)
          .filter((n) => typeof window.UserMemory[n] === "function" && !n.startsWith("__"))
          .sort(),
      );
      assert.deepEqual(found, Object.keys(CALLS).sort(), "a new static needs its options in CALLS");
      await page.close();
    });

    for (const [name, options] of Object.entries(CALLS))
      test(`UserMemory.${name}() as the page's first call waits for the wasm and succeeds`, async () => {
        const page = await freshPage();
        const outcome = await page.evaluate(
          ([name, options]) =>
            window.UserMemory[name](options).then(
              async (r) => {
                if (typeof r?.close === "function") await r.close();
                return "resolved";
              },
              (e) => `${e?.name}: ${e?.code ?? ""} ${e?.message}`,
            ),
          [name, options(`statics-${name}-${process.pid}-${seq++}`)],
        );
        assert.equal(outcome, "resolved");
        await page.close();
      });
  });
