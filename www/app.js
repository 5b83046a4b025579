// The demo page: a chat whose every model call carries the user's long-term memory, and a
// live view of that memory. URL parameters (all optional):
//   ?storage=indexeddb|localstorage|memory   (remembered in localStorage as well)
//   ?debounce=300                            quiet time before extraction, in ms (default 30 s)
//   ?agent=name                              memory namespace (default "default")
import { UserMemory } from "/pkg/browser.js";
import { createChat } from "./js/chat.js";
import { loadConfig } from "./js/llm.js";
import { checkConfidence, confidenceOf, createMemoryPane, refreshTimes } from "./js/memory-pane.js";
import { plural } from "./js/format.js";
import { clearNotice, confirmDialog, notice, toast } from "./js/ui.js";

/** The largest memory file the page imports. */
const MAX_IMPORT_BYTES = 5 * 1024 * 1024;

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const STORAGES = ["indexeddb", "localstorage", "memory"];
const STORAGE_NAMES = { indexeddb: "IndexedDB", localstorage: "localStorage", memory: "in memory" };
const PREFS_KEY = "um-demo:prefs";
/** An error message as a sentence. */
const sentence = (m) => {
  const t = String(m ?? "").trim();
  return /[.!?…]$/.test(t) ? t : `${t}.`;
};

function loadPrefs() {
  try {
    return {
      storage: "indexeddb",
      enabled: true,
      injectionEnabled: true,
      ...JSON.parse(localStorage.getItem(PREFS_KEY) ?? "{}"),
    };
  } catch {
    return { storage: "indexeddb", enabled: true, injectionEnabled: true };
  }
}
function savePrefs() {
  try {
    localStorage.setItem(PREFS_KEY, JSON.stringify(prefs));
  } catch {}
}

const prefs = loadPrefs();
if (STORAGES.includes(params.get("storage"))) prefs.storage = params.get("storage");
const debounceParam = Number(params.get("debounce"));
const debounceMs =
  params.has("debounce") && Number.isFinite(debounceParam) && debounceParam > 0 ? debounceParam : undefined;
const agent = params.get("agent") || "default";

/** Shared state and actions for the two panes. */
const app = {
  agent,
  config: { configured: false, model: null },
  memory: null,
  storage: null,
  /** The storage whose memory is encrypted and waits for its passphrase (nothing is open). */
  locked: null,
  doc: null,
  history: [],
  explanation: null,
  opts: null,
  fresh: new Set(),
  freshSections: new Set(),
  activity: { kind: "idle", at: 0, queuedAt: 0 },
  lastUpdateAt: 0,
  options() {
    return (
      app.opts ?? {
        debounceMs: debounceMs ?? 30_000,
        enabled: prefs.enabled,
        injectionEnabled: prefs.injectionEnabled,
        maxInjectionTokens: 2000,
        similarityWeight: 0.6,
        confidenceWeight: 0.4,
      }
    );
  },
  hasDraft: () => chat?.hasDraft() ?? false,
  /** Runs a memory action; on failure shows why and resolves to undefined. */
  async run(label, fn) {
    if (!app.memory) {
      toast(app.locked ? "Memory is locked: enter its passphrase under Data first." : "Memory is still opening.", {
        kind: "error",
      });
      return undefined;
    }
    try {
      return await fn();
    } catch (e) {
      toast(`${label} failed: ${e?.message ?? e}`, { kind: "error" });
      return undefined;
    }
  },
  /** Deletes a fact; with `forget`, extraction will not learn it again (a tombstone). */
  async deleteFact(fact, { forget = false } = {}) {
    // Keep the keyboard user's place: focus moves to the next fact's delete button.
    const rows = [...document.querySelectorAll("#facts-list [data-id]")];
    const i = rows.findIndex((r) => r.dataset.id === fact.id);
    const next = rows[i + 1] ?? rows[i - 1];
    const removed = await app.run(forget ? "Forgetting the fact" : "Deleting the fact", () =>
      app.memory.removeFact(fact.id, { forget }),
    );
    if (!removed) return;
    await refresh();
    const target = next && document.querySelector(`[data-focus="delete-${CSS.escape(next.dataset.id)}"]`);
    (target ?? $("add-fact-btn")).focus();
    // Undo restores that fact with its id and dates (whatever else changed meanwhile) and
    // drops its tombstone.
    const { content, category, confidence, id, createdAt, source } = removed;
    toast(forget ? "Fact forgotten: it will not be learned again." : "Fact deleted.", {
      action: {
        label: "Undo",
        run: () =>
          app.run("Restoring the fact", async () => {
            if (forget) await app.memory.unforget(id);
            await app.memory.addFact({ content, category, confidence, id, createdAt, source });
          }),
      },
    });
  },
  /** Commits the document as it was after `revision` (itself undoable). */
  async revert(revision) {
    if (await app.run("Reverting", () => app.memory.revert(revision))) await refresh();
  },
  onDraftChange: () => scheduleExplain(),
  onConversationChange: () => refreshExplain(),
};

let chat = null;
const pane = createMemoryPane(app);

// ---- reading memory -------------------------------------------------------------------

// Answers that arrive out of order are dropped: a document older than the last one asked
// for, an explanation older than the last one asked for (each with its own counter, so a
// newer explanation never makes a newer document be thrown away).
let docGeneration = 0;
let explainGeneration = 0;
/** Reloads the document and the explanation. */
async function refresh() {
  const m = app.memory;
  if (!m) return;
  const g = ++docGeneration;
  const e = ++explainGeneration;
  try {
    const [doc, explanation, history] = await Promise.all([
      m.get(),
      m.explain(chat?.query() ?? []),
      m.history({ limit: 20 }),
    ]);
    if (g !== docGeneration || m !== app.memory) return;
    app.doc = doc;
    app.history = history;
    // A newer explain() was asked for meanwhile, maybe before this document was read: ask again.
    if (e === explainGeneration) app.explanation = explanation;
    else void refreshExplain();
    app.opts = m.options();
    pane.renderAll();
    // Highlight what an update changed once, not on every later re-render.
    app.fresh.clear();
    app.freshSections.clear();
  } catch (e) {
    if (m === app.memory) toast(`Could not read memory: ${e.message}`, { kind: "error" });
  }
}

async function refreshExplain() {
  const m = app.memory;
  if (!m || !chat) return;
  const g = ++explainGeneration;
  try {
    const explanation = await m.explain(chat.query());
    if (g !== explainGeneration || m !== app.memory) return;
    app.explanation = explanation;
    pane.renderFacts();
    pane.renderPreview();
  } catch {}
}

let explainTimer = 0;
function scheduleExplain() {
  clearTimeout(explainTimer);
  explainTimer = setTimeout(refreshExplain, 120);
}

// ---- opening memory -------------------------------------------------------------------

function describeUpdate(e) {
  const parts = [];
  if (e.added?.length) parts.push(`+${plural(e.added.length, "fact")}`);
  if (e.removed?.length) parts.push(`−${plural(e.removed.length, "fact")}`);
  if (e.changed?.length) parts.push(`${plural(e.changed.length, "fact")} edited`);
  if (e.sections?.length) parts.push(`${plural(e.sections.length, "section")}`);
  if (e.reason === "clear") return "cleared";
  if (e.reason === "import") return "imported";
  return parts.join(", ") || (e.reason === "extraction" ? "nothing new" : "");
}

function subscribe(m) {
  m.on("queued", (e) => {
    app.activity.queuedAt = Date.now();
    if (app.activity.kind === "error" && !e.pending) app.activity.kind = "idle";
    pane.renderStatus();
  });
  m.on("update", (e) => {
    app.lastUpdateAt = Date.now();
    app.activity = {
      kind: "updated",
      at: Date.now(),
      queuedAt: app.activity.queuedAt,
      summary: describeUpdate(e),
      reason: e.reason,
    };
    app.fresh = new Set([...(e.added ?? []).map((f) => f.id), ...(e.changed ?? []).map((f) => f.id)]);
    app.freshSections = new Set(e.sections ?? []);
    refresh();
  });
  m.on("error", (e) => {
    app.activity = {
      kind: "error",
      at: Date.now(),
      queuedAt: app.activity.queuedAt,
      code: e.code,
      message: e.message,
      attempt: e.attempt,
    };
    pane.renderStatus();
  });
}

/** The passphrase of encrypted memory: kept in this tab only, never stored. */
let passphrase = null;
/** The toast of the last refused passphrase, removed once one is accepted. */
let failedToast = null;

async function open(kind) {
  const options = {
    agent,
    storage: kind,
    ...(passphrase && kind !== "memory" ? { encryption: { passphrase } } : {}),
    // Extraction goes through the same server proxy as the chat: no key in the page.
    llm: { baseUrl: "/api/llm", model: app.config.model ?? "unconfigured", timeoutMs: 120_000 },
    enabled: prefs.enabled,
    injectionEnabled: prefs.injectionEnabled,
    ...(debounceMs ? { debounceMs } : {}),
  };
  clearNotice("storage");
  try {
    return { memory: await UserMemory.open(options), kind };
  } catch (e) {
    if (kind === "memory") throw e;
    if (e.code === "STORAGE_UNAVAILABLE") {
      notice(
        `${STORAGE_NAMES[kind]} is not available here: ${sentence(e.message)} Memory is kept in this tab only and is lost on reload.`,
        { kind: "warn", id: "storage" },
      );
    } else if (e.code === "CORRUPT_MEMORY") {
      corruptNotice(kind, e);
    } else if (e.code === "DECRYPT_FAILED") {
      // Locked: nothing is opened (an empty stand-in would look like lost memory).
      notice(
        passphrase
          ? `The memory in ${STORAGE_NAMES[kind]} is locked with another passphrase: enter it under Data to unlock it.`
          : `The memory in ${STORAGE_NAMES[kind]} is locked with a passphrase: enter it under Data to unlock it.`,
        { kind: "warn", id: "storage" },
      );
      return { memory: null, kind, locked: true };
    } else {
      notice(`Could not open ${STORAGE_NAMES[kind]}: ${sentence(e.message)} Using in-memory storage instead.`, {
        kind: "error",
        id: "storage",
      });
    }
    return { memory: await UserMemory.open({ ...options, storage: "memory" }), kind: "memory", wanted: kind };
  }
}

function corruptNotice(kind, e) {
  notice(
    `Stored memory cannot be read, and nothing was changed: ${sentence(e.message)} Save the raw data, then reset ${STORAGE_NAMES[kind]} to start over. Meanwhile memory is kept in this tab only.`,
    {
      kind: "error",
      id: "storage",
      actions: [
        {
          label: "Download raw data",
          run: async () => {
            const raw = await UserMemory.inspect({ agent, storage: kind });
            download(`memory-raw-${kind}.json`, JSON.stringify(raw, null, 2));
          },
        },
        {
          label: "Reset storage…",
          run: async () => {
            if (
              !(await confirmDialog({
                title: `Reset ${STORAGE_NAMES[kind]}?`,
                message: "This deletes the unreadable memory and its queue for good.",
                confirmLabel: "Reset",
                danger: true,
              }))
            )
              return;
            await UserMemory.reset({ agent, storage: kind });
            clearNotice("storage");
            await switchStorage(kind);
          },
        },
      ],
    },
  );
}

async function switchStorage(kind) {
  const old = app.memory;
  app.memory = null;
  globalThis.memory = undefined;
  app.doc = app.explanation = null;
  pane.renderStatus();
  if (old) await old.close().catch(() => {});
  let opened;
  try {
    opened = await open(kind);
  } catch (e) {
    notice(`Memory could not be opened: ${e.message}`, { kind: "error", id: "storage" });
    return;
  }
  app.memory = opened.memory;
  app.storage = opened.kind;
  app.locked = opened.locked ? opened.kind : null;
  if (app.locked) app.history = [];
  app.opts = app.memory?.options() ?? null;
  globalThis.memory = app.memory ?? undefined;
  if (app.memory) subscribe(app.memory);
  app.activity = { kind: "idle", at: 0, queuedAt: 0 };
  queueWatch = { busy: false, since: 0, lastTick: Date.now() };
  $("storage-select").value = opened.kind;
  $("storage-name").textContent = STORAGE_NAMES[opened.kind] + (app.locked ? " (locked)" : "");
  document.body.dataset.storage = opened.kind;
  document.body.dataset.locked = String(Boolean(app.locked));
  if (app.locked) $("toggle-encryption").checked = true;
  showEncryption();
  if (app.locked) {
    pane.renderAll();
    chat?.renderComposer();
    return;
  }
  $("toggle-learning").checked = app.opts.enabled;
  $("toggle-injection").checked = app.opts.injectionEnabled;
  chat?.renderComposer();
  await refresh();
}

// ---- controls ---------------------------------------------------------------------------

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Small screens show one pane at a time: `body[data-pane]` says which. */
function showPane(name) {
  document.body.dataset.pane = name;
  for (const tab of document.querySelectorAll(".pane-tab"))
    tab.setAttribute("aria-pressed", String(tab.dataset.pane === name));
}

/** The encryption controls and note for the memory in force. */
function showEncryption() {
  const on = $("toggle-encryption").checked;
  $("passphrase").hidden = $("encrypt-btn").hidden = !on || Boolean(app.opts?.encryption);
  $("toggle-encryption").disabled = Boolean(app.opts?.encryption);
  $("encryption-note").textContent = app.locked
    ? "Locked: this memory is encrypted. Enter its passphrase to unlock it."
    : app.opts?.encryption
      ? "Encrypted (AES-256-GCM, key from your passphrase): storage holds only ciphertext. The passphrase is kept in this tab only."
      : app.storage === "memory"
        ? "In-memory storage is never written anywhere."
        : "Stored as plain text in this browser.";
}

function wireControls() {
  for (const tab of document.querySelectorAll(".pane-tab"))
    tab.addEventListener("click", () => showPane(tab.dataset.pane));
  showPane("chat");
  $("storage-select").addEventListener("change", async (e) => {
    const kind = e.target.value;
    prefs.storage = kind;
    savePrefs();
    if (params.has("storage")) {
      params.set("storage", kind);
      history.replaceState(null, "", `${location.pathname}?${params}`);
    }
    await switchStorage(kind);
    toast(`Memory now in ${STORAGE_NAMES[app.storage]}.`);
  });

  $("toggle-encryption").addEventListener("change", () => showEncryption());
  $("encrypt-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = $("passphrase").value;
    const kind = app.storage === "memory" ? prefs.storage : app.storage;
    if (!value || kind === "memory") return;
    const unlocking = app.locked === kind;
    await app.memory?.close().catch(() => {});
    try {
      // Plain memory is encrypted in place; encrypted memory is only checked against it.
      await UserMemory.encrypt({ agent, storage: kind, encryption: { passphrase: value } });
    } catch (err) {
      failedToast?.remove();
      failedToast = toast(err.code === "DECRYPT_FAILED" ? "Wrong passphrase." : `Encryption failed: ${err.message}`, {
        kind: "error",
      });
      await switchStorage(kind);
      return;
    }
    passphrase = value;
    $("passphrase").value = "";
    // The refusal of an earlier try is no longer true.
    failedToast?.remove();
    failedToast = null;
    await switchStorage(kind);
    toast(unlocking ? "Unlocked." : "Memory is encrypted.");
  });

  $("toggle-learning").addEventListener("change", (e) => {
    prefs.enabled = e.target.checked;
    savePrefs();
    app.memory?.configure({ enabled: prefs.enabled });
    app.opts = app.memory?.options() ?? null;
    pane.renderStatus();
  });
  $("toggle-injection").addEventListener("change", (e) => {
    prefs.injectionEnabled = e.target.checked;
    savePrefs();
    app.memory?.configure({ injectionEnabled: prefs.injectionEnabled });
    app.opts = app.memory?.options() ?? null;
    refreshExplain();
    pane.renderPreview();
  });

  $("flush-btn").addEventListener("click", () => {
    const m = app.memory;
    if (!m) return;
    const run = m.flush();
    pane.renderStatus();
    run.catch(() => {}); // failures arrive as `error` events
  });

  // Add a fact.
  const form = $("add-fact-form");
  checkConfidence($("new-fact-confidence"));
  const toggleAdd = (show) => {
    form.hidden = !show;
    $("add-fact-btn").setAttribute("aria-expanded", String(show));
    if (show) $("new-fact-content").focus();
    else $("add-fact-btn").focus();
  };
  $("add-fact-btn").addEventListener("click", () => toggleAdd(form.hidden));
  $("add-fact-cancel").addEventListener("click", () => toggleAdd(false));
  form.addEventListener("keydown", (e) => {
    if (e.isComposing || e.keyCode === 229) return;
    if (e.key === "Escape") toggleAdd(false);
    if (e.key === "Enter" && !e.shiftKey && e.target.tagName === "TEXTAREA") {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const content = $("new-fact-content").value.trim();
    if (!content) return $("new-fact-content").focus();
    const conf = confidenceOf($("new-fact-confidence"));
    if (!conf) return;
    const fact = await app.run("Adding the fact", () =>
      app.memory.addFact({ content, category: $("new-fact-category").value, ...conf }),
    );
    if (!fact) return;
    $("new-fact-content").value = "";
    toggleAdd(false);
  });

  // Export / import / clear.
  $("export-btn").addEventListener("click", async () => {
    const doc = await app.run("Export", () => app.memory.export());
    if (doc) download("memory.json", `${JSON.stringify(doc, null, 2)}\n`);
  });
  $("import-btn").addEventListener("click", () => $("import-file").click());
  $("import-file").addEventListener("change", async (e) => {
    const file = e.target.files?.[0];
    e.target.value = "";
    if (!file) return;
    // A memory.json is a few KB (100 facts ≈ 20 KB); a file this big is something else, and
    // would make every keystroke re-rank tens of thousands of facts.
    if (file.size > MAX_IMPORT_BYTES) {
      toast(
        `${file.name} is ${(file.size / 1048576).toFixed(1)} MB, too big for a memory file (the limit here is ${MAX_IMPORT_BYTES / 1048576} MB). Nothing changed.`,
        { kind: "error" },
      );
      return;
    }
    const text = await file.text();
    let incoming = null;
    try {
      incoming = JSON.parse(text);
    } catch {}
    const current = app.doc?.facts?.length ?? 0;
    if (incoming && typeof incoming === "object") {
      const n = Array.isArray(incoming.facts) ? incoming.facts.length : 0;
      const ok = await confirmDialog({
        title: `Import ${file.name}?`,
        message: `This replaces the whole memory (${plural(current, "fact")} and the profile) with the file's ${plural(n, "fact")} and profile.`,
        confirmLabel: "Replace memory",
      });
      if (!ok) return;
    }
    // The library validates: a file that is not memory is rejected and nothing changes.
    const doc = await app.run(`Importing ${file.name}`, () => app.memory.import(text));
    if (doc) toast(`Imported ${plural(doc.facts.length, "fact")} from ${file.name}.`, { kind: "ok" });
  });
  $("clear-btn").addEventListener("click", async () => {
    const n = app.doc?.facts?.length ?? 0;
    const ok = await confirmDialog({
      title: "Clear all memory?",
      message: `This removes ${plural(n, "fact")} and all six profile sections from ${STORAGE_NAMES[app.storage]}. Export first if you may want them back.`,
      confirmLabel: "Clear memory",
      danger: true,
    });
    if (!ok) return;
    const done = await app.run("Clearing memory", async () => {
      await app.memory.clear();
      return true;
    });
    if (done) toast("Memory cleared.", { kind: "ok" });
  });
}

// ---- the status tick ----------------------------------------------------------------------

let queueWatch = { busy: false, since: 0, lastTick: 0 };
/**
 * Redraws the status (countdown) and notices a queue that drained without an `update`
 * event: an extraction that finds nothing new commits nothing and emits nothing. A failed
 * entry stays queued until it succeeds or is abandoned (an ABANDONED error), so a queue
 * that drains otherwise was processed.
 */
function tick() {
  const m = app.memory;
  if (m) {
    const st = m.status();
    const busy = st.pending.length > 0 || st.processing;
    const now = Date.now();
    if (busy && !queueWatch.busy) queueWatch.since = queueWatch.lastTick;
    if (!busy && queueWatch.busy) {
      const updated = app.lastUpdateAt >= queueWatch.since;
      const abandoned =
        app.activity.kind === "error" && app.activity.code === "ABANDONED" && app.activity.at >= queueWatch.since;
      if (!updated && !abandoned)
        app.activity = { kind: "updated", at: now, queuedAt: app.activity.queuedAt, nothingNew: true };
    }
    queueWatch.busy = busy;
    queueWatch.lastTick = now;
  }
  pane.renderStatus();
}

// ---- start ------------------------------------------------------------------------------

/** The endpoint chip's dot: green once configured or after an answer, red after a failed call. */
app.onEndpoint = (up, problem) => {
  const chip = $("model-chip");
  chip.classList.toggle("ok", up);
  chip.classList.toggle("down", !up);
  chip.title = up ? "The chat model, reached through the demo server" : `The last model call failed: ${problem}`;
};

function showConfig(config) {
  const chip = $("model-chip");
  chip.classList.toggle("ok", config.configured);
  $("model-name").textContent = config.configured ? `${config.model} · ${config.endpoint}` : "no model";
  $("endpoint-banner").hidden = config.configured;
  $("endpoint-problem").textContent = config.configured ? "" : `(${config.problem})`;
  $("input").placeholder = config.configured
    ? "Message the assistant…"
    : "No model connected — type anyway to see which facts would be injected";
}

async function main() {
  wireControls();
  pane.renderStatus();
  app.config = await loadConfig();
  showConfig(app.config);
  chat = createChat(app);
  await switchStorage(prefs.storage);
  setInterval(tick, 200);
  setInterval(() => refreshTimes(), 10_000);
  document.body.dataset.ready = "true";
}

main().catch((e) => {
  notice(`The demo failed to start: ${e?.message ?? e}`, { kind: "error" });
  console.error(e);
});
