// Waiting in tests. A test waits for something to happen with `eventually()`, however long it
// takes on a loaded machine; `sleep()` is only for an absence check (nothing must happen
// meanwhile) or for time the code under test measures, and says so in a `fixed wait:` comment
// (tests/js/fixed-waits.test.mjs checks every fixed wait of the suite is one of these).

/** Waits `ms` milliseconds. Only for an *absence* check (nothing must happen meanwhile) or
 * to let time pass that the code under test measures; a test that waits for something to
 * happen uses `eventually()` (tests/js/fixed-waits.test.mjs keeps it so). */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves with the first truthy value of `condition()` (sync or async), polled every 10 ms:
 * a wait for something to happen, as long as it takes on a loaded machine. Rejects naming
 * `what` after `ms` (60 s: far beyond any normal wait, so it only turns a hang into a
 * readable failure before the test's own timeout).
 */
export async function eventually(condition, what = String(condition), ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await condition();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
