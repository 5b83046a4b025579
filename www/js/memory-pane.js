// The memory pane: status and countdown, the block for the next prompt, the facts with
// their relevance to the current conversation, the six summary sections, and the tools.
// Memory content is only ever rendered as text.
import { h, icon, keepFocus, replace } from "./dom.js";
import { countdown, fixed2, fullTime, plural, relativeTime } from "./format.js";

/** The most fact rows drawn at once (the rest are reached through the filter). */
const MAX_ROWS = 300;

export const SECTIONS = [
  { group: "user", name: "workContext", label: "Work" },
  { group: "user", name: "personalContext", label: "Personal" },
  { group: "user", name: "topOfMind", label: "Top of mind" },
  { group: "history", name: "recentMonths", label: "Recent months" },
  { group: "history", name: "earlierContext", label: "Earlier" },
  { group: "history", name: "longTermBackground", label: "Long-term background" },
];

/** The facts filter appears above this many facts. */
const FILTER_FROM = 8;

export const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];

const $ = (id) => document.getElementById(id);

function short(text, n = 48) {
  const t = String(text).replace(/\s+/g, " ").trim();
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}

/** A <time> that the periodic refresh keeps saying "2 min ago". */
function timeAgo(iso, prefix = "") {
  return h("time", { datetime: iso, title: fullTime(iso), dataset: { ago: iso, prefix } }, prefix + relativeTime(iso));
}

export function refreshTimes(root = document) {
  for (const t of root.querySelectorAll("time[data-ago]")) {
    t.textContent = (t.dataset.prefix ?? "") + relativeTime(t.dataset.ago);
  }
}

/**
 * Makes a confidence field refuse what is not a number from 0 to 1, worded as the CLI words
 * it: the form then does not submit and the browser shows the message on the field. Never
 * clamped: a typed 2 stored as 1 is a value the user did not give, and nothing says so.
 */
export function checkConfidence(input) {
  const check = () => {
    const raw = input.value.trim();
    const v = Number(raw);
    const bad = input.validity.badInput || (raw !== "" && !(v >= 0 && v <= 1));
    input.setCustomValidity(
      bad ? `Confidence must be a number from 0 to 1 (e.g. 0.8)${raw ? `, got ${raw}` : ""}.` : "",
    );
  };
  input.addEventListener("input", check);
  check();
  return input;
}

/**
 * `{ confidence }` from a field that `checkConfidence` watches, `{}` when it is empty (the
 * library's default), or `null` (and the field says why) when it is refused.
 */
export function confidenceOf(input) {
  if (!input.checkValidity()) {
    input.reportValidity();
    return null;
  }
  return input.value.trim() === "" ? {} : { confidence: Number(input.value) };
}

function categoryOptions(selected) {
  const list = CATEGORIES.includes(selected) || !selected ? CATEGORIES : [...CATEGORIES, selected];
  return list.map((c) => h("option", { value: c, selected: c === selected }, c));
}

/** Enter submits (Shift+Enter: new line), Escape cancels; IME composition is left alone. */
function editorKeys(form, cancel) {
  return (e) => {
    if (e.isComposing || e.keyCode === 229) return;
    if (e.key === "Escape") {
      e.preventDefault();
      cancel();
    } else if (e.key === "Enter" && !e.shiftKey && e.target.tagName === "TEXTAREA") {
      e.preventDefault();
      form.requestSubmit();
    }
  };
}

/**
 * `app` provides: memory (getter), doc, explanation, fresh (Set of ids), options(),
 * and the actions run(label, fn) for error reporting.
 */
export function createMemoryPane(app) {
  const factEditors = new Map();
  const sectionEditors = new Map();

  // ---- facts ------------------------------------------------------------------------

  function factRow(fact, ex) {
    const editor = factEditors.get(fact.id);
    if (editor) return editor;
    const included = ex?.included ?? false;
    const meta = [
      h("span", { class: `cat cat-${CATEGORIES.includes(fact.category) ? fact.category : "other"}` }, fact.category),
    ];
    meta.push(
      h("span", { class: "meta-item", title: "How sure the model (or you) was" }, `conf ${fixed2(fact.confidence)}`),
    );
    if (ex) {
      const opts = app.options();
      meta.push(
        h(
          "span",
          {
            class: "meta-item score",
            title: `Relevance to the current conversation: ${fixed2(opts.similarityWeight)} × similarity ${fixed2(ex.similarity)} + ${fixed2(opts.confidenceWeight)} × confidence ${fixed2(ex.confidence)} = ${fixed2(ex.score)} · ${plural(ex.tokens, "token")}`,
          },
          "score ",
          h(
            "span",
            { class: "score-bar", "aria-hidden": "true" },
            h("span", { style: { width: `${Math.round(Math.max(0, Math.min(1, ex.score)) * 100)}%` } }),
          ),
          h("span", { class: "score-value" }, fixed2(ex.score)),
          h("span", { class: "sim" }, `sim ${fixed2(ex.similarity)}`),
        ),
      );
      if (!included && ex.reason !== "injection disabled")
        meta.push(h("span", { class: "meta-item reason" }, ex.reason));
    }
    const source = fact.source === "manual" ? "added by hand" : fact.source ? `from ${fact.source}` : "";
    const label = short(fact.content);
    return h(
      "li",
      {
        class: `fact${included ? " included" : ""}${app.fresh.has(fact.id) ? " fresh" : ""}`,
        dataset: { id: fact.id },
      },
      h(
        "div",
        { class: "fact-body" },
        h(
          "div",
          { class: "fact-head" },
          h("p", { class: "fact-text" }, fact.content),
          ex
            ? h(
                "span",
                { class: `inj ${included ? "inj-yes" : "inj-no"}`, title: ex.reason },
                included ? icon("check") : null,
                included ? "In prompt" : ex.reason === "injection disabled" ? "Injection off" : "Not in prompt",
              )
            : null,
        ),
        h("div", { class: "fact-meta" }, meta),
        h(
          "div",
          { class: "fact-origin" },
          source,
          source && fact.createdAt ? " · " : "",
          fact.createdAt ? timeAgo(fact.createdAt) : null,
        ),
      ),
      h(
        "div",
        { class: "fact-actions" },
        h(
          "button",
          {
            type: "button",
            class: "icon-btn",
            "aria-label": `Edit fact: ${label}`,
            title: "Edit",
            dataset: { focus: `edit-${fact.id}` },
            onclick: () => editFact(fact),
          },
          icon("edit"),
        ),
        h(
          "button",
          {
            type: "button",
            class: "icon-btn danger",
            "aria-label": `Delete fact: ${label}`,
            title: "Delete",
            dataset: { focus: `delete-${fact.id}` },
            onclick: () => app.deleteFact(fact),
          },
          icon("trash"),
        ),
        h(
          "button",
          {
            type: "button",
            class: "icon-btn danger",
            "aria-label": `Forget fact: ${label}`,
            title: "Forget: delete it and never learn it again",
            onclick: () => app.deleteFact(fact, { forget: true }),
          },
          icon("x"),
        ),
      ),
    );
  }

  function editFact(fact) {
    const content = h("textarea", {
      class: "input",
      rows: "2",
      "aria-label": "Fact",
      value: fact.content,
      dataset: { focus: `fact-input-${fact.id}` },
    });
    const category = h("select", { class: "input", "aria-label": "Category" }, categoryOptions(fact.category));
    const confidence = checkConfidence(
      h("input", {
        class: "input input-num",
        type: "number",
        min: "0",
        max: "1",
        step: "0.01",
        "aria-label": "Confidence",
        value: fixed2(fact.confidence),
      }),
    );
    const close = () => {
      factEditors.delete(fact.id);
      renderFacts();
      document.querySelector(`[data-focus="edit-${CSS.escape(fact.id)}"]`)?.focus();
    };
    const form = h(
      "form",
      {
        class: "fact editing",
        "aria-label": "Edit fact",
        onsubmit: async (e) => {
          e.preventDefault();
          const text = content.value.trim();
          if (!text) return content.focus();
          const conf = confidenceOf(confidence);
          if (!conf) return;
          const ok = await app.run("Saving the fact", () =>
            app.memory.updateFact(fact.id, { content: text, category: category.value, ...conf }),
          );
          if (ok !== undefined) close();
        },
      },
      content,
      h(
        "div",
        { class: "row" },
        category,
        confidence,
        h("span", { class: "spacer" }),
        h("button", { type: "button", class: "btn btn-ghost btn-small", onclick: close }, "Cancel"),
        h("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save"),
      ),
    );
    form.addEventListener("keydown", editorKeys(form, close));
    const li = h("li", { class: "fact-edit-wrap", dataset: { id: fact.id } }, form);
    factEditors.set(fact.id, li);
    renderFacts();
    content.focus();
    content.setSelectionRange(content.value.length, content.value.length);
  }

  function renderFacts() {
    const doc = app.doc;
    const facts = doc?.facts ?? [];
    const ex = new Map((app.explanation?.facts ?? []).map((f, i) => [f.id, { ...f, rank: i }]));
    // Score order (as explain() gives it); facts it does not know yet go last, by confidence.
    const ordered = [...facts].sort((a, b) => {
      const ra = ex.get(a.id)?.rank ?? Infinity;
      const rb = ex.get(b.id)?.rank ?? Infinity;
      return ra !== rb ? ra - rb : b.confidence - a.confidence;
    });
    for (const id of factEditors.keys()) if (!facts.some((f) => f.id === id)) factEditors.delete(id);
    const included = (app.explanation?.facts ?? []).filter((f) => f.included).length;
    $("facts-count").textContent = app.locked ? "–" : facts.length ? `${facts.length} · ${included} in prompt` : "0";
    $("switch-count").textContent = app.locked ? "–" : String(facts.length);
    // A filter once the list gets long (memory holds up to maxFacts, 100 by default).
    const filter = $("facts-filter");
    filter.hidden = facts.length <= FILTER_FROM && !filter.value;
    const q = filter.value.trim().toLowerCase();
    const shown = q ? ordered.filter((f) => `${f.content} ${f.category}`.toLowerCase().includes(q)) : ordered;
    // An imported memory can be far larger than maxFacts: draw the best-ranked rows only.
    const rows = shown.slice(0, MAX_ROWS).map((f) => factRow(f, ex.get(f.id)));
    if (shown.length > MAX_ROWS)
      rows.push(
        h(
          "li",
          { class: "empty-state" },
          `${shown.length - MAX_ROWS} more facts not shown: use the filter to find one.`,
        ),
      );
    keepFocus(() => {
      replace(
        $("facts-list"),
        rows.length
          ? rows
          : h(
              "li",
              { class: "empty-state" },
              app.locked
                ? "Locked: the facts show once the passphrase unlocks them."
                : ordered.length
                  ? "No fact matches the filter."
                  : "No facts yet. Chat about yourself and they appear here after the pause, or add one by hand.",
            ),
      );
    });
  }

  // ---- sections ---------------------------------------------------------------------

  function sectionBlock(s) {
    const editor = sectionEditors.get(s.name);
    if (editor) return editor;
    const sec = app.doc?.[s.group]?.[s.name] ?? { summary: "", updatedAt: "" };
    return h(
      "div",
      { class: `section${app.freshSections.has(s.name) ? " fresh" : ""}`, dataset: { section: s.name } },
      h(
        "div",
        { class: "section-head" },
        h("h4", null, s.label),
        sec.updatedAt ? timeAgo(sec.updatedAt, "updated ") : h("span", { class: "muted small" }, "never updated"),
        h(
          "button",
          {
            type: "button",
            class: "icon-btn",
            "aria-label": `Edit section ${s.label}`,
            title: "Edit",
            dataset: { focus: `section-${s.name}` },
            onclick: () => editSection(s, sec),
          },
          icon("edit"),
        ),
      ),
      sec.summary
        ? h("p", { class: "section-text" }, sec.summary)
        : h("p", { class: "section-text empty" }, app.locked ? "Locked" : "Empty"),
    );
  }

  function editSection(s, sec) {
    const text = h("textarea", { class: "input", rows: "4", "aria-label": `${s.label} summary`, value: sec.summary });
    const close = () => {
      sectionEditors.delete(s.name);
      renderSections();
      document.querySelector(`[data-focus="section-${s.name}"]`)?.focus();
    };
    const form = h(
      "form",
      {
        class: "section editing",
        "aria-label": `Edit section ${s.label}`,
        onsubmit: async (e) => {
          e.preventDefault();
          const ok = await app.run(`Saving ${s.label}`, () => app.memory.updateSection(s.name, text.value.trim()));
          if (ok !== undefined) close();
        },
      },
      h("div", { class: "section-head" }, h("h4", null, s.label)),
      text,
      h(
        "div",
        { class: "row" },
        h("span", { class: "muted small" }, "Enter saves · Shift+Enter new line · Esc cancels"),
        h("span", { class: "spacer" }),
        h("button", { type: "button", class: "btn btn-ghost btn-small", onclick: close }, "Cancel"),
        h("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save"),
      ),
    );
    form.addEventListener("keydown", editorKeys(form, close));
    sectionEditors.set(s.name, form);
    renderSections();
    text.focus();
  }

  function renderSections() {
    keepFocus(() => {
      replace($("sections-user"), SECTIONS.filter((s) => s.group === "user").map(sectionBlock));
      replace($("sections-history"), SECTIONS.filter((s) => s.group === "history").map(sectionBlock));
    });
  }

  // ---- the next prompt --------------------------------------------------------------

  function renderPreview() {
    const ex = app.explanation;
    const opts = app.options();
    const pre = $("preview-block");
    const note = $("preview-note");
    const tokens = $("preview-tokens");
    if (!opts.injectionEnabled) {
      pre.hidden = true;
      note.textContent = "Injection is off: the next prompt gets no memory.";
      tokens.textContent = "off";
      return;
    }
    if (!ex?.block) {
      pre.hidden = true;
      note.textContent = app.locked
        ? "Memory is locked: nothing is injected until its passphrase unlocks it."
        : "Nothing to inject yet: memory is empty.";
      tokens.textContent = "0 tokens";
      return;
    }
    pre.hidden = false;
    pre.textContent = ex.block;
    tokens.textContent = `${plural(ex.tokens, "token")} / ${opts.maxInjectionTokens}`;
    const n = ex.facts.filter((f) => f.included).length;
    note.textContent = `Goes into the system prompt of the next message: the profile and ${plural(n, "fact")} chosen for ${app.hasDraft() ? "this chat and your draft" : "this chat"}.`;
  }

  // ---- status -----------------------------------------------------------------------

  /** The status line, recomputed every tick from status(), options() and the events. */
  function renderStatus() {
    const m = app.memory;
    const box = $("mem-status");
    if (!m) {
      box.dataset.state = app.locked ? "locked" : "opening";
      $("status-title").textContent = app.locked ? "Memory is locked" : "Opening memory…";
      $("status-detail").textContent = app.locked ? "Enter the passphrase under Data to unlock it." : "";
      $("revision").textContent = "";
      $("flush-btn").disabled = true;
      return;
    }
    const st = m.status();
    const opts = app.options();
    const act = app.activity;
    const now = Date.now();
    let state;
    let title;
    let detail = "";
    let progress = null;
    if (st.processing) {
      state = "updating";
      title = "Updating memory…";
      detail = "The model is turning the conversation into profile updates.";
    } else if (st.pending.length && st.nextDueAt) {
      const left = st.nextDueAt - now;
      if (act.kind === "error" && act.at > (act.queuedAt ?? 0)) {
        state = "error";
        title = "Update failed — will retry";
        detail = `${act.message} · retry in ${countdown(left)}`;
      } else {
        state = "queued";
        title = "Queued";
        detail = `Learning from ${st.pending.length === 1 ? "this chat" : plural(st.pending.length, "chat")} in ${countdown(left)}`;
        progress = 1 - Math.max(0, Math.min(1, left / opts.debounceMs));
      }
    } else if (act.kind === "error") {
      state = "error";
      title = act.code === "ABANDONED" ? "Update abandoned" : "Update failed";
      detail = act.message;
    } else if (!opts.enabled) {
      state = "paused";
      title = "Learning paused";
      detail = "New messages are not remembered. Injection still works.";
    } else if (act.kind === "updated" || app.doc?.lastUpdated) {
      state = "updated";
      title = "Up to date";
      const at = act.kind === "updated" ? new Date(act.at).toISOString() : app.doc.lastUpdated;
      detail = act.nothingNew
        ? `Checked ${relativeTime(at, now)} · nothing new to remember`
        : `Updated ${relativeTime(at, now)}${act.summary ? ` · ${act.summary}` : ""}`;
    } else {
      state = "idle";
      title = "Waiting for a conversation";
      detail = `After ${countdown(opts.debounceMs)} of quiet, the chat is summarised into memory.`;
    }
    box.dataset.state = state;
    $("status-title").textContent = title;
    $("status-detail").textContent = detail;
    const bar = $("status-progress");
    bar.hidden = progress === null;
    if (progress !== null) bar.firstElementChild.style.width = `${(progress * 100).toFixed(1)}%`;
    $("flush-btn").disabled = !st.pending.length || st.processing;
    $("revision").textContent = `rev ${st.revision}`;
  }

  const REASONS = {
    extraction: "Learned from a chat",
    addFact: "Fact added",
    updateFact: "Fact edited",
    removeFact: "Fact deleted",
    updateSection: "Summary edited",
    clear: "Memory cleared",
    import: "Memory imported",
    revert: "Reverted",
  };

  /** What one history entry changed, in a few words. */
  function changeSummary(e) {
    const parts = [];
    for (const f of e.added) parts.push(`+ ${f.content}`);
    for (const f of e.removed) parts.push(`− ${f.content}`);
    for (const c of e.changed)
      parts.push(
        c.before.content === c.after.content ? `~ ${c.after.content}` : `${c.before.content} → ${c.after.content}`,
      );
    for (const s of e.sections) parts.push(`${s.name} summary`);
    if (e.forgot?.length) parts.push("forgotten for good");
    return parts.length ? parts.join(" · ") : "no fact or summary changed";
  }

  /** The history: newest first, each with what changed, when, why, and a revert. */
  function renderHistory() {
    const entries = app.history ?? [];
    $("history-count").textContent = app.locked ? "–" : String(entries.length);
    replace(
      $("history-list"),
      entries.length
        ? null
        : h(
            "li",
            { class: "muted small" },
            app.locked ? "Locked: the changes show once unlocked." : "Nothing has changed yet.",
          ),
      ...entries.map((e, i) =>
        h(
          "li",
          { class: "change", dataset: { revision: String(e.revision) } },
          h(
            "div",
            { class: "change-head" },
            h("strong", {}, REASONS[e.reason] ?? e.reason, e.reason === "revert" ? ` to revision ${e.revertedTo}` : ""),
            " ",
            timeAgo(new Date(e.at).toISOString()),
          ),
          h("p", { class: "change-text small" }, changeSummary(e)),
          // Reverting to the revision before an entry undoes it and everything after it.
          h(
            "button",
            {
              type: "button",
              class: "btn btn-ghost btn-small",
              "aria-label": i === 0 ? "Undo the last change" : `Revert to before revision ${e.revision}`,
              onclick: () => app.revert(e.revision - 1),
            },
            i === 0 ? "Undo" : "Revert to before this",
          ),
        ),
      ),
    );
  }

  function renderAll() {
    renderHistory();
    renderFacts();
    renderSections();
    renderPreview();
    renderStatus();
  }

  $("facts-filter").addEventListener("input", () => renderFacts());

  return { renderAll, renderFacts, renderSections, renderPreview, renderStatus, renderHistory };
}
