// The fetch transport in every browser engine (Chromium, Firefox, WebKit;
// tests/helpers/engines.mjs), through the built package: a page on one origin calls a
// scripted LLM server on another (CORS), which answers with redirects, streams, or a huge
// body. In a browser `redirect: "manual"` hands back an opaque redirect whose target cannot
// be read, so no redirect is followed there at all — and the host it points to receives
// nothing, not even a CORS preflight.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { ENGINES, launch, skipReason } from "../helpers/engines.mjs";
import { factsReply, startLlmServer } from "../helpers/llm-server.mjs";
import { eventually } from "../helpers/wait.mjs";
import { staticHandler } from "../helpers/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const KEY = "sk-browser-test-0123456789";
let pages;
let llm;
let other;
let agents = 0;

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
  pages = {
    url: `http://127.0.0.1:${http.address().port}`,
    close: () => new Promise((resolve) => (http.closeAllConnections(), http.close(resolve))),
  };
  llm = await startLlmServer({ cors: true });
  other = await startLlmServer({ cors: true, fallback: () => factsReply("Planted by the other host") });
});

after(async () => {
  await pages?.close();
  await llm?.close();
  await other?.close();
});

/** Opens memory in a fresh page of `browser` against the scripted server; returns the page. */
async function openPage(browser, llmOptions = {}) {
  const page = await browser.newPage(`${pages.url}/`);
  await page.waitFor(() => window.ready === true);
  const llmOpts = {
    baseUrl: llm.baseUrl,
    apiKey: KEY,
    headers: { "api-key": KEY },
    model: "m",
    maxRetries: 2,
    ...llmOptions,
  };
  await page.evaluate(
    ([agent, llm]) => window.openMemory({ agent, storage: "memory", debounceMs: 600_000, llm }),
    [`b-${agents++}`, llmOpts],
  );
  return page;
}

/** observe + flush in the page: { ok } or { code, message, status }. */
const extract = (page, text) =>
  page.evaluate(async (text) => {
    window.memory.observe("t", [
      { role: "user", content: text },
      { role: "assistant", content: "Noted." },
    ]);
    try {
      await window.memory.flush();
      return { ok: true, facts: await window.storedFacts() };
    } catch (e) {
      return { code: e.code, message: e.message, status: e.status, facts: await window.storedFacts() };
    }
  }, text);

for (const engine of ENGINES) {
  describe(engine, { skip: skipReason(engine) }, () => {
    let browser;
    before(async () => {
      browser = await launch(engine);
    });
    after(() => browser?.close());

    for (const [status, provider] of [
      [307, "openai"],
      [302, "openai"],
      [307, "anthropic"],
    ]) {
      test(`${provider}: a ${status} to another origin is not followed; that origin receives nothing, not even a preflight`, async () => {
        llm.requests.length = 0;
        other.requests.length = 0;
        const page = await openPage(browser, { provider });
        const path = provider === "anthropic" ? "/v1/messages" : "/v1/chat/completions";
        llm.script.push({ status, headers: { location: `${other.origin}${path}` } });
        const r = await extract(page, "I live in Lisbon");
        assert.equal(r.code, "LLM_NETWORK", JSON.stringify(r));
        assert.match(r.message, /redirect, which was not followed/);
        assert.match(r.message, /llm\.baseUrl/);
        assert.ok(!r.message.includes(KEY));
        assert.deepEqual(r.facts, []);
        const posts = llm.requests.filter((q) => q.method === "POST");
        assert.equal(posts.length, 1, "a refused redirect is not retried");
        assert.equal(
          posts[0].headers.authorization ?? posts[0].headers["x-api-key"],
          provider === "anthropic" ? KEY : `Bearer ${KEY}`,
        );
        assert.deepEqual(
          other.requests.map((q) => q.method),
          [],
          "the other origin received no request",
        );
        await page.close();
      });
    }

    test("a same-origin 307 is not followed either (the browser hides its target); the message says so", async () => {
      llm.requests.length = 0;
      const page = await openPage(browser);
      llm.script.push({ status: 307, headers: { location: "/v1/chat/completions/" } }, factsReply("Lives in Lisbon"));
      const r = await extract(page, "I live in Lisbon");
      assert.equal(r.code, "LLM_NETWORK");
      assert.match(r.message, /does not show where it leads/);
      assert.equal(llm.requests.filter((q) => q.method === "POST").length, 1);
      llm.script.length = 0;
      await page.close();
    });

    test("the same page extracts normally when the endpoint answers directly (CORS, no redirect)", async () => {
      const page = await openPage(browser);
      llm.script.push(factsReply("Lives in Lisbon"));
      const r = await extract(page, "I live in Lisbon");
      assert.deepEqual(r, { ok: true, facts: ["Lives in Lisbon"] });
      await page.close();
    });

    test("a streamed reply (server-sent events over CORS) is read as it arrives and reading stops once the delta is complete", async () => {
      llm.requests.length = 0;
      const page = await openPage(browser, { stream: true });
      // A minute of tail (3000 pieces 20 ms apart): at 1 ms apart a loaded machine (load 18,
      // Firefox) let the server send all of it before the page's hang-up arrived.
      const tail = Array.from({ length: 3000 }, () => "\n ");
      llm.script.push({
        ...factsReply("Lives in Lisbon"),
        tail,
        pieceDelayMs: 20,
        usage: { prompt_tokens: 10, completion_tokens: 20 },
      });
      const r = await extract(page, "I live in Lisbon");
      assert.deepEqual(r, { ok: true, facts: ["Lives in Lisbon"] });
      const post = llm.requests.find((q) => q.method === "POST");
      assert.equal(post.body.stream, true);
      await eventually(() => post.clientClosed, "the page to hang up");
      assert.ok(post.clientClosed && post.piecesSent < tail.length, `${post.piecesSent} pieces sent`);
      await page.close();
    });

    test("a 20 MB reply stops at llm.maxResponseBytes", async () => {
      const page = await openPage(browser, { stream: false, maxRetries: 0 });
      llm.script.push({ content: "a".repeat(20 * 1024 * 1024), stream: false });
      const r = await extract(page, "I live in Lisbon");
      assert.equal(r.code, "LLM_BAD_OUTPUT");
      assert.match(r.message, /llm\.maxResponseBytes/);
      await page.close();
    });
  });
}
