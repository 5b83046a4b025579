// The three browser engines behind one small interface, so each browser test is written once
// and runs in Chromium, Firefox and WebKit:
//
//   chromium  the installed Chrome/Chromium, driven by playwright-core (no browser download)
//   firefox   the installed Firefox, driven over WebDriver BiDi by puppeteer-core
//   webkit    WebKitGTK through WebKitWebDriver and selenium-webdriver, in the small browser
//             tests/helpers/webkit-browser.py (it keeps its data on disk, so restarts keep
//             storage), drawing into a private Broadway display (no X server)
//
// launch(engine) → Browser { engine, version, newPage(url), restart(), kill(), close() }
// Page { goto, reload, evaluate(fn, arg), waitFor(fn, arg, {timeout}), click, fill, press, close }
//
// Every page is a window of its own (never a background tab: Firefox throttles hidden tabs'
// timers to about one a second, which the cross-tab tests would measure instead of the library).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browserVersion, findBrowsers, webkitVersion } from "../../scripts/browsers.mjs";

export { skipReason } from "../../scripts/browsers.mjs";
import { CHROMIUM_ARGS } from "./browser.mjs";

/** The engines, or those named in BROWSER_ENGINES (e.g. `BROWSER_ENGINES=webkit`, for a quick run). */
export const ENGINES = process.env.BROWSER_ENGINES?.split(",").filter(Boolean) ?? ["chromium", "firefox", "webkit"];
const POLL_MS = 25;
// A budget for what a wait is waiting for (an answer, the debounce and an extraction through the
// page), not a pause: 30 s ran out in WebKit at load 17 on 2 cores, with the pipeline working.
const DEFAULT_WAIT_MS = 120_000;

/** Every descendant process of `pid` (children first found, then theirs). */
function descendants(pid) {
  const table = execFileSync("ps", ["-eo", "pid=,ppid="], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number));
  const out = [];
  for (let frontier = [pid]; frontier.length;) {
    const next = table.filter(([, ppid]) => frontier.includes(ppid)).map(([p]) => p);
    out.push(...next);
    frontier = next;
  }
  return out;
}

function killAll(pids) {
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

async function poll(page, fn, arg, { timeout = DEFAULT_WAIT_MS } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = await page.evaluate(fn, arg);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`waitFor timed out after ${timeout} ms: ${fn.toString().slice(0, 200)}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

// ───────────────────────── Chromium: playwright-core ─────────────────────────

async function chromiumDriver(profile, { grantPersistentStorage }) {
  const { chromium } = await import("playwright-core");
  const executablePath = findBrowsers().chromium.binary;
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  // A persistent context opens with one page: hand that one out first.
  let unused = context.pages()[0] ?? (await context.newPage());
  if (grantPersistentStorage) {
    // Chromium ties persistence to this permission: granted, every origin is persistent.
    const cdp = await context.newCDPSession(unused);
    await cdp.send("Browser.grantPermissions", { permissions: ["durableStorage"] });
  }
  const wrap = (p) => ({
    goto: (url) => p.goto(url).then(() => {}),
    reload: () => p.reload().then(() => {}),
    evaluate: (fn, arg) => p.evaluate(fn, arg),
    click: (sel) => p.click(sel),
    fill: (sel, text) => p.fill(sel, text),
    press: (sel, key) => p.press(sel, key),
    close: () => p.close(),
  });
  return {
    version: browserVersion(executablePath),
    newPage: async () => {
      const p = unused ?? (await context.newPage());
      unused = null;
      return wrap(p);
    },
    close: () => context.close(),
    pids: () => descendants(process.pid).filter((p) => processName(p).includes("chrom")),
  };
}

function processName(pid) {
  try {
    return execFileSync("ps", ["-o", "comm=", "-p", String(pid)], { encoding: "utf8" })
      .trim()
      .toLowerCase();
  } catch {
    return "";
  }
}

// ───────────────────────── Firefox: puppeteer-core over WebDriver BiDi ─────────────────────────

async function firefoxDriver(profile, { grantPersistentStorage }) {
  const { default: puppeteer } = await import("puppeteer-core");
  const prefs = {
    // Keep Firefox off the network (this machine has none) and quiet.
    "network.captive-portal-service.enabled": false,
    "network.connectivity-service.enabled": false,
    "browser.safebrowsing.update.enabled": false,
    "extensions.update.enabled": false,
  };
  // 1 = allow: navigator.storage.persist() resolves at once instead of showing a prompt.
  if (grantPersistentStorage) prefs["permissions.default.persistent-storage"] = 1;
  const browser = await puppeteer.launch({
    browser: "firefox",
    executablePath: findBrowsers().firefox.binary,
    headless: true,
    userDataDir: profile,
    extraPrefsFirefox: prefs,
  });
  const first = (await browser.pages())[0];
  let unused = first;
  const wrap = (p) => ({
    goto: (url) => p.goto(url).then(() => {}),
    reload: () => p.reload().then(() => {}),
    evaluate: (fn, arg) => p.evaluate(fn, arg),
    click: (sel) => p.locator(sel).click(),
    fill: (sel, text) => p.locator(sel).fill(text),
    press: async (sel, key) => {
      await p.focus(sel);
      await p.keyboard.press(key);
    },
    close: () => p.close(),
  });
  return {
    version: browserVersion(findBrowsers().firefox.binary),
    newPage: async () => {
      const p = unused ?? (await browser.newPage({ type: "window" }));
      unused = null;
      return wrap(p);
    },
    close: () => browser.close(),
    pids: () => {
      const pid = browser.process()?.pid;
      return pid ? [pid, ...descendants(pid)] : [];
    },
  };
}

// ───────────────────────── WebKit: WebKitGTK + WebKitWebDriver + selenium ─────────────────────────

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port, timeout = 60_000) {
  const { connect } = await import("node:net");
  const deadline = Date.now() + timeout;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = connect(port, "127.0.0.1");
      c.on("connect", () => (c.destroy(), resolve(true)));
      c.on("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeout} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The stop functions of running WebKit services: a test process that dies leaves none behind. */
const running = new Set();
process.on("exit", () => {
  for (const stop of running) stop();
});

/** Broadway (GTK's display server for browsers) and WebKitWebDriver, private to one launch. */
async function webkitServices() {
  const w = findBrowsers().webkit;
  const runtime = mkdtempSync(join(tmpdir(), "um-webkit-run-"));
  // GTK finds the Broadway socket in XDG_RUNTIME_DIR: a private one per launch keeps
  // parallel runs apart. Its web port is bound to loopback only.
  const env = { ...process.env, XDG_RUNTIME_DIR: runtime, GDK_BACKEND: "broadway", BROADWAY_DISPLAY: ":0" };
  const [webPort, driverPort] = [await freePort(), await freePort()];
  const broadway = spawn(w.broadway, [":0", "--address", "127.0.0.1", "--port", String(webPort)], {
    env,
    stdio: "ignore",
  });
  await waitForPort(webPort);
  const driver = spawn(w.driver, [`--port=${driverPort}`], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  driver.stderr.on("data", (d) => (log = (log + d).slice(-4000)));
  await waitForPort(driverPort);
  const stop = () => {
    killAll([...descendants(driver.pid), driver.pid, broadway.pid]);
    rmSync(runtime, { recursive: true, force: true });
    running.delete(stop);
  };
  running.add(stop);
  return {
    url: `http://127.0.0.1:${driverPort}`,
    driverPid: driver.pid,
    log: () => log,
    stop,
  };
}

async function webkitDriver(profile, { grantPersistentStorage }) {
  // WebKitGTK has no navigator.storage: nothing to grant.
  if (grantPersistentStorage)
    throw new Error("WebKitGTK has no navigator.storage; there is no persistent storage to grant");
  const { Builder } = await import("selenium-webdriver");
  const w = findBrowsers().webkit;
  const services = await webkitServices();
  let driver;
  try {
    driver = await new Builder()
      .usingServer(services.url)
      .withCapabilities({
        browserName: "UserMemoryWebKit",
        "webkitgtk:browserOptions": { binary: w.browser, args: [`--data-dir=${profile}`] },
      })
      .build();
  } catch (e) {
    services.stop();
    throw new Error(`WebKitWebDriver did not start the browser: ${e.message}\n${services.log()}`);
  }
  await driver.manage().setTimeouts({ script: 120_000, pageLoad: 60_000 });
  // WebDriver commands of one session run one at a time; a queue keeps them in order, and
  // evaluate() is split into start + collect so that pages started together run together.
  let queue = Promise.resolve();
  const serial = (fn) => {
    const run = queue.then(fn);
    queue = run.catch(() => {});
    return run;
  };
  let current = await driver.getWindowHandle();
  let unused = current;
  let seq = 0;
  const focus = async (handle) => {
    if (current !== handle) await driver.switchTo().window(handle);
    current = handle;
  };
  const { By, Key } = await import("selenium-webdriver");
  const keys = { Enter: Key.ENTER, Tab: Key.TAB, Escape: Key.ESCAPE };
  const wrap = (handle) => ({
    goto: (url) => serial(async () => (await focus(handle), await driver.get(url))),
    reload: () => serial(async () => (await focus(handle), await driver.navigate().refresh())),
    evaluate: async (fn, arg) => {
      const id = `c${seq++}`;
      const start = `const [arg, id] = arguments; const fn = (${fn.toString()});
        (window.__umCalls ??= {})[id] = Promise.resolve().then(() => fn(arg)).then(
          (value) => ({ value: value === undefined ? null : value }),
          (e) => ({ error: String((e && e.stack) || e) }));`;
      await serial(async () => (await focus(handle), await driver.executeScript(start, arg ?? null, id)));
      const collect = `const [id, done] = arguments; const calls = window.__umCalls ?? {};
        if (!calls[id]) done({ error: "the page navigated or closed before the call finished" });
        else calls[id].then((r) => { delete calls[id]; done(r); });`;
      const r = await serial(async () => (await focus(handle), await driver.executeAsyncScript(collect, id)));
      if (r.error) throw new Error(r.error);
      return r.value;
    },
    click: (sel) => serial(async () => (await focus(handle), await (await driver.findElement(By.css(sel))).click())),
    // Like Playwright's fill(): the whole text in one input event. (sendKeys types key by key,
    // about 90 ms a character in WebKitGTK, with the page reacting to every one.)
    fill: (sel, text) =>
      serial(async () => {
        await focus(handle);
        const el = await driver.findElement(By.css(sel));
        await driver.executeScript(
          `const [el, text] = arguments; el.focus(); el.value = text;
           el.dispatchEvent(new InputEvent("input", { bubbles: true, inputType: "insertText", data: text }));`,
          el,
          text,
        );
      }),
    press: (sel, key) =>
      serial(
        async () => (await focus(handle), await (await driver.findElement(By.css(sel))).sendKeys(keys[key] ?? key)),
      ),
    close: () =>
      serial(async () => {
        await focus(handle);
        if ((await driver.getAllWindowHandles()).length === 1) {
          // Closing the last window would end the WebDriver session (and quit the browser):
          // blank it and hand it out again instead.
          await driver.get("about:blank");
          unused = handle;
          return;
        }
        await driver.close();
        current = null;
        await focus((await driver.getAllWindowHandles())[0]);
      }),
  });
  return {
    version: `WebKitGTK ${webkitVersion()}`,
    newPage: () =>
      serial(async () => {
        if (unused) {
          const h = unused;
          unused = null;
          return wrap(h);
        }
        await driver.switchTo().newWindow("window");
        const handle = await driver.getWindowHandle();
        current = handle;
        return wrap(handle);
      }),
    close: async () => {
      // Quitting with no window left fails in WebKitWebDriver; the services go anyway.
      await driver.quit().catch(() => {});
      services.stop();
    },
    pids: () => descendants(services.driverPid),
  };
}

const DRIVERS = { chromium: chromiumDriver, firefox: firefoxDriver, webkit: webkitDriver };

/**
 * Starts `engine` with a fresh profile directory (or `options.profile`). With
 * `options.grantPersistentStorage` the browser grants `navigator.storage.persist()` without a
 * prompt (Chromium, Firefox). `restart()` closes
 * the browser and starts it again on the same profile; `kill()` SIGKILLs every process of the
 * browser at once (a crash or power loss, as far as the browser can tell), then starts it
 * again; `close()` removes the profile it made.
 */
export async function launch(engine, options = {}) {
  const made = !options.profile;
  const profile = options.profile ?? mkdtempSync(join(tmpdir(), `um-${engine}-`));
  let d = await DRIVERS[engine](profile, options);
  const withPage = async (url) => {
    const raw = await d.newPage();
    const page = { ...raw, waitFor: (fn, arg, o) => poll(page, fn, arg, o) };
    if (url) await page.goto(url);
    return page;
  };
  return {
    engine,
    profile,
    get version() {
      return d.version;
    },
    newPage: withPage,
    async restart() {
      await d.close();
      d = await DRIVERS[engine](profile, options);
    },
    async kill() {
      killAll(d.pids());
      await d.close().catch(() => {});
      d = await DRIVERS[engine](profile, options);
    },
    async close() {
      await d.close();
      if (made) rmSync(profile, { recursive: true, force: true });
    },
  };
}
