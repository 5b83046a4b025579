// The memory as plain text, for the command line and the MCP server: the six summaries with
// their labels, and one line per fact.

/** [group, key, label] of the six summary sections, in reading order. */
export const SECTIONS = [
  ["user", "workContext", "Work"],
  ["user", "personalContext", "Personal"],
  ["user", "topOfMind", "Top of mind"],
  ["history", "recentMonths", "Recent months"],
  ["history", "earlierContext", "Earlier"],
  ["history", "longTermBackground", "Long-term background"],
];

/** `fact_1a2b3c4d [knowledge | 0.90] Writes Go microservices` */
export function factLine(f) {
  return `${f.id} [${f.category} | ${Number(f.confidence).toFixed(2)}] ${f.content}`;
}

/** `Work: …` for every section that has a summary. */
export function sectionLines(doc) {
  return SECTIONS.filter(([g, k]) => doc[g]?.[k]?.summary).map(([g, k, label]) => `${label}: ${doc[g][k].summary}`);
}

/** The facts, most confident first (then oldest first). */
export function byConfidence(facts) {
  return [...facts].sort(
    (a, b) => b.confidence - a.confidence || String(a.createdAt).localeCompare(String(b.createdAt)),
  );
}
