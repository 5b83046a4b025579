// How bench/longhorizon.mjs decides that a gold answer is in a `<memory>` block: the
// answer is cut into units (dates, words, runs of Chinese characters) and each unit is
// looked for in the block. Dates are compared as dates, whatever form each side writes
// them in, so "2023-05-07" in a gold answer is found in a block that says "7 May 2023",
// "May 7, 2023", "5/7/2023", "2023/05/07", "7.5.2023" or "2023年5月7日". The forms are
// listed in tests/data/README.md; tests/js/longhorizon-data.test.mjs checks each one, and
// the near misses that must not match.

const MONTHS = [
  ["january", "jan"],
  ["february", "feb"],
  ["march", "mar"],
  ["april", "apr"],
  ["may"],
  ["june", "jun"],
  ["july", "jul"],
  ["august", "aug"],
  ["september", "sept", "sep"],
  ["october", "oct"],
  ["november", "nov"],
  ["december", "dec"],
];
const MONTH_OF = new Map(MONTHS.flatMap((names, i) => names.map((n) => [n, i + 1])));
const MONTH_RE = MONTHS.flat()
  .sort((a, b) => b.length - a.length)
  .join("|");
const DAY = String.raw`(\d{1,2})(?:st|nd|rd|th)?`;
const YEAR = String.raw`(\d{4})`;
// Numbers must not run on into other digits: "12024-05-07" and "2024-05-070" hold no date.
const NB = String.raw`(?<![\d])`;
const NA = String.raw`(?![\d])`;
/** Each form: a pattern and how to read (y, m, d) from its groups. Longest forms first. */
const FORMS = [
  // 2024-05-07, 2024-5-7, 2024/05/07, 2024.05.07 (a time may follow: 2024-05-07T10:00Z)
  [new RegExp(`${NB}${YEAR}([-/.])(\\d{1,2})\\2(\\d{1,2})${NA}`, "g"), (g) => [g[1], g[3], g[4]]],
  // 2024年5月7日 / 7号 (full-width digits are folded before matching)
  [new RegExp(`${NB}${YEAR}\\s*年\\s*(\\d{1,2})\\s*月\\s*(\\d{1,2})\\s*[日号號]`, "g"), (g) => [g[1], g[2], g[3]]],
  // 5/7/2024 (month first, as in the US), 7.5.2024 (day first, dotted, as in Germany)
  [new RegExp(`${NB}(\\d{1,2})/(\\d{1,2})/${YEAR}${NA}`, "g"), (g) => [g[3], g[1], g[2]]],
  [new RegExp(`${NB}(\\d{1,2})\\.(\\d{1,2})\\.${YEAR}${NA}`, "g"), (g) => [g[3], g[2], g[1]]],
  // 7 May 2024, 7th May, 2024, 7 of May 2024
  [
    new RegExp(`${NB}${DAY}\\s+(?:of\\s+)?(${MONTH_RE})\\.?,?\\s+${YEAR}${NA}`, "gi"),
    (g) => [g[3], MONTH_OF.get(g[2].toLowerCase()), g[1]],
  ],
  // May 7, 2024, May 7th 2024, Tuesday, May 7, 2024
  [
    new RegExp(`\\b(${MONTH_RE})\\.?\\s+${DAY},?\\s+${YEAR}${NA}`, "gi"),
    (g) => [g[3], MONTH_OF.get(g[1].toLowerCase()), g[2]],
  ],
  // months: 2024年5月, May 2024, 2024-05 (not followed by another -dd), 5/2024
  [new RegExp(`${NB}${YEAR}\\s*年\\s*(\\d{1,2})\\s*月(?!\\s*\\d)`, "g"), (g) => [g[1], g[2], null]],
  [
    new RegExp(`\\b(${MONTH_RE})\\.?,?\\s+(?:of\\s+)?${YEAR}${NA}`, "gi"),
    (g) => [g[2], MONTH_OF.get(g[1].toLowerCase()), null],
  ],
  [new RegExp(`${NB}${YEAR}-(\\d{2})${NA}(?![-/.]\\d)`, "g"), (g) => [g[1], g[2], null]],
  [new RegExp(`(?<![\\d/.])(\\d{1,2})/${YEAR}${NA}`, "g"), (g) => [g[2], g[1], null]],
  // years: 2024, 2024年 (only counted where no longer form covers them)
  [new RegExp(`${NB}(?:19|20)\\d\\d${NA}`, "g"), (g) => [g[0], null, null]],
];

const daysIn = (y, m) => new Date(Date.UTC(y, m, 0)).getUTCDate();

/** Full-width digits and separators as ASCII (２０２４年５月７日 → 2024年5月7日). */
function fold(text) {
  return text.replace(/[\uff10-\uff19\uff0d\uff0f\uff0e]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xfee0));
}

/**
 * The dates written in `text`, each `{ y, m, d, start, end }` (`m`/`d` null for a month or
 * a year), leftmost-longest: a span read as a full date is not read again as a month or a
 * year. An impossible date (month 13, 31 April) is no date at all.
 */
export function findDates(text) {
  const s = fold(text);
  const taken = new Uint8Array(s.length);
  const found = [];
  for (const [re, read] of FORMS) {
    re.lastIndex = 0;
    for (let g; (g = re.exec(s));) {
      const start = g.index;
      const end = start + g[0].length;
      if (taken.subarray(start, end).some(Boolean)) continue;
      const [ys, ms, ds] = read(g);
      const y = Number(ys);
      const m = ms == null ? null : Number(ms);
      const d = ds == null ? null : Number(ds);
      if (m != null && (m < 1 || m > 12)) continue;
      if (d != null && (d < 1 || d > daysIn(y, m))) continue;
      taken.fill(1, start, end);
      found.push({ y, m, d, start, end });
    }
  }
  return found.sort((a, b) => a.start - b.start);
}

/** Whether `date` (from a block) says at least what `gold` says: same year, and the same
 * month and day where the gold answer has them. A block's month does not answer a day. */
export function dateAnswers(gold, date) {
  if (gold.y !== date.y) return false;
  if (gold.m == null) return true;
  if (date.m !== gold.m) return false;
  if (gold.d == null) return true;
  return date.d === gold.d;
}

const STOP = new Set(
  "a an the and or of in on at to for with from by as is was were be been has had have it its this that these those than then now not no yes before after still used my me i you your we our they their he she his her about into over there here".split(
    " ",
  ),
);

/**
 * The units of a gold answer: `{ date }` for each date, `{ word }` for each other word of
 * letters or digits (lower-cased; stopwords dropped; a word keeps inner `:,.'£$%-`, so
 * "1:57:48", "£40,000" and "V5" stay whole), `{ han }` for each run of Chinese characters.
 */
export function answerUnits(answer) {
  const text = fold(answer);
  const units = [];
  let rest = "";
  let at = 0;
  for (const date of findDates(text)) {
    units.push({ date });
    rest += `${text.slice(at, date.start)} `;
    at = date.end;
  }
  rest += text.slice(at);
  for (const m of rest.matchAll(/\p{Script=Han}+/gu)) units.push({ han: m[0] });
  const latin = rest.replace(/\p{Script=Han}+/gu, " ");
  for (const m of latin.matchAll(/[\p{L}\p{N}£$€¥%](?:[\p{L}\p{N}'’:,.£$€¥%-]*[\p{L}\p{N}%])?/gu))
    if (!STOP.has(m[0].toLowerCase())) units.push({ word: m[0].toLowerCase() });
  return units;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Whether one unit of a gold answer is in `block` (`dates`: `findDates(block)`, passed in
 * so a block is parsed once per question). A word matches as a whole word (Chinese
 * characters next to it do not count as part of it: "月薪3.5万" holds "3.5"), also with or
 * without a plural `s`; a run of Chinese characters as a substring. */
export function unitFound(unit, block, dates = findDates(block)) {
  if (unit.date) return dates.some((d) => dateAnswers(unit.date, d));
  if (unit.han) return block.includes(unit.han);
  const w = unit.word;
  const other = w.length > 3 && w.endsWith("s") ? w.slice(0, -1) : `${w}s`;
  return new RegExp(
    `(?<![\\p{Script=Latin}\\p{N}])(?:${escape(w)}|${escape(other)})(?![\\p{Script=Latin}\\p{N}])`,
    "iu",
  ).test(fold(block));
}

/** `{ found, total, dates, datesFound }`: how many of the answer's units are in the block,
 * and of them how many are dates. */
export function answerRecall(answer, block) {
  const units = answerUnits(answer);
  const inBlock = findDates(block);
  const found = units.filter((u) => unitFound(u, block, inBlock));
  return {
    found: found.length,
    total: units.length,
    dates: units.filter((u) => u.date).length,
    datesFound: found.filter((u) => u.date).length,
  };
}
