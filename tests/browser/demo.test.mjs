// The demo page (www/, served by scripts/serve.mjs) end to end in Debian's Chromium:
// chat through the server's proxy to a scripted OpenAI-protocol LLM, memory learned after
// the debounce and shown live, the block injected into the next prompt, the editing
// tools, storage, and safety (memory content is text, never HTML).
//
// Screenshots of the main states go to tests/artifacts/demo/. With UPDATE_DEMO_SCREENSHOT=1
// the first test also rewrites docs/demo.png (the README's picture).
import { before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServer } from "../../scripts/serve.mjs";
import { chromiumTest as test, launchBrowser } from "../helpers/browser.mjs";
import { demoLlm, MIA } from "../helpers/demo-llm.mjs";
import { ROOT } from "../helpers/pack.mjs";

const ARTIFACTS = join(ROOT, "tests/artifacts/demo");
const KEY = "sk-demo-test-key-42";
const MODEL = "scripted-model";
// Every wait below is for a condition or an event; T only bounds it, so a page that never gets
// there fails with the selector it waited for instead of hanging the suite (a hang detector:
// a busy machine makes the page slower, never a correct page fail within it).
const T = 60_000;
mkdirSync(ARTIFACTS, { recursive: true });

const { script, extractionRequests, chatRequests, systemOf } = demoLlm;
let llm;
let demo; // configured
let bare; // no endpoint

before(async () => {
  llm = await demoLlm.start();
  demo = await startServer({ port: 0, env: { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: KEY, MODEL } });
  bare = await startServer({ port: 0, env: {} });
});

after(async () => {
  await demo?.close();
  await bare?.close();
  await llm?.close();
});

// ---- page helpers ---------------------------------------------------------------------

/**
 * Waits until the page is at rest: every running animation and transition has finished
 * (`document.getAnimations()`, after a style recalculation so a just-started transition is
 * listed) and two frames have been drawn since.
 */
async function settled(page) {
  await page.evaluate(async () => {
    getComputedStyle(document.body).color; // starts pending transitions
    await Promise.all(document.getAnimations().map((a) => a.finished.catch(() => {})));
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  });
}

/** A fresh browser profile; `fn(ctx)` runs with it and it is always closed. */
async function withBrowser(fn) {
  const { context, close } = await launchBrowser();
  script.chats.length = 0;
  script.extractions.length = 0;
  try {
    return await fn(context);
  } finally {
    await close();
  }
}

/**
 * Opens the demo. Every native dialog (alert, confirm …) is recorded and dismissed: the page
 * never uses one, so any dialog means injected code ran. Uncaught page errors are recorded.
 */
async function openDemo(
  context,
  { server = demo, query = "debounce=400", viewport = { width: 1440, height: 960 } } = {},
) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  const problems = { dialogs: [], errors: [] };
  page.on("dialog", (d) => {
    problems.dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  page.on("pageerror", (e) => problems.errors.push(e.message));
  await page.goto(`${server.url}?${query}`);
  await page.waitForSelector("body[data-ready=true]", { timeout: T });
  return { page, problems };
}

async function reload(page) {
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: T });
}

const text = (page, selector) => page.locator(selector).innerText();
const factTexts = (page) => page.locator("#facts-list .fact-text").allInnerTexts();

/** Waits until the element's text contains `needle`. */
async function waitForText(page, selector, needle) {
  await page.waitForFunction(
    ([s, n]) => [...document.querySelectorAll(s)].some((el) => el.textContent.includes(n)),
    [selector, needle],
    { timeout: T },
  );
}

async function waitForState(page, state) {
  await page.waitForSelector(`#mem-status[data-state="${state}"]`, { timeout: T });
}

async function send(page, message) {
  const before = await page.locator(".msg-assistant:not(.pending), .msg-error").count();
  await page.locator("#input").fill(message);
  await page.locator("#input").press("Enter");
  await page.waitForFunction(
    (n) => document.querySelectorAll(".msg-assistant:not(.pending), .msg-error").length > n,
    before,
    { timeout: T },
  );
}

async function addFact(page, content, { category, confidence } = {}) {
  await page.getByRole("button", { name: "Add fact" }).click();
  await page.getByLabel("Fact", { exact: true }).fill(content);
  if (category) await page.getByLabel("Category").selectOption(category);
  if (confidence !== undefined) await page.getByLabel("Confidence").fill(String(confidence));
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await waitForText(page, "#facts-list .fact-text", content);
}

/** The stored document, read through the page's own instance (`window.memory`). */
const stored = (page) => page.evaluate(() => globalThis.memory.get());

async function shot(page, name, opts = {}) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), ...opts });
}

function memoryDoc(overrides = {}) {
  const section = (summary = "") => ({ summary, updatedAt: summary ? "2026-03-14T10:30:00.000000Z" : "" });
  return {
    version: "1.0",
    lastUpdated: "2026-03-14T10:30:00.000000Z",
    user: { workContext: section(), personalContext: section(), topOfMind: section() },
    history: { recentMonths: section(), earlierContext: section(), longTermBackground: section() },
    facts: [],
    ...overrides,
  };
}

/** Closes both tabs of a two-tab test, asserting that neither saw a dialog or a page error. */
async function closeBoth(a, b) {
  assert.deepEqual(
    [a.problems, b.problems],
    [
      { dialogs: [], errors: [] },
      { dialogs: [], errors: [] },
    ],
  );
  await a.page.close();
  await b.page.close();
}

// ---- tests ----------------------------------------------------------------------------

test("a chat is answered, queued with a running countdown, learned into sections and facts, and the next prompt carries that memory", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=2500" });
    await shot(page, "01-empty");
    const from = llm.requests.length;
    // Record every status the page shows, so the countdown can be checked afterwards.
    await page.evaluate(() => {
      globalThis.__seen = [];
      const box = document.getElementById("mem-status");
      const note = () =>
        globalThis.__seen.push({
          state: box.dataset.state,
          detail: document.getElementById("status-detail").textContent,
        });
      new MutationObserver(note).observe(box, {
        attributes: true,
        subtree: true,
        childList: true,
        characterData: true,
      });
    });

    script.chats.push(
      "Nice to meet you, Mia! Go on Kubernetes is a solid stack. For a CLI, Rust with `clap` is a great way to practise.",
    );
    script.extractions.push(MIA);
    await send(
      page,
      "Hi! I'm Mia, a backend engineer at Acme. We write Go microservices on Kubernetes, and I'm learning Rust in the evenings.",
    );
    await waitForText(page, ".msg-assistant .bubble", "Nice to meet you, Mia!");
    await waitForState(page, "queued");
    await shot(page, "02-answered-and-queued");

    // The first call had no memory to inject; it went through the proxy with the server's key.
    const [firstChat] = chatRequests(from);
    assert.ok(firstChat, "the chat call reached the LLM");
    assert.ok(!systemOf(firstChat).includes("<memory>"), "nothing to inject yet");
    assert.equal(firstChat.headers.authorization, `Bearer ${KEY}`);
    assert.equal(firstChat.body.model, MODEL);
    assert.equal(firstChat.body.messages.at(-1).content.slice(0, 11), "Hi! I'm Mia");

    await waitForState(page, "updated");
    const seen = await page.evaluate(() => globalThis.__seen);
    const states = seen.map((s) => s.state);
    assert.ok(
      states.indexOf("queued") >= 0 && states.lastIndexOf("updated") > states.indexOf("queued"),
      `queued then updated: ${states.join(",")}`,
    );
    const counts = seen
      .filter((s) => s.state === "queued")
      .map((s) => /in (\d+(?:\.\d)?) s$/.exec(s.detail)?.[1])
      .filter(Boolean)
      .map(Number);
    assert.ok(new Set(counts).size >= 2, `the countdown changed while queued: ${counts.join(", ")}`);
    assert.ok(counts[0] > counts.at(-1), `the countdown went down: ${counts.join(", ")}`);

    // The extraction went through the same proxy, with the conversation.
    const [extraction] = extractionRequests(from);
    assert.ok(extraction, "one extraction call");
    assert.equal(extraction.headers.authorization, `Bearer ${KEY}`);
    assert.equal(extraction.body.model, MODEL);
    assert.ok(extraction.body.messages.at(-1).content.includes("Go microservices on Kubernetes"));

    // The memory pane shows what was learned.
    for (const f of MIA.json.newFacts) await waitForText(page, "#facts-list .fact-text", f.content);
    assert.match(await text(page, '[data-section="workContext"]'), /Mia is a backend engineer at Acme/);
    assert.match(await text(page, '[data-section="workContext"]'), /updated (just now|\d+ s ago)/);
    assert.match(await text(page, '[data-section="earlierContext"]'), /Empty/);
    assert.match(await text(page, "#status-detail"), /Updated .*\+4 facts, 4 sections/);

    // Typing the next message re-ranks the facts and previews the block for that prompt.
    await page.locator("#input").fill("Which language should I pick for my next command-line tool, Rust or Go?");
    await waitForText(page, "#preview-note", "your draft");
    const preview = await text(page, "#preview-block");
    assert.match(preview, /^<memory>/);
    assert.ok(preview.includes("Mia is a backend engineer at Acme"));
    assert.match(preview, /\[knowledge \| 0\.90 \| \d{4}-\d{2}-\d{2}\] Writes Go microservices on Kubernetes/);
    assert.match(await text(page, "#preview-tokens"), /^\d+ tokens \/ 2000$/);
    const rows = await page.locator("#facts-list .fact").allInnerTexts();
    assert.equal(rows.length, 4);
    for (const r of rows) assert.match(r, /score\s*\d\.\d\d/);
    assert.ok(
      rows.every((r) => r.includes("In prompt")),
      "all four facts fit the budget",
    );
    await shot(page, "03-learned-with-draft");

    script.chats.push("Rust: you are learning it already, and `clap` makes a CLI easy. Keep Go for the services.");
    await page.locator("#input").press("Enter");
    await waitForText(page, ".msg-assistant .bubble", "Keep Go for the services");
    const second = chatRequests(from)[1];
    const system = systemOf(second);
    assert.ok(
      system.includes("<memory>") && system.includes("</memory>"),
      "the second prompt carries the memory block",
    );
    assert.ok(system.includes("Writes Go microservices on Kubernetes"));
    assert.ok(system.includes("Work: Mia is a backend engineer at Acme"));
    assert.match(
      await page.locator(".msg-assistant .msg-memory summary").last().innerText(),
      /^Memory: 4 facts · \d+ tokens$/,
    );
    assert.equal(await page.locator(".msg-assistant .msg-meta").first().innerText(), "No memory in this prompt");
    await page.locator(".msg-assistant .msg-memory summary").last().click();
    await shot(page, "04-second-answer-with-memory");
    await page.emulateMedia({ colorScheme: "dark" });
    await settled(page); // the colour transitions end before the picture
    await shot(page, "04-dark");
    await page.emulateMedia({ colorScheme: "light" });
    if (process.env.UPDATE_DEMO_SCREENSHOT) {
      mkdirSync(join(ROOT, "docs"), { recursive: true });
      await page.locator(".msg-assistant .msg-memory summary").last().click(); // fold it again for the picture
      await page.locator("#input").fill("And for the config file format?");
      await waitForText(page, "#preview-note", "your draft");
      await page.mouse.move(0, 0);
      await page.screenshot({ path: join(ROOT, "docs/demo.png") });
    }
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("memory and the chat survive a reload, and the storage choice (IndexedDB or localStorage) is remembered", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    assert.equal(await page.locator("body").getAttribute("data-storage"), "indexeddb", "IndexedDB is the default");
    assert.equal(await page.locator("#notices").innerText(), "", "no fallback notice");
    await addFact(page, "Prefers tea over coffee", { category: "preference" });
    script.chats.push("Noted: tea it is.");
    await send(page, "Remember that I like tea.");

    await reload(page);
    assert.deepEqual(await factTexts(page), ["Prefers tea over coffee"]);
    await waitForText(page, ".msg-assistant .bubble", "Noted: tea it is.");
    assert.match(await text(page, "#storage-name"), /IndexedDB/);

    // localStorage is a separate store; the choice survives a reload.
    await page.getByLabel("Storage", { exact: true }).selectOption("localstorage");
    await page.waitForSelector('body[data-storage="localstorage"]', { timeout: T });
    await page.waitForSelector("#facts-list .empty-state", { timeout: T });
    await addFact(page, "Keeps notes in Obsidian");
    await reload(page);
    assert.equal(await page.locator("body").getAttribute("data-storage"), "localstorage");
    assert.equal(await page.getByLabel("Storage", { exact: true }).inputValue(), "localstorage");
    assert.deepEqual(await factTexts(page), ["Keeps notes in Obsidian"]);
    await shot(page, "05-localstorage-after-reload");

    await page.getByLabel("Storage", { exact: true }).selectOption("indexeddb");
    await page.waitForSelector('body[data-storage="indexeddb"]', { timeout: T });
    await waitForText(page, "#facts-list .fact-text", "Prefers tea over coffee");
    assert.deepEqual(await factTexts(page), ["Prefers tea over coffee"]);
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a storage choice given in the URL wins and is kept in the URL when changed", async () => {
  await withBrowser(async (context) => {
    const { page } = await openDemo(context, { query: "debounce=400&storage=localstorage" });
    assert.equal(await page.locator("body").getAttribute("data-storage"), "localstorage");
    await page.getByLabel("Storage", { exact: true }).selectOption("memory");
    await page.waitForSelector('body[data-storage="memory"]', { timeout: T });
    assert.match(page.url(), /[?&]storage=memory/);
    assert.match(page.url(), /[?&]debounce=400/);
  });
});

test("facts can be added, edited and deleted (with undo), and sections edited, all from the keyboard", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);

    // Add: the button, then the form, submitted with Enter.
    await page.getByRole("button", { name: "Add fact" }).focus();
    await page.keyboard.press("Enter");
    await page.keyboard.type("Lives in Lisbon");
    await page.getByLabel("Category").selectOption("context");
    await page.getByLabel("Confidence").fill("0.8");
    await page.getByLabel("Fact", { exact: true }).press("Enter");
    await waitForText(page, "#facts-list .fact-text", "Lives in Lisbon");
    let row = page.locator("#facts-list .fact", { hasText: "Lives in Lisbon" });
    assert.match(await row.innerText(), /context[\s\S]*conf 0\.80/i);
    assert.match(await row.innerText(), /added by hand/);
    assert.equal((await stored(page)).facts[0].source, "manual");

    // Edit: Enter on the edit button, change, Enter saves.
    await page.getByRole("button", { name: "Edit fact: Lives in Lisbon" }).focus();
    await page.keyboard.press("Enter");
    const box = page.getByRole("textbox", { name: "Fact", exact: true });
    await box.fill("Lives in Porto");
    await page.locator("form.editing").getByLabel("Category").selectOption("preference");
    await box.press("Enter");
    await waitForText(page, "#facts-list .fact-text", "Lives in Porto");
    const doc = await stored(page);
    assert.deepEqual(
      doc.facts.map((f) => [f.content, f.category, f.confidence]),
      [["Lives in Porto", "preference", 0.8]],
    );

    // Escape cancels an edit without saving.
    await page.getByRole("button", { name: "Edit fact: Lives in Porto" }).click();
    await page.getByRole("textbox", { name: "Fact", exact: true }).fill("Lives on the Moon");
    await page.keyboard.press("Escape");
    await page.waitForSelector("form.editing", { state: "detached", timeout: T });
    assert.deepEqual(await factTexts(page), ["Lives in Porto"]);
    assert.equal((await stored(page)).facts[0].content, "Lives in Porto");

    // Delete, then undo from the toast.
    await addFact(page, "Has a cat called Miso");
    await page.getByRole("button", { name: "Delete fact: Lives in Porto" }).click();
    await page.locator("#facts-list .fact", { hasText: "Lives in Porto" }).waitFor({ state: "detached", timeout: T });
    assert.deepEqual(
      (await stored(page)).facts.map((f) => f.content),
      ["Has a cat called Miso"],
    );
    const focused = await page.evaluate(() => document.activeElement?.getAttribute("aria-label"));
    assert.equal(focused, "Delete fact: Has a cat called Miso", "focus moves to the next fact");
    await page.locator(".toast").getByRole("button", { name: "Undo" }).click();
    await waitForText(page, "#facts-list .fact-text", "Lives in Porto");
    assert.deepEqual((await stored(page)).facts.map((f) => f.content).sort(), [
      "Has a cat called Miso",
      "Lives in Porto",
    ]);

    // Sections: edit Work, Enter saves through updateSection().
    await page.getByRole("button", { name: "Edit section Work" }).click();
    await page
      .getByRole("textbox", { name: "Work summary" })
      .fill("Staff engineer at Initech, owns the payments platform.");
    await page.getByRole("textbox", { name: "Work summary" }).press("Enter");
    await waitForText(page, '[data-section="workContext"] .section-text', "Staff engineer at Initech");
    assert.match(await text(page, '[data-section="workContext"]'), /updated (just now|\d+ s ago)/);
    const work = (await stored(page)).user.workContext;
    assert.equal(work.summary, "Staff engineer at Initech, owns the payments platform.");
    assert.match(work.updatedAt, /Z$/);
    assert.match(await text(page, "#preview-block"), /Work: Staff engineer at Initech/);
    await shot(page, "06-edited");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a confidence outside 0..1 is refused with the CLI's message, never clamped; two decimals are kept", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    const why = (input) => input.evaluate((el) => el.validationMessage);
    const focusedLabel = () =>
      page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.id);

    // Add: 2 and -0.1 are refused on the field (the form stays open, focus on the field).
    await page.getByRole("button", { name: "Add fact" }).click();
    const fact = page.getByLabel("Fact", { exact: true });
    const conf = page.locator("#new-fact-confidence");
    await fact.fill("Speaks Dutch");
    for (const bad of ["2", "-0.1"]) {
      await conf.fill(bad);
      await fact.press("Enter");
      assert.equal(await why(conf), `Confidence must be a number from 0 to 1 (e.g. 0.8), got ${bad}.`);
      assert.equal(await focusedLabel(), "new-fact-confidence", "the browser points at the refused field");
      assert.equal(await page.locator("#add-fact-form").isVisible(), true, "the form stays open");
    }
    // 0.93 (not on the old 0.05 grid) is taken as typed. The refused submits stored nothing:
    // edits run in order, so a clamped "2" would be here before it.
    await conf.fill("0.93");
    await fact.press("Enter");
    await waitForText(page, "#facts-list .fact-text", "Speaks Dutch");
    assert.deepEqual(
      (await stored(page)).facts.map((f) => [f.content, f.confidence]),
      [["Speaks Dutch", 0.93]],
    );

    // Edit: 1.5 is refused and the editor stays; 0.5 saves.
    await page.getByRole("button", { name: "Edit fact: Speaks Dutch" }).click();
    const editConf = page.locator("form.editing").getByLabel("Confidence");
    await editConf.fill("1.5");
    await page.getByRole("textbox", { name: "Fact", exact: true }).press("Enter");
    assert.equal(await why(editConf), "Confidence must be a number from 0 to 1 (e.g. 0.8), got 1.5.");
    assert.equal(await page.locator("form.editing").count(), 1, "the editor stays open");
    await editConf.fill("0.5");
    await page.getByRole("textbox", { name: "Fact", exact: true }).press("Enter");
    await page.waitForSelector("form.editing", { state: "detached", timeout: T });
    assert.deepEqual(
      (await stored(page)).facts.map((f) => [f.content, f.confidence]),
      [["Speaks Dutch", 0.5]],
    );
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("the Changes list shows what changed and why; Undo and Revert restore exactly; Forget keeps the fact from being learned again", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    await addFact(page, "Lives in Lisbon");
    await addFact(page, "Allergic to penicillin");
    const changes = page.locator("#history-list .change");
    await page.waitForFunction(() => document.querySelectorAll("#history-list .change").length === 2, null, {
      timeout: T,
    });
    assert.match(await changes.first().innerText(), /Fact added[\s\S]*\+ Allergic to penicillin/);
    const before = await stored(page);

    // Undo the newest change from the list, then revert to before the first.
    await page.getByRole("button", { name: "Undo the last change" }).click();
    await page
      .locator("#facts-list .fact", { hasText: "Allergic to penicillin" })
      .waitFor({ state: "detached", timeout: T });
    assert.match(await changes.first().innerText(), /Reverted to revision/);
    await page.getByRole("button", { name: "Undo the last change" }).click();
    await waitForText(page, "#facts-list .fact-text", "Allergic to penicillin");
    assert.deepEqual(
      (await stored(page)).facts,
      before.facts,
      "undoing the undo restores the facts exactly (ids, dates)",
    );

    // Forget: deleted, and the next extraction that proposes it again does not store it.
    await page.getByRole("button", { name: "Forget fact: Allergic to penicillin" }).click();
    await page
      .locator("#facts-list .fact", { hasText: "Allergic to penicillin" })
      .waitFor({ state: "detached", timeout: T });
    assert.match(await text(page, ".toast"), /will not be learned again/);
    assert.match(await changes.first().innerText(), /Fact deleted[\s\S]*forgotten for good/);
    assert.equal((await page.evaluate(() => globalThis.memory.forgotten())).length, 1);
    script.chats.push("Noted, no penicillin.");
    script.extractions.push({
      json: {
        newFacts: [{ content: "Is allergic to penicillin", category: "context", confidence: 0.95 }],
        factsToRemove: [],
      },
    });
    await send(page, "Remember that I'm allergic to penicillin.");
    await waitForText(page, ".msg-assistant .bubble", "Noted, no penicillin.");
    await page.evaluate(() => globalThis.memory.flush());
    assert.deepEqual(
      (await stored(page)).facts.map((f) => f.content),
      ["Lives in Lisbon"],
      "the forgotten fact was not learned again",
    );
    await shot(page, "06b-changes");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("the encryption switch encrypts stored memory with a passphrase; after a reload the passphrase unlocks it, a wrong one is refused", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    await addFact(page, "Allergic to penicillin");
    await page.getByRole("checkbox", { name: "Encrypt with a passphrase" }).check();
    await page.getByRole("textbox", { name: "Passphrase" }).fill("demo passphrase");
    await page.getByRole("button", { name: "Unlock / encrypt" }).click();
    await page.waitForFunction(() => globalThis.memory?.options().encryption === true, null, { timeout: T });
    await waitForText(page, "#facts-list .fact-text", "Allergic to penicillin");
    assert.match(await text(page, "#encryption-note"), /Encrypted/);
    const raw = await page.evaluate(async () =>
      JSON.stringify(
        await (await import("/pkg/browser.js")).UserMemory.inspect({ agent: "default", storage: "indexeddb" }),
      ),
    );
    assert.match(raw, /umenc2:/);
    assert.ok(!raw.includes("penicillin") && !raw.includes("demo passphrase"), "IndexedDB holds only ciphertext");

    await reload(page);
    await waitForText(page, ".notice", "locked with a passphrase");
    await page.getByRole("textbox", { name: "Passphrase" }).fill("not the passphrase");
    await page.getByRole("button", { name: "Unlock / encrypt" }).click();
    await waitForText(page, ".toast", "Wrong passphrase");
    await page.getByRole("textbox", { name: "Passphrase" }).fill("demo passphrase");
    await page.getByRole("button", { name: "Unlock / encrypt" }).click();
    await waitForText(page, "#facts-list .fact-text", "Allergic to penicillin");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("export downloads memory.json; import replaces memory keeping unknown fields; a file that is not memory is rejected and changes nothing", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    await addFact(page, "Runs marathons");

    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: T }),
      page.getByRole("button", { name: "Export memory.json" }).click(),
    ]);
    assert.equal(download.suggestedFilename(), "memory.json");
    const exported = JSON.parse(readFileSync(await download.path(), "utf8"));
    assert.equal(exported.version, "1.0");
    assert.deepEqual(
      exported.facts.map((f) => f.content),
      ["Runs marathons"],
    );
    assert.ok(exported.user && exported.history);

    const deerflow = memoryDoc({
      user: {
        workContext: {
          summary: "Data scientist at Globex.",
          updatedAt: "2026-03-14T10:30:00.000000Z",
          mood: "curious",
        },
        personalContext: { summary: "", updatedAt: "" },
        topOfMind: { summary: "", updatedAt: "" },
      },
      facts: [
        {
          id: "fact_3f9a1c2e",
          content: "Uses pandas daily",
          category: "knowledge",
          confidence: 0.9,
          createdAt: "2026-03-14T10:30:00.000000Z",
          source: "thread-42",
          tags: ["python"],
        },
      ],
      agentNotes: { kept: true },
    });
    await page.locator("#import-file").setInputFiles({
      name: "memory.json",
      mimeType: "application/json",
      buffer: Buffer.from(JSON.stringify(deerflow)),
    });
    const dialog = page.getByRole("dialog");
    await dialog.waitFor({ timeout: T });
    assert.match(
      await dialog.innerText(),
      /replaces the whole memory \(1 fact and the profile\) with the file's 1 fact/,
    );
    await dialog.getByRole("button", { name: "Replace memory" }).click();
    await waitForText(page, "#facts-list .fact-text", "Uses pandas daily");
    assert.deepEqual(await factTexts(page), ["Uses pandas daily"]);
    assert.match(await text(page, '[data-section="workContext"]'), /Data scientist at Globex/);

    const [again] = await Promise.all([
      page.waitForEvent("download", { timeout: T }),
      page.getByRole("button", { name: "Export memory.json" }).click(),
    ]);
    const roundTrip = JSON.parse(readFileSync(await again.path(), "utf8"));
    assert.deepEqual(roundTrip.agentNotes, { kept: true });
    assert.equal(roundTrip.user.workContext.mood, "curious");
    assert.deepEqual(roundTrip.facts[0].tags, ["python"]);
    assert.equal(roundTrip.facts[0].id, "fact_3f9a1c2e");

    // Valid JSON but not memory: confirmed, then rejected by the library with its reason.
    await page.locator("#import-file").setInputFiles({
      name: "broken.json",
      mimeType: "application/json",
      buffer: Buffer.from(JSON.stringify({ user: 5, facts: "no" })),
    });
    await dialog.getByRole("button", { name: "Replace memory" }).click();
    await page.locator(".toast-error", { hasText: "Importing broken.json failed" }).waitFor({ timeout: T });
    // Not JSON at all: rejected straight away.
    await page
      .locator("#import-file")
      .setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("just some notes") });
    await page.locator(".toast-error", { hasText: "Importing notes.txt failed" }).waitFor({ timeout: T });
    // Far too big to be a memory file: refused before it is even read.
    await page
      .locator("#import-file")
      .setInputFiles({ name: "dump.json", mimeType: "application/json", buffer: Buffer.alloc(6 * 1024 * 1024, 32) });
    await page.locator(".toast-error", { hasText: "dump.json is 6.0 MB, too big" }).waitFor({ timeout: T });
    assert.deepEqual(await factTexts(page), ["Uses pandas daily"]);
    assert.deepEqual(
      (await stored(page)).facts.map((f) => f.content),
      ["Uses pandas daily"],
      "memory unchanged",
    );
    await shot(page, "07-import-rejected");

    // A memory over maxFacts (set to 100 here; 10 000 by default) keeps its best 100: import
    // applies the cap.
    await page.evaluate(() => globalThis.memory.configure({ maxFacts: 100 }));
    const many = {
      ...deerflow,
      facts: Array.from({ length: 1000 }, (_, i) => ({
        content: `Imported fact ${i}`,
        category: "context",
        confidence: i < 100 ? 0.9 : 0.8,
      })),
    };
    await page
      .locator("#import-file")
      .setInputFiles({ name: "many.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(many)) });
    await dialog.getByRole("button", { name: "Replace memory" }).click();
    await waitForText(page, "#facts-list .fact-text", "Imported fact 99");
    const capped = (await stored(page)).facts;
    assert.equal(capped.length, 100);
    assert.ok(
      capped.every((f) => f.confidence === 0.9),
      "the best-ranked 100 are kept",
    );
    // With a higher cap a huge memory imports whole; the list draws the best 300 rows.
    await page.evaluate(() => globalThis.memory.configure({ maxFacts: 2000 }));
    await page
      .locator("#import-file")
      .setInputFiles({ name: "many.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(many)) });
    await dialog.getByRole("button", { name: "Replace memory" }).click();
    await waitForText(page, "#facts-list", "700 more facts not shown");
    assert.equal(await page.locator("#facts-list .fact-text").count(), 300);
    assert.equal((await stored(page)).facts.length, 1000, "all of them are in memory");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a long fact list gets a filter that narrows it by content or category", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    assert.ok(await page.locator("#facts-filter").isHidden(), "no filter for a short list");
    const facts = Array.from({ length: 12 }, (_, i) => ({
      id: `fact_0000000${i.toString(16)}`,
      content: i === 7 ? "Plays chess on Sundays" : `Routine fact number ${i}`,
      category: i === 3 ? "goal" : "context",
      confidence: 0.8,
      createdAt: "2026-03-14T10:30:00.000000Z",
      source: "t",
    }));
    await page.locator("#import-file").setInputFiles({
      name: "memory.json",
      mimeType: "application/json",
      buffer: Buffer.from(JSON.stringify(memoryDoc({ facts }))),
    });
    await page.getByRole("dialog").getByRole("button", { name: "Replace memory" }).click();
    await waitForText(page, "#facts-list .fact-text", "Plays chess on Sundays");
    assert.equal((await factTexts(page)).length, 12);
    await page.getByLabel("Filter facts").fill("chess");
    assert.deepEqual(await factTexts(page), ["Plays chess on Sundays"]);
    await page.getByLabel("Filter facts").fill("goal");
    assert.deepEqual(await factTexts(page), ["Routine fact number 3"]);
    await page.getByLabel("Filter facts").fill("nothing like this");
    assert.match(await text(page, "#facts-list"), /No fact matches the filter/);
    await page.getByLabel("Filter facts").fill("");
    assert.equal((await factTexts(page)).length, 12);
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("markup in facts, sections and answers is shown as text and never runs", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    const evilFact = "<img src=x onerror=alert(1)>";
    await addFact(page, evilFact);

    const doc = memoryDoc({
      user: {
        workContext: {
          summary: "<script>alert(2)</script><img src=x onerror=alert(3)>",
          updatedAt: "2026-03-14T10:30:00.000000Z",
        },
        personalContext: { summary: "", updatedAt: "" },
        topOfMind: { summary: "", updatedAt: "" },
      },
      facts: [
        {
          id: "fact_00000001",
          content: evilFact,
          category: "<b>cat</b>",
          confidence: 0.9,
          createdAt: "2026-03-14T10:30:00.000000Z",
          source: "<i>src</i>",
        },
        {
          id: "fact_00000002",
          content: '"><svg onload=alert(4)>',
          category: "knowledge",
          confidence: 0.8,
          createdAt: "2026-03-14T10:30:00.000000Z",
          source: "t",
        },
      ],
    });
    await page
      .locator("#import-file")
      .setInputFiles({ name: "memory.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(doc)) });
    await page.getByRole("dialog").getByRole("button", { name: "Replace memory" }).click();
    await waitForText(page, "#facts-list .fact-text", '"><svg onload=alert(4)>');

    // An answer with markup, sent without streaming (the page reads plain JSON answers too).
    script.chats.push({
      text: "Here: <img src=x onerror=alert(5)> and **bold** <a href=javascript:alert(6)>link</a>",
      stream: false,
    });
    await send(page, "Show me <img src=x onerror=alert(7)>");
    await waitForText(page, ".msg-assistant .bubble", "<img src=x onerror=alert(5)>");

    assert.ok((await factTexts(page)).includes(evilFact), "the fact reads as the literal text");
    assert.match(
      await text(page, '[data-section="workContext"] .section-text'),
      /^<script>alert\(2\)<\/script><img src=x onerror=alert\(3\)>$/,
    );
    assert.match(await text(page, ".msg-user .bubble"), /<img src=x onerror=alert\(7\)>/);
    assert.match(
      await text(page, "#preview-block"),
      /&lt;img src=x onerror=alert\(1\)&gt;/,
      "the library escapes it inside the block",
    );
    const counts = await page.evaluate(() => ({
      img: document.querySelectorAll("img").length,
      script: document.querySelectorAll("script").length,
      svgOnload: document.querySelectorAll("svg[onload]").length,
      anchors: document.querySelectorAll(".messages a").length,
      bold: document.querySelectorAll(".msg-assistant .bubble strong").length,
      catHtml: document.querySelectorAll("#facts-list b, #facts-list i").length,
    }));
    assert.deepEqual(counts, { img: 0, script: 1, svgOnload: 0, anchors: 0, bold: 1, catHtml: 0 });
    // A handler would run while the page renders what it was given: two frames after the
    // last message is drawn and every animation is over, none has.
    await settled(page);
    await shot(page, "08-markup-as-text");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("without an endpoint, a banner explains how to connect one, sending is off, and the memory tools still work", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { server: bare });
    const banner = page.locator("#endpoint-banner");
    assert.ok(await banner.isVisible());
    const said = await banner.innerText();
    for (const needle of [
      "No model connected",
      "OPENAI_BASE_URL",
      "OPENAI_API_KEY",
      "MODEL=",
      "http://127.0.0.1:11434/v1",
      "OPENAI_BASE_URL is not set",
    ]) {
      assert.ok(said.includes(needle), `banner mentions ${needle}`);
    }
    assert.match(await text(page, "#model-name"), /no model/);
    await page.locator("#input").fill("Hello?");
    assert.ok(await page.locator("#send").isDisabled(), "Send is disabled without a model");
    await page.locator("#input").press("Enter");
    assert.equal(await page.locator(".msg").count(), 0, "Enter sent nothing");

    await addFact(page, "Prefers dark roast coffee", { category: "preference" });
    await page.locator("#input").fill("coffee recommendations?");
    await waitForText(page, "#preview-block", "] Prefers dark roast coffee");
    await shot(page, "09-no-endpoint");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("clear asks first: Cancel keeps memory, confirming empties it", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    await addFact(page, "Speaks Portuguese");
    await page.getByRole("button", { name: "Edit section Personal" }).click();
    await page.getByRole("textbox", { name: "Personal summary" }).fill("Bilingual.");
    await page.getByRole("button", { name: "Save" }).click();
    await waitForText(page, '[data-section="personalContext"] .section-text', "Bilingual.");

    await page.getByRole("button", { name: "Clear memory…" }).click();
    const dialog = page.getByRole("dialog");
    assert.match(await dialog.innerText(), /removes 1 fact and all six profile sections/);
    await shot(page, "10-clear-confirm");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden", timeout: T });
    assert.deepEqual(await factTexts(page), ["Speaks Portuguese"]);

    await page.getByRole("button", { name: "Clear memory…" }).click();
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden", timeout: T });
    assert.equal((await stored(page)).facts.length, 1, "Escape cancels too");

    await page.getByRole("button", { name: "Clear memory…" }).click();
    await dialog.getByRole("button", { name: "Clear memory" }).click();
    await page.waitForSelector("#facts-list .empty-state", { timeout: T });
    const doc = await stored(page);
    assert.equal(doc.facts.length, 0);
    assert.equal(doc.user.personalContext.summary, "");
    assert.match(await text(page, "#preview-note"), /memory is empty/);
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("pausing learning queues nothing and injection off sends prompts without memory; both settings survive a reload", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=60000" });
    await addFact(page, "Is allergic to peanuts", { category: "context" });
    const from = llm.requests.length;

    await page.getByLabel("Learn from chats").uncheck();
    await waitForState(page, "paused");
    script.chats.push("Sure, here is a peanut-free recipe.");
    await send(page, "A snack idea for me, please?");
    assert.deepEqual(await page.evaluate(() => globalThis.memory.status().pending), [], "nothing queued while paused");
    assert.match(systemOf(chatRequests(from)[0]), /Is allergic to peanuts/, "injection still on");
    // Control: with learning back on, the same kind of turn is queued.
    await page.getByLabel("Learn from chats").check();
    script.chats.push("Another one: apple slices.");
    await send(page, "And another?");
    await waitForState(page, "queued");
    assert.equal((await page.evaluate(() => globalThis.memory.status().pending)).length, 1);

    await page.getByLabel("Add memory to prompts").uncheck();
    await waitForText(page, "#preview-note", "Injection is off");
    assert.match(await text(page, "#facts-list"), /Injection off/);
    script.chats.push("Plain answer.");
    await send(page, "One more snack?");
    const last = chatRequests(from).at(-1);
    assert.ok(!systemOf(last).includes("<memory>"), "no memory block when injection is off");
    assert.ok(!systemOf(last).includes("peanuts"));
    assert.equal(await page.locator(".msg-assistant .msg-meta").last().innerText(), "No memory in this prompt");

    await page.getByLabel("Learn from chats").uncheck();
    await reload(page);
    assert.equal(await page.getByLabel("Learn from chats").isChecked(), false);
    assert.equal(await page.getByLabel("Add memory to prompts").isChecked(), false);
    assert.deepEqual(
      await page.evaluate(() => [globalThis.memory.options().enabled, globalThis.memory.options().injectionEnabled]),
      [false, false],
    );
    assert.equal(extractionRequests(from).length, 0, "the 60 s debounce never ran out");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a failed extraction shows the error with its message, and Update now retries it", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=300" });
    script.extractions.push({ status: 400, body: { error: { message: "model 'tiny' does not support JSON" } } });
    script.chats.push("Hello Ana!");
    await send(page, "I'm Ana and I teach physics in Porto.");
    await waitForState(page, "error");
    assert.match(await text(page, "#status-title"), /Update failed/);
    assert.match(await text(page, "#status-detail"), /HTTP 400.*model 'tiny' does not support JSON/);
    await shot(page, "11-extraction-error");

    script.extractions.push({
      json: { newFacts: [{ content: "Teaches physics in Porto", category: "context", confidence: 0.95 }] },
    });
    await page.getByRole("button", { name: "Update now" }).click();
    await waitForState(page, "updated");
    assert.deepEqual(await factTexts(page), ["Teaches physics in Porto"]);
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

/** What the layout looks like now: sizes and overflows of the document, panes and chip. */
const layout = (page) =>
  page.evaluate(() => {
    const box = (sel) => {
      const el = document.querySelector(sel);
      const r = el?.getBoundingClientRect();
      return r && r.width > 0 && r.height > 0
        ? { x: r.x, y: r.y, right: r.right, bottom: r.bottom, width: r.width, height: r.height }
        : null;
    };
    const d = document.documentElement;
    const chip = document.querySelector("#model-name");
    return {
      docHeight: d.scrollHeight,
      docWidth: d.scrollWidth,
      width: innerWidth,
      height: innerHeight,
      scrollY,
      chat: box("section.chat"),
      memory: box("aside.memory"),
      chip: box("#model-chip"),
      chipTextCut: chip.scrollWidth > chip.clientWidth && getComputedStyle(chip).textOverflow !== "ellipsis",
      send: box("#send"),
      memoryScroll: (({ scrollHeight, clientHeight }) => ({ scrollHeight, clientHeight }))(
        document.querySelector(".memory-scroll"),
      ),
    };
  });

const overlaps = (a, b) => a && b && a.x < b.right && b.x < a.right && a.y < b.bottom && b.y < a.bottom;

/** Checks that hold at every size: the app is the viewport, nothing is cut or covered. */
function assertFits(l, what) {
  assert.equal(
    l.docHeight,
    l.height,
    `${what}: the document is exactly the viewport's height (${l.docHeight} vs ${l.height})`,
  );
  assert.ok(l.docWidth <= l.width, `${what}: no sideways scrolling (${l.docWidth} > ${l.width})`);
  assert.ok(
    l.chip && l.chip.right <= l.width,
    `${what}: the endpoint chip ends inside the viewport (${l.chip?.right} > ${l.width})`,
  );
  assert.ok(!l.chipTextCut, `${what}: the endpoint name is ellipsised, not cut`);
}

for (const [size, viewport] of [
  ["1280×800", { width: 1280, height: 800 }],
  ["390×844", { width: 390, height: 844 }],
]) {
  const phone = viewport.width < 900;
  test(`at ${size} the app fills the viewport, each pane scrolls on its own, and the memory pane is reachable`, async () => {
    await withBrowser(async (context) => {
      const { page, problems } = await openDemo(context, { viewport });
      const tag = phone ? "phone" : "desktop";
      if (!phone)
        assert.match(
          await text(page, ".chat-empty"),
          /shown under Memory/,
          "the empty state names the pane, not a side",
        );
      // Enough memory to scroll: 40 facts, imported through the (hidden) file input.
      const facts = Array.from({ length: 40 }, (_, i) => ({
        id: `fact_${String(i).padStart(8, "0")}`,
        content: `Fact number ${i} about the user`,
        category: "context",
        confidence: 0.8,
        createdAt: "2026-03-14T10:30:00Z",
        source: "manual",
      }));
      await page.locator("#import-file").setInputFiles({
        name: "memory.json",
        mimeType: "application/json",
        buffer: Buffer.from(JSON.stringify(memoryDoc({ facts }))),
      });
      await page.getByRole("dialog").getByRole("button", { name: "Replace memory" }).click();
      await page.waitForFunction(() => document.querySelectorAll("#facts-list .fact").length === 40, null, {
        timeout: T,
      });
      for (let i = 0; i < 6; i++) {
        script.chats.push(`Answer ${i}: ${"a fairly long line of text that wraps ".repeat(6)}`);
        await send(page, `Question ${i}`);
      }
      let l = await layout(page);
      assertFits(l, `${size}, chat`);
      if (phone) {
        assert.equal(l.memory, null, "on a phone one pane shows at a time: the chat");
        assert.ok(l.chat.width >= viewport.width - 1, "the chat uses the full width");
      } else {
        assert.ok(l.chat && l.memory && l.memory.x >= l.chat.right - 1, "chat and memory side by side");
        assert.ok(l.memory.bottom <= l.height && l.chat.bottom <= l.height, "both panes end at the viewport's bottom");
        assert.ok(l.memoryScroll.scrollHeight > l.memoryScroll.clientHeight, "the memory pane scrolls inside itself");
      }
      // A wheel over the chat scrolls the messages, not the page.
      const messages = page.locator("#messages");
      const mbox = await messages.boundingBox();
      await page.mouse.move(mbox.x + mbox.width / 2, mbox.y + mbox.height / 2);
      await messages.evaluate((el) => (el.style.scrollBehavior = "auto"));
      await messages.evaluate((el) => el.scrollTo(0, 0));
      await page.mouse.wheel(0, 400);
      await page.waitForFunction(() => document.querySelector("#messages").scrollTop > 0, null, { timeout: T });
      assert.equal((await layout(page)).scrollY, 0, "the page itself never scrolls");
      await shot(page, `16-${tag}-chat`);

      // A failed call: the dot turns red, the message says "The model call failed" once.
      script.chats.push({ step: { status: 503, body: { error: { message: "endpoint down for maintenance" } } } });
      await send(page, "Are you there?");
      const error = await page.locator(".msg-error .bubble").last().innerText();
      assert.equal(error.split("The model call failed").length - 1, 1, `said once: ${error}`);
      assert.match(error, /HTTP 503: endpoint down for maintenance/);
      assert.ok(await page.locator("#model-chip.down").isVisible(), "the endpoint dot shows the endpoint is down");
      assert.match(await page.locator("#model-chip").getAttribute("title"), /endpoint down for maintenance/);
      script.chats.push("Back again.");
      await page.locator(".msg-error").getByRole("button", { name: "Retry" }).click();
      await waitForText(page, ".msg-assistant .bubble", "Back again.");
      assert.ok(await page.locator("#model-chip.ok").isVisible(), "green again after an answer");

      if (phone) {
        await page.getByRole("button", { name: /^Memory/ }).click();
        l = await layout(page);
        assertFits(l, `${size}, memory`);
        assert.equal(l.chat, null, "the switch shows the memory pane instead of the chat");
        assert.ok(l.memory && l.memory.y < l.height && l.memory.bottom <= l.height, "the memory pane is on the screen");
        assert.ok(l.memoryScroll.scrollHeight > l.memoryScroll.clientHeight, "and scrolls inside itself");
        assert.equal(await page.getByRole("button", { name: /^Memory/ }).getAttribute("aria-pressed"), "true");
        assert.match(await text(page, "#switch-count"), /^40$/, "the switch shows how many facts there are");
      }
      await shot(page, `17-${tag}-memory`);

      // The undo toast does not cover Send (on a phone: after switching back to the chat).
      await page.getByRole("button", { name: "Delete fact: Fact number 0 about the user" }).click();
      const toast = page.locator(".toast", { hasText: "Fact deleted." });
      await toast.waitFor({ timeout: T });
      if (phone) await page.getByRole("button", { name: "Chat", exact: true }).click();
      l = await layout(page);
      const tbox = await toast.boundingBox();
      assert.ok(
        l.send && !overlaps(tbox && { ...tbox, right: tbox.x + tbox.width, bottom: tbox.y + tbox.height }, l.send),
        "the toast leaves Send free",
      );
      assertFits(l, `${size}, with a toast`);
      await shot(page, `18-${tag}-toast`);
      await toast.getByRole("button", { name: "Undo" }).click();
      await page.waitForFunction(() => document.querySelectorAll("#facts-list .fact").length === 40, null, {
        timeout: T,
      });
      assert.deepEqual(problems, { dialogs: [], errors: [] });
    });
  });
}

for (const [size, viewport] of [
  ["1280×800", { width: 1280, height: 800 }],
  ["390×844", { width: 390, height: 844 }],
]) {
  const phone = viewport.width < 900;
  test(`at ${size}: a clicked suggestion enables Send; after a reload encrypted memory shows as locked, in user wording, until the passphrase unlocks it ("Unlocked", the refusal toast gone)`, async () => {
    await withBrowser(async (context) => {
      const { page, problems } = await openDemo(context, { viewport });
      const send = page.locator("#send");
      assert.equal(await send.isDisabled(), true, "nothing typed yet");
      await page.locator(".suggestion").first().click();
      assert.notEqual(await page.locator("#input").inputValue(), "", "the suggestion fills the box");
      assert.equal(await send.isDisabled(), false, "and Send is enabled without typing a character");
      script.chats.push("Noted.");
      await send.click();
      await waitForText(page, ".msg-assistant .bubble", "Noted.");

      const memoryPane = async () => {
        if (phone) await page.getByRole("button", { name: /^Memory/ }).click();
      };
      await memoryPane();
      await addFact(page, "Allergic to penicillin");
      await page.getByRole("checkbox", { name: "Encrypt with a passphrase" }).check();
      await page.getByRole("textbox", { name: "Passphrase" }).fill("demo passphrase");
      await page.getByRole("button", { name: "Unlock / encrypt" }).click();
      await waitForText(page, ".toast", "Memory is encrypted.");

      await reload(page);
      await page.waitForSelector("body[data-locked=true]", { timeout: T });
      const storageName = await page.locator("#storage-name").textContent();
      assert.equal(storageName, "IndexedDB (locked)", "the page names the real storage, not in memory");
      assert.equal(await page.locator("#mem-status").getAttribute("data-state"), "locked");
      assert.doesNotMatch(await page.locator("#revision").textContent(), /rev 0/, "no empty memory at rev 0");
      const banner = await page.locator(".notice").innerText();
      assert.match(banner, /locked with a passphrase: enter it under Data to unlock it/);
      assert.doesNotMatch(banner, /`|option|encryption|in this tab only/, `user wording: ${banner}`);
      await memoryPane();
      assert.match(await text(page, "#facts-list"), /Locked/);
      assert.doesNotMatch(await text(page, "#facts-list"), /No facts yet/);
      for (const sel of ["#preview-note", "#history-list"])
        assert.match(await page.locator(sel).textContent(), /[Ll]ocked/, `${sel} says locked, not empty`);
      await shot(page, `19-${phone ? "phone" : "desktop"}-locked`);

      await page.getByRole("textbox", { name: "Passphrase" }).fill("not the passphrase");
      await page.getByRole("button", { name: "Unlock / encrypt" }).click();
      await waitForText(page, ".toast", "Wrong passphrase.");
      assert.equal(await page.locator("body").getAttribute("data-locked"), "true", "still locked");
      await page.getByRole("textbox", { name: "Passphrase" }).fill("demo passphrase");
      await page.getByRole("button", { name: "Unlock / encrypt" }).click();
      await waitForText(page, "#facts-list .fact-text", "Allergic to penicillin");
      await waitForText(page, ".toast", "Unlocked.");
      assert.equal(await page.locator(".toast", { hasText: "Wrong passphrase" }).count(), 0, "the refusal is gone");
      assert.equal(await page.locator(".toast", { hasText: "Memory is encrypted" }).count(), 0);
      assert.equal(await page.locator("#storage-name").textContent(), "IndexedDB");
      assert.equal(await page.locator(".notice").count(), 0, "the locked banner is gone");
      assert.match(await page.locator("#revision").textContent(), /^rev [1-9]/);
      assert.deepEqual(problems, { dialogs: [], errors: [] });
    });
  });
}

test("Enter sends, Shift+Enter adds a line, and every control has an accessible name", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context);
    const from = chatRequests().length;
    await page.locator("#input").click();
    await page.keyboard.type("line one");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("line two");
    assert.equal(await page.locator("#input").inputValue(), "line one\nline two");
    assert.equal(chatRequests().length, from, "Shift+Enter sent nothing");
    script.chats.push("Got both lines.");
    await page.keyboard.press("Enter");
    await waitForText(page, ".msg-assistant .bubble", "Got both lines.");
    assert.equal(await page.locator(".msg-user .bubble").innerText(), "line one\nline two");
    assert.equal(await page.locator("#input").inputValue(), "", "the box is emptied");

    await addFact(page, "Uses a screen reader sometimes");
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll("button, input, select, textarea, summary, [tabindex]")]
        .filter((el) => {
          const labelled = el
            .getAttribute("aria-labelledby")
            ?.split(" ")
            .map((id) => document.getElementById(id)?.textContent ?? "")
            .join("");
          const name =
            el.getAttribute("aria-label") ||
            labelled ||
            [...(el.labels ?? [])].map((l) => l.textContent).join("") ||
            (/^(BUTTON|SUMMARY)$/.test(el.tagName) ? el.textContent : "");
          return !name.trim();
        })
        .map((el) => el.outerHTML.slice(0, 100)),
    );
    assert.deepEqual(unnamed, []);

    // Tab reaches the memory tools, in order, from the message box.
    await page.locator("#input").focus();
    const reached = new Set();
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press("Tab");
      reached.add(
        await page.evaluate(
          () =>
            document.activeElement?.getAttribute("aria-label") ||
            document.activeElement?.textContent?.trim() ||
            document.activeElement?.id,
        ),
      );
    }
    for (const name of [
      "Add fact",
      "Edit fact: Uses a screen reader sometimes",
      "Delete fact: Uses a screen reader sometimes",
      "Edit section Work",
      "Export memory.json",
    ]) {
      assert.ok(reached.has(name), `Tab reaches "${name}"`);
    }
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("when the chosen storage is unavailable, the page says so and keeps working in memory", async () => {
  await withBrowser(async (context) => {
    await context.addInitScript(() =>
      Object.defineProperty(globalThis, "indexedDB", { value: undefined, configurable: true }),
    );
    const { page, problems } = await openDemo(context, { query: "debounce=400&storage=indexeddb" });
    assert.equal(await page.locator("body").getAttribute("data-storage"), "memory");
    assert.match(
      await text(page, "#notices"),
      /IndexedDB is not available here: .*Memory is kept in this tab only and is lost on reload\./s,
    );
    assert.match(await text(page, "#storage-name"), /in memory/);
    await addFact(page, "Works offline a lot");
    assert.deepEqual(await factTexts(page), ["Works offline a lot"]);
    await shot(page, "14-storage-fallback");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a failed model call shows the error with Retry, and Stop interrupts an answer that does not come", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=60000" });
    script.chats.push({ step: { status: 500, body: { error: { message: "upstream overloaded" } } } });
    await send(page, "Hello?");
    const error = page.locator(".msg-error");
    assert.match(await error.innerText(), /The model call failed.*HTTP 500: upstream overloaded/s);
    await shot(page, "15-chat-error");
    script.chats.push("Back online.");
    await error.getByRole("button", { name: "Retry" }).click();
    await waitForText(page, ".msg-assistant .bubble", "Back online.");
    assert.equal(await page.locator(".msg-error").count(), 0, "the error is replaced by the answer");
    assert.equal(await page.locator(".msg-user").count(), 1, "the question is not repeated");

    script.chats.push({ step: { hang: true } });
    await page.locator("#input").fill("Tell me a very long story");
    await page.locator("#input").press("Enter");
    const stop = page.getByRole("button", { name: "Stop the answer" });
    await stop.waitFor({ timeout: T });
    await stop.click();
    await waitForText(page, ".msg-assistant .bubble", "Stopped.");
    await page.getByRole("button", { name: "Send message" }).waitFor({ timeout: T });
    assert.deepEqual(
      (await page.evaluate(() => globalThis.memory.status().pending)).length,
      1,
      "the answered turn is queued; the stopped one adds nothing",
    );

    // "New chat" while an answer is still pending: the new chat starts empty, and stays so.
    script.chats.push({ step: { hang: true } });
    await page.locator("#input").fill("Another very long story, please");
    await page.locator("#input").press("Enter");
    await stop.waitFor({ timeout: T });
    const aborted = page.waitForEvent("requestfailed", { predicate: (r) => r.method() === "POST", timeout: T });
    await page.locator("#new-chat").click();
    await page.getByRole("button", { name: "Send message" }).waitFor({ timeout: T });
    await aborted; // the abandoned answer's request is cancelled by the page: it settles now
    await settled(page);
    assert.equal(await page.locator("#messages .msg").count(), 0, "no stray message from the abandoned answer");
    await reload(page);
    assert.equal(await page.locator("#messages .msg").count(), 0, "nor in the saved chat");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("a reasoning model's <think> preamble is folded away in the chat and not remembered", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=300" });
    const from = llm.requests.length;
    script.chats.push("<think>The user asks about tea. Secret pondering.</think>Green tea is a good choice.");
    await send(page, "What tea should I try? I like mild flavours.");
    await waitForText(page, ".msg-assistant .bubble", "Green tea is a good choice.");
    assert.ok(!(await text(page, ".msg-assistant .bubble")).includes("pondering"));
    const reasoning = page.locator(".msg-assistant details.thinking");
    assert.equal(await reasoning.getAttribute("open"), null, "folded");
    assert.match(await reasoning.innerText(), /Reasoning/);
    // The scripted model finds nothing to remember: no commit, no event, and the page says so.
    await waitForState(page, "updated");
    assert.match(await text(page, "#status-detail"), /^Checked (just now|\d+ s ago) · nothing new to remember$/);
    const [extraction] = extractionRequests(from);
    const prompt = extraction.body.messages.at(-1).content;
    assert.ok(prompt.includes("Green tea is a good choice."));
    assert.ok(!prompt.includes("pondering"), "the reasoning is not sent for extraction");
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("unreadable stored memory is reported, never replaced: its raw data can be saved, then the storage reset", async () => {
  await withBrowser(async (context) => {
    const { page, problems } = await openDemo(context, { query: "debounce=400&storage=localstorage" });
    await addFact(page, "Plays the cello");
    // Damage the stored document behind the page's back (the pointer stays valid).
    const damaged = await page.evaluate(() => {
      const pointer = JSON.parse(localStorage.getItem("user-memory/default/doc"));
      localStorage.setItem(pointer.key, '{"version":"1.0","user":');
      return pointer.key;
    });
    await reload(page);
    const note = page.locator("#notices .notice-error");
    await note.waitFor({ timeout: T });
    assert.match(
      await note.innerText(),
      /^Stored memory cannot be read, and nothing was changed: .*localStorage.*not valid JSON.* Save the raw data, then reset localStorage to start over\./s,
    );
    assert.equal(await page.locator("body").getAttribute("data-storage"), "memory", "the page keeps working in memory");
    assert.equal(
      await page.evaluate((k) => localStorage.getItem(k), damaged),
      '{"version":"1.0","user":',
      "the stored data is untouched",
    );
    await shot(page, "16-corrupt-memory");

    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: T }),
      note.getByRole("button", { name: "Download raw data" }).click(),
    ]);
    const raw = JSON.parse(readFileSync(await download.path(), "utf8"));
    assert.equal(raw.document, '{"version":"1.0","user":');

    await note.getByRole("button", { name: "Reset storage…" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Reset" }).click();
    await page.waitForSelector('body[data-storage="localstorage"]', { timeout: T });
    assert.equal(await page.locator("#notices .notice-error").count(), 0);
    await page.waitForSelector("#facts-list .empty-state", { timeout: T });
    await addFact(page, "Starts over");
    await reload(page);
    assert.deepEqual(await factTexts(page), ["Starts over"]);
    assert.deepEqual(problems, { dialogs: [], errors: [] });
  });
});

test("two tabs share memory: an edit in one shows up live in the other", async () => {
  await withBrowser(async (context) => {
    for (const storage of ["indexeddb", "localstorage"]) {
      const a = await openDemo(context, { query: `debounce=400&storage=${storage}` });
      const b = await openDemo(context, { query: `debounce=400&storage=${storage}` });
      const fact = `Shared through ${storage}`;
      await addFact(a.page, fact);
      await waitForText(b.page, "#facts-list .fact-text", fact);
      await b.page.getByRole("button", { name: `Delete fact: ${fact}` }).click();
      await a.page.locator("#facts-list .fact", { hasText: fact }).waitFor({ state: "detached", timeout: T });
      await closeBoth(a, b);
    }
  });
});

test("encrypting in one tab while a second tab is open: the second tab's next writes are refused (now encrypted, no advice to reset) and never land in plaintext", async () => {
  // Before, an instance opened plain before encrypt() wrote its next change into the
  // encrypted memory in plaintext; the demo's encrypt flow did so with a second tab open.
  await withBrowser(async (context) => {
    for (const storage of ["indexeddb", "localstorage"]) {
      const query = `debounce=400&storage=${storage}`;
      const a = await openDemo(context, { query });
      const b = await openDemo(context, { query });
      await addFact(b.page, `Plays the cello (${storage})`);
      await waitForText(a.page, "#facts-list .fact-text", `Plays the cello (${storage})`);

      await a.page.getByRole("checkbox", { name: "Encrypt with a passphrase" }).check();
      await a.page.getByRole("textbox", { name: "Passphrase" }).fill("two tabs passphrase");
      await a.page.getByRole("button", { name: "Unlock / encrypt" }).click();
      await a.page.waitForFunction(() => globalThis.memory?.options().encryption === true, null, { timeout: T });
      await waitForText(a.page, ".toast", "Memory is encrypted.");

      // Tab b still has its plain instance: adding a fact is refused, the typed fact stays.
      const secret = `Secret plan (${storage})`;
      await b.page.getByRole("button", { name: "Add fact" }).click();
      await b.page.getByLabel("Fact", { exact: true }).fill(secret);
      await b.page.getByRole("button", { name: "Add", exact: true }).click();
      const refusal = b.page.locator(".toast-error", { hasText: "Adding the fact failed" });
      await refusal.waitFor({ timeout: T });
      const message = await refusal.innerText();
      assert.match(message, /now encrypted.*reopen it with `encryption`/s);
      assert.doesNotMatch(message, /reset/i);
      assert.equal(await b.page.getByLabel("Fact", { exact: true }).inputValue(), secret, "nothing typed is lost");

      // A chat in tab b: its conversation is kept in the chat, but not written into memory.
      script.chats.push("Noted, your plan is safe with me.");
      await send(b.page, `My secret plan (${storage}) is to move to Porto.`);
      await waitForState(b.page, "error");
      assert.match(await text(b.page, "#status-detail"), /now encrypted/);

      const raw = await a.page.evaluate(
        async (storage) =>
          JSON.stringify(await (await import("/pkg/browser.js")).UserMemory.inspect({ agent: "default", storage })),
        storage,
      );
      assert.match(raw, /umenc2:/);
      for (const plain of ["cello", "Secret plan", "Porto"]) assert.ok(!raw.includes(plain), `no ${plain} in ${raw}`);
      // The encrypted memory kept what it had; the page shows no advice to reset it.
      assert.deepEqual(
        (await stored(a.page)).facts.map((f) => f.content),
        [`Plays the cello (${storage})`],
      );
      for (const page of [a.page, b.page]) assert.doesNotMatch(await page.locator("body").innerText(), /reset/i);
      await closeBoth(a, b);
    }
  });
});
