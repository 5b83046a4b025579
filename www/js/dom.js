// DOM helpers. Everything that comes from data goes in as text nodes or attribute values:
// there is no way to pass HTML through `h()`.

/**
 * Creates an element. `props`: `class`, `dataset`, `style` (object), `on…` listeners,
 * booleans (`hidden: true`), other attributes as strings. Children: nodes, strings
 * (added as text), arrays, null/false (skipped).
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "innerHTML" || k === "outerHTML") throw new Error("h(): HTML is not accepted");
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "style") Object.assign(el.style, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked" || k === "selected") el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const ICONS = {
  edit: "M4 20h4L18.5 9.5a2.1 2.1 0 0 0-3-3L5 17v3zM13.5 6.5l3 3",
  trash: "M5 7h14M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3",
  plus: "M12 5v14M5 12h14",
  send: "M5 12h13M13 6l6 6-6 6",
  stop: "M7 7h10v10H7z",
  download: "M12 4v11M7 10l5 5 5-5M5 20h14",
  upload: "M12 20V9M7 14l5-5 5 5M5 4h14",
  clear: "M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13",
  bolt: "M13 3L5 14h6l-1 7 8-11h-6z",
  chat: "M5 5h14v10H9l-4 4z",
  check: "M5 12l5 5 9-10",
  x: "M6 6l12 12M18 6L6 18",
  brain:
    "M12 5a3 3 0 0 0-5.6 1.5A3 3 0 0 0 5 12a3 3 0 0 0 2 5 3 3 0 0 0 5 1V5zm0 0a3 3 0 0 1 5.6 1.5A3 3 0 0 1 19 12a3 3 0 0 1-2 5 3 3 0 0 1-5 1",
};

/** A decorative inline SVG icon (hidden from screen readers). */
export function icon(name) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  const path = document.createElementNS(NS, "path");
  path.setAttribute("d", ICONS[name] ?? "");
  svg.append(path);
  return svg;
}

/**
 * Re-renders `fn()` into the page while keeping keyboard focus: the focused element's
 * `data-focus` key is remembered and the element with the same key focused afterwards.
 */
export function keepFocus(fn) {
  const active = document.activeElement;
  const key = active?.dataset?.focus;
  fn();
  if (key && (!active.isConnected || document.activeElement === document.body)) {
    const again = document.querySelector(`[data-focus="${CSS.escape(key)}"]`);
    if (again && again !== document.activeElement) again.focus({ preventScroll: true });
  }
}
