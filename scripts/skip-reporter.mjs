// A node:test reporter that writes one JSON line per skipped test or suite
// ({ name, file, reason }), for scripts/test.mjs: a skip whose reason docs/development.md
// does not list fails the run, so a suite cannot go quietly missing (a browser engine or a
// driver that set-up did not install).
import { relative } from "node:path";

export default async function* skips(source) {
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { skip, name, file } = event.data;
    if (skip === undefined || skip === false) continue;
    yield `${JSON.stringify({
      name,
      file: file ? relative(process.cwd(), file) : undefined,
      reason: typeof skip === "string" ? skip : "(no reason given)",
    })}\n`;
  }
}

/**
 * The skip reasons a development guide lists under "## Skipped tests" (each bullet's first
 * `code`, matched exactly): a skip for any other reason fails `npm test`.
 */
export function allowedSkips(markdown) {
  const section = /^## Skipped tests\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(markdown)?.[1] ?? "";
  return new Set([...section.matchAll(/^\* `([^`]+)`/gm)].map((m) => m[1]));
}
