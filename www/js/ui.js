// Toasts, the confirmation dialog and page notices.
import { h, icon } from "./dom.js";

const toasts = () => document.getElementById("toasts");

/**
 * A short message at the bottom of the screen. `kind`: "info" | "ok" | "error".
 * `action`: { label, run } adds a button (e.g. Undo).
 */
export function toast(message, { kind = "info", action, timeoutMs = kind === "error" ? 9000 : 5000 } = {}) {
  const el = h(
    "div",
    { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : "status" },
    h("span", { class: "toast-text" }, message),
  );
  const dismiss = () => {
    el.classList.add("leaving");
    setTimeout(() => el.remove(), 200);
  };
  if (action) {
    el.append(
      h(
        "button",
        {
          type: "button",
          class: "btn btn-ghost btn-small",
          onclick: async () => {
            dismiss();
            await action.run();
          },
        },
        action.label,
      ),
    );
  }
  el.append(h("button", { type: "button", class: "icon-btn", "aria-label": "Dismiss", onclick: dismiss }, icon("x")));
  toasts().append(el);
  setTimeout(dismiss, timeoutMs);
  return el;
}

/**
 * Asks for confirmation in a modal <dialog>; resolves to true or false. Escape and
 * Cancel resolve false; focus starts on Cancel so Enter is never a surprise.
 */
export function confirmDialog({ title, message, confirmLabel = "Confirm", danger = false }) {
  const dialog = document.getElementById("confirm-dialog");
  dialog.querySelector("[data-title]").textContent = title;
  dialog.querySelector("[data-message]").textContent = message;
  const ok = dialog.querySelector("[data-ok]");
  const cancel = dialog.querySelector("[data-cancel]");
  ok.textContent = confirmLabel;
  ok.classList.toggle("btn-danger", danger);
  ok.classList.toggle("btn-primary", !danger);
  return new Promise((resolve) => {
    const done = (value) => {
      ok.onclick = cancel.onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(value);
    };
    ok.onclick = () => done(true);
    cancel.onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
    cancel.focus();
  });
}

/** A notice bar under the header (storage fallback, recovery …). Returns its element. */
export function notice(message, { kind = "info", id, actions = [] } = {}) {
  const box = document.getElementById("notices");
  if (id) box.querySelector(`[data-notice="${CSS.escape(id)}"]`)?.remove();
  const el = h(
    "div",
    {
      class: `notice notice-${kind}`,
      role: kind === "error" ? "alert" : "status",
      dataset: id ? { notice: id } : undefined,
    },
    h("p", null, message),
    h(
      "div",
      { class: "notice-actions" },
      actions.map((a) => h("button", { type: "button", class: "btn btn-small", onclick: a.run }, a.label)),
      h(
        "button",
        { type: "button", class: "icon-btn", "aria-label": "Dismiss notice", onclick: () => el.remove() },
        icon("x"),
      ),
    ),
  );
  box.append(el);
  return el;
}

export function clearNotice(id) {
  document.querySelector(`#notices [data-notice="${CSS.escape(id)}"]`)?.remove();
}
