// Finds the browsers the tests drive: an installed Chrome or Chromium, Firefox, and WebKitGTK
// (its WebDriver, GTK's Broadway display server and PyGObject with the WebKit2 4.1 bindings).
// Nothing is downloaded: each engine is taken from an environment variable, PATH or a common
// install location, and scripts/setup.sh installs Debian's packages for what is missing.
//
//   node scripts/browsers.mjs            prints what was found (and what is missing, and why)
//   node scripts/browsers.mjs packages   the Debian packages that would provide the missing engines
import { execFileSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The small WebKitGTK browser the WebKit tests drive (it keeps its data on disk). */
export const WEBKIT_BROWSER = join(ROOT, "tests/helpers/webkit-browser.py");
/** The Python that has Debian's PyGObject (python3-gi), whatever python3 is first on PATH. */
const SYSTEM_PYTHON = "/usr/bin/python3";

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first of `names` found on PATH, else the first existing file of `paths`. */
function locate(names, paths = []) {
  for (const dir of (process.env.PATH ?? "").split(delimiter).filter(Boolean)) {
    for (const name of names) if (executable(join(dir, name))) return join(dir, name);
  }
  return paths.find(executable) ?? null;
}

/** An explicitly configured path must exist: a typo is an error, not a silent fallback. */
function fromEnv(variable) {
  const path = process.env[variable];
  if (!path) return undefined;
  if (!executable(path)) throw new Error(`${variable}=${path} is not an executable file`);
  return path;
}

function chromium() {
  const binary =
    fromEnv("CHROME_PATH") ??
    fromEnv("CHROMIUM_PATH") ??
    locate(
      ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"],
      [
        "/usr/lib/chromium/chromium",
        "/snap/bin/chromium",
        "/opt/google/chrome/chrome",
        "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
        "/Applications/Chromium.app/Contents/MacOS/Chromium",
      ],
    );
  // Without a browser there is no driver either: ask for both (the wasm tests need the driver).
  if (!binary)
    return {
      missing: "no Chrome or Chromium (set CHROME_PATH to its binary)",
      packages: ["chromium", "chromium-driver"],
    };
  // chromedriver is only needed by the wasm tests (wasm-bindgen-test-runner drives it).
  const driver = fromEnv("CHROMEDRIVER") ?? locate(["chromedriver"], ["/usr/lib/chromium/chromedriver"]);
  return { binary, driver, packages: driver ? [] : ["chromium-driver"] };
}

function firefox() {
  const binary =
    fromEnv("FIREFOX_PATH") ?? locate(["firefox-esr", "firefox"], ["/Applications/Firefox.app/Contents/MacOS/firefox"]);
  if (!binary) return { missing: "no Firefox (set FIREFOX_PATH to its binary)", packages: ["firefox-esr"] };
  return { binary, packages: [] };
}

let gi;
/** Whether Debian's python3 can load GTK 3 and WebKit2 4.1 through PyGObject. */
function hasWebKitBindings() {
  gi ??= (() => {
    if (!executable(SYSTEM_PYTHON)) return false;
    try {
      const check =
        "import gi; gi.require_version('Gtk', '3.0'); gi.require_version('WebKit2', '4.1'); from gi.repository import WebKit2";
      execFileSync(SYSTEM_PYTHON, ["-c", check], { stdio: "ignore", timeout: 20_000 });
      return true;
    } catch {
      return false;
    }
  })();
  return gi;
}

function webkit() {
  if (process.platform !== "linux")
    return { missing: "WebKitGTK is Linux-only (Safari's safaridriver is not driven by these tests)", packages: [] };
  const driver = fromEnv("WEBKIT_WEBDRIVER") ?? locate(["WebKitWebDriver"]);
  const broadway = locate(["broadwayd"]);
  const packages = [
    ...(driver ? [] : ["webkit2gtk-driver"]),
    ...(broadway ? [] : ["libgtk-3-bin"]),
    ...(hasWebKitBindings() ? [] : ["gir1.2-webkit2-4.1", "python3-gi"]),
  ];
  if (packages.length) return { missing: `WebKitGTK is incomplete (missing ${packages.join(", ")})`, packages };
  return { driver, broadway, python: SYSTEM_PYTHON, browser: WEBKIT_BROWSER, packages };
}

let found;
/** `{ chromium, firefox, webkit }`: each `{ binary | driver…, packages }` or `{ missing, packages }`. */
export function findBrowsers() {
  found ??= { chromium: chromium(), firefox: firefox(), webkit: webkit() };
  return found;
}

/** Why `engine` cannot run here (a sentence), or `null` when it can. */
export function missingReason(engine) {
  return findBrowsers()[engine].missing ?? null;
}

const warned = new Set();
/**
 * Why the tests of `engine` are skipped here, or `false`. A missing engine is skipped with a
 * loud message; on a Debian CI machine (where scripts/setup.sh installs all three) it is an
 * error instead, so CI can never pass with an engine silently left out.
 */
export function skipReason(engine) {
  const reason = missingReason(engine);
  if (!reason) return false;
  if (process.env.CI && locate(["apt-get"]))
    throw new Error(`${engine}: ${reason}; scripts/setup.sh --all should have installed it`);
  if (!warned.has(engine)) {
    warned.add(engine);
    console.error(`\n!!! ${engine} tests SKIPPED: ${reason}. Run scripts/setup.sh --all, or install it yourself.\n`);
  }
  return `${engine} is not installed: ${reason}`;
}

/** The version a browser reports, for the set-up summary ("Mozilla Firefox 153.8.0esr"). */
export function browserVersion(path) {
  try {
    return execFileSync(path, ["--version"], { encoding: "utf8", timeout: 20_000, stdio: ["ignore", "pipe", "ignore"] })
      .trim()
      .split("\n")[0];
  } catch {
    return "version unknown";
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const all = findBrowsers();
  if (process.argv[2] === "packages") {
    console.log([...new Set(Object.values(all).flatMap((e) => e.packages))].join(" "));
  } else {
    for (const [name, e] of Object.entries(all)) {
      if (e.missing) console.log(`  ${name.padEnd(8)} MISSING: ${e.missing}; its browser tests will be skipped`);
      else if (name === "webkit") console.log(`  ${name.padEnd(8)} ${e.driver} (WebKitGTK ${webkitVersion()})`);
      else
        console.log(
          `  ${name.padEnd(8)} ${e.binary} (${browserVersion(e.binary)})${name === "chromium" && !e.driver ? "; no chromedriver: the wasm tests run in Node only" : ""}`,
        );
    }
  }
}

/** WebKitGTK's version, from the bindings the WebKit tests use. */
export function webkitVersion() {
  try {
    const code =
      "import gi; gi.require_version('WebKit2', '4.1'); from gi.repository import WebKit2 as W; print(f'{W.get_major_version()}.{W.get_minor_version()}.{W.get_micro_version()}')";
    return execFileSync(SYSTEM_PYTHON, ["-c", code], {
      encoding: "utf8",
      timeout: 20_000,
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "unknown";
  }
}
