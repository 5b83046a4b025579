// Small formatting helpers: relative times, numbers, countdowns.

/** "just now", "12 s ago", "2 min ago", "3 h ago", "yesterday", "4 days ago", or a date. */
export function relativeTime(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (!iso || Number.isNaN(t)) return "never";
  const s = Math.round((now - t) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const hrs = Math.floor(m / 60);
  if (hrs < 24) return `${hrs} h ago`;
  const d = Math.floor(hrs / 24);
  if (d === 1) return "yesterday";
  if (d < 30) return `${d} days ago`;
  return new Date(t).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
}

/** A full local date and time, for tooltips. */
export function fullTime(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "" : new Date(t).toLocaleString();
}

/** 0.9 → "0.90". */
export function fixed2(x) {
  return typeof x === "number" && Number.isFinite(x) ? x.toFixed(2) : "–";
}

/** Milliseconds until due → "12 s", "1.4 s", "2 min 5 s". */
export function countdown(ms) {
  if (ms <= 0) return "now";
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}
