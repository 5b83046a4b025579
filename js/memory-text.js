// The memory as plain text, for the command line and the MCP server: the six summaries with
// their labels, and one line per fact. Stored text is printed with its control characters
// escaped (`\x1b`, `\n`, `\u009b`): a fact must not be able to drive the terminal that shows
// it (OSC 52 writes the clipboard, OSC 8 makes links, cursor moves hide lines) or start a
// line of its own that looks like another fact.

/** [group, key, label] of the six summary sections, in reading order. */
export const SECTIONS = [
  ["user", "workContext", "Work"],
  ["user", "personalContext", "Personal"],
  ["user", "topOfMind", "Top of mind"],
  ["history", "recentMonths", "Recent months"],
  ["history", "earlierContext", "Earlier"],
  ["history", "longTermBackground", "Long-term background"],
];

/** The longest fact a person or a model may type in (the CLI's add, the MCP remember tool):
 * a fact is one short sentence; longer text is a document, not a memory. */
export const MAX_FACT_CHARS = 1000;

/** @type {Record<string, string>} */
const ESCAPES = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
// C0 controls, DEL, C1 controls; and the line and paragraph separators, which some terminals
// and every JSON-lines reader take as a line break.
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
const CONTROLS_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/g;

/**
 * `text` with every control character escaped, so it prints as what it is. `keepNewlines`:
 * for output the program itself lays out in lines (the values in it are escaped already).
 * @param {unknown} text
 */
export function terminalSafe(text, { keepNewlines = false } = {}) {
  return String(text).replace(keepNewlines ? CONTROLS_BUT_NEWLINE : CONTROLS, (c) => {
    if (ESCAPES[c]) return ESCAPES[c];
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/**
 * `fact_1a2b3c4d [knowledge | 0.90] Writes Go microservices`
 * @param {import("./index.js").Fact} f
 */
export function factLine(f) {
  return terminalSafe(`${f.id} [${f.category} | ${Number(f.confidence).toFixed(2)}] ${f.content}`);
}

/**
 * `Work: …` for every section that has a summary.
 * @param {import("./index.js").MemoryDocument} doc
 */
export function sectionLines(doc) {
  const groups = /** @type {Record<string, Record<string, { summary?: string }> | undefined>} */ (
    /** @type {unknown} */ (doc)
  );
  return SECTIONS.filter(([g, k]) => groups[g]?.[k]?.summary).map(
    ([g, k, label]) => `${label}: ${terminalSafe(groups[g]?.[k]?.summary)}`,
  );
}

/**
 * The facts, most confident first (then oldest first).
 * @template {{ confidence: number, createdAt?: unknown }} F
 * @param {readonly F[]} facts
 */
export function byConfidence(facts) {
  return [...facts].sort(
    (a, b) => b.confidence - a.confidence || String(a.createdAt).localeCompare(String(b.createdAt)),
  );
}
