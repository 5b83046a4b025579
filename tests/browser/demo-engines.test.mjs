// The demo's main flow in every engine (Chromium, Firefox, WebKit; tests/helpers/engines.mjs):
// a chat message typed and sent with Enter is answered through the demo server's proxy,
// queued, learned into facts and sections after the debounce, and the next prompt carries
// that memory; after a reload, and after a browser restart, the memory is still there.
// (tests/browser/demo.test.mjs checks the rest of the demo, in Chromium.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startServer } from "../../scripts/serve.mjs";
import { demoLlm, MIA } from "../helpers/demo-llm.mjs";
import { ENGINES, launch, skipReason } from "../helpers/engines.mjs";

const { script, extractionRequests, chatRequests, systemOf } = demoLlm;
const KEY = "sk-demo-engines-key";
let llm;
let demo;

before(async () => {
  llm = await demoLlm.start();
  demo = await startServer({
    port: 0,
    env: { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: KEY, MODEL: "scripted-model" },
  });
});

after(async () => {
  await demo?.close();
  await llm?.close();
});

/** Page-side: the texts of the elements matching `selector`. */
const texts = (selector) => [...document.querySelectorAll(selector)].map((el) => el.textContent);

async function openDemo(browser) {
  const page = await browser.newPage(`${demo.url}?debounce=1500`);
  await page.waitFor(() => document.body.dataset.ready === "true");
  // Uncaught errors of the page, recorded from here on.
  await page.evaluate(() => {
    window.__problems = [];
    addEventListener("error", (e) => window.__problems.push(String(e.message)));
    addEventListener("unhandledrejection", (e) => window.__problems.push(String(e.reason)));
  });
  return page;
}

async function send(page, message) {
  const answered = await page.evaluate(() => document.querySelectorAll(".msg-assistant:not(.pending)").length);
  await page.fill("#input", message);
  await page.press("#input", "Enter");
  await page.waitFor((n) => document.querySelectorAll(".msg-assistant:not(.pending)").length > n, answered);
}

const factsShown = (page) => page.evaluate(texts, "#facts-list .fact-text");

for (const engine of ENGINES) {
  describe(engine, { skip: skipReason(engine) }, () => {
    let browser;
    before(async () => {
      browser = await launch(engine);
    });
    after(() => browser?.close());

    test("a chat is answered, learned after the debounce, shown, and injected into the next prompt; memory survives a reload and a restart", async () => {
      let page = await openDemo(browser);
      const from = llm.requests.length;
      script.chats.push("Nice to meet you, Mia! Go on Kubernetes is a solid stack.");
      script.extractions.push(MIA);
      await send(
        page,
        "Hi! I'm Mia, a backend engineer at Acme. We write Go microservices on Kubernetes, and I'm learning Rust.",
      );
      const bubbles = await page.evaluate(texts, ".msg-assistant .bubble");
      assert.ok(
        bubbles.some((t) => t.includes("Nice to meet you, Mia!")),
        `the answer is shown: ${bubbles}`,
      );
      assert.ok(!systemOf(chatRequests(from)[0]).includes("<memory>"), "nothing to inject yet");

      // Queued, then learned: every fact of the delta appears in the memory pane.
      await page.waitFor(() => document.querySelector("#mem-status").dataset.state === "updated");
      const expected = MIA.json.newFacts.map((f) => f.content).sort();
      // The list is drawn after the status changes.
      await page.waitFor((n) => document.querySelectorAll("#facts-list .fact-text").length === n, expected.length);
      assert.deepEqual((await factsShown(page)).sort(), expected);
      assert.equal(extractionRequests(from).length, 1);
      assert.equal(
        extractionRequests(from)[0].headers.authorization,
        `Bearer ${KEY}`,
        "through the server's proxy, with its key",
      );

      // The next prompt carries the memory block.
      script.chats.push("Rust: you are learning it already. Keep Go for the services.");
      await send(page, "Which language should I pick for my next command-line tool?");
      const system = systemOf(chatRequests(from)[1]);
      assert.ok(system.includes("<memory>") && system.includes("Writes Go microservices on Kubernetes"), system);
      assert.ok(system.includes("Mia is a backend engineer at Acme"));

      await page.reload();
      await page.waitFor(() => document.body.dataset.ready === "true");
      await page.waitFor((n) => document.querySelectorAll("#facts-list .fact-text").length === n, expected.length);
      assert.deepEqual((await factsShown(page)).sort(), expected, "after a reload");

      await browser.restart();
      page = await openDemo(browser);
      await page.waitFor((n) => document.querySelectorAll("#facts-list .fact-text").length === n, expected.length);
      assert.deepEqual((await factsShown(page)).sort(), expected, "after a browser restart");
      assert.deepEqual(await page.evaluate(() => window.__problems), []);
      await page.close();
    });
  });
}
