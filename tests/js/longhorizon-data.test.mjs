// The long-horizon evaluation set (tests/data/longhorizon.json) holds together, and the
// bench's answer matcher (bench/longhorizon-match.mjs) reads dates in every written form
// and nothing else. Format of the set: tests/data/README.md.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { answerRecall, answerUnits, findDates } from "../../bench/longhorizon-match.mjs";
import { DATA, factsOf, inBlock } from "../../bench/longhorizon.mjs";

/** `answerRecall` without its date counts. */
const recall = (answer, block) => {
  const { found, total } = answerRecall(answer, block);
  return { found, total };
};

const data = JSON.parse(readFileSync(DATA, "utf8"));
const KINDS = ["when", "changed", "current", "recall"];
const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"];
const addDays = (date, n) => new Date(Date.parse(`${date}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);
const isDate = (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && new Date(`${s}T00:00:00Z`).toISOString().startsWith(s);

test("the halves are fixed, disjoint and split by user, each with English, Chinese and mixed users", () => {
  assert.equal(data.format, "user-memory-longhorizon/1");
  const { tune, report } = data.halves;
  assert.equal(new Set([...tune, ...report]).size, tune.length + report.length, "a user in both halves");
  assert.deepEqual([...tune, ...report].sort(), data.users.map((u) => u.id).sort(), "every user in exactly one half");
  assert.ok(data.users.length >= 6);
  for (const [half, ids] of Object.entries(data.halves)) {
    const users = data.users.filter((u) => ids.includes(u.id));
    assert.ok(
      users.every((u) => u.half === half),
      `${half}: a user's own half field disagrees`,
    );
    assert.deepEqual([...new Set(users.map((u) => u.language))].sort(), ["en", "mixed", "zh"], half);
  }
});

test("every user has months of dated sessions, with observations that name a user turn", () => {
  for (const u of data.users) {
    assert.ok(u.sessions.length >= 40, `${u.id}: ${u.sessions.length} sessions`);
    const times = u.sessions.map((s) => Date.parse(s.at));
    assert.ok(
      times.every((t) => Number.isFinite(t)),
      `${u.id}: a session time does not parse`,
    );
    assert.ok(
      times.every((t, i) => i === 0 || t > times[i - 1]),
      `${u.id}: sessions out of order`,
    );
    assert.ok(times.at(-1) - times[0] > 150 * 86_400_000, `${u.id}: under five months of sessions`);
    assert.ok(Date.parse(u.askedAt) > times.at(-1), `${u.id}: questions asked before the last session`);
    const obs = u.sessions.flatMap((s) => s.observations);
    assert.ok(obs.length >= 150, `${u.id}: ${obs.length} observations`);
    for (const s of u.sessions) {
      assert.match(s.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/, `${s.id}: local time with its offset`);
      assert.ok(s.turns.length >= 2 && s.turns.every((t) => ["user", "assistant"].includes(t.role) && t.content));
      for (const o of s.observations) {
        assert.equal(s.turns[o.turn]?.role, "user", `${o.id}: turn ${o.turn} is not a user turn`);
        assert.ok(CATEGORIES.includes(o.category), `${o.id}: category ${o.category}`);
        assert.ok(o.confidence > 0 && o.confidence <= 1, `${o.id}: confidence`);
        assert.ok(o.content.trim(), `${o.id}: empty`);
        if (o.happenedAt) assert.ok(isDate(o.happenedAt), `${o.id}: happenedAt ${o.happenedAt}`);
      }
    }
  }
  const ids = data.users.flatMap((u) => [
    ...u.sessions.map((s) => s.id),
    ...u.sessions.flatMap((s) => s.observations.map((o) => o.id)),
    ...u.questions.map((q) => q.id),
  ]);
  assert.equal(new Set(ids).size, ids.length, "ids are unique across the file");
});

test("relative days in a turn are resolved against the session's local date", () => {
  // A turn that says "yesterday" (昨天) has an observation dated the day before the
  // session, one that says "the day before yesterday" (前天) two days before.
  const WORDS = [
    [/(?<!day before )\byesterday\b|昨天|昨晚/i, -1],
    [/\bday before yesterday\b|前天/i, -2],
  ];
  let checked = 0;
  for (const u of data.users)
    for (const s of u.sessions)
      s.turns.forEach((t, i) => {
        if (t.role !== "user") return;
        for (const [re, days] of WORDS)
          if (re.test(t.content)) {
            checked++;
            const want = addDays(s.at.slice(0, 10), days);
            const dated = s.observations.filter((o) => o.turn === i).map((o) => o.happenedAt);
            assert.ok(dated.includes(want), `${s.id} turn ${i}: wants an event on ${want}, has ${dated}`);
          }
      });
  assert.ok(checked >= 50, `only ${checked} turns with relative days`);
});

test("every question has a kind, a gold answer found in its own evidence, and evidence that exists", () => {
  for (const u of data.users) {
    const obs = new Map(u.sessions.flatMap((s) => s.observations.map((o) => [o.id, { ...o, at: s.at }])));
    for (const o of obs.values())
      for (const id of o.supersedes ?? []) assert.ok(obs.has(id), `${o.id} supersedes unknown ${id}`);
    const kinds = Object.fromEntries(KINDS.map((k) => [k, u.questions.filter((q) => q.kind === k).length]));
    assert.ok(u.questions.length >= 40, `${u.id}: ${u.questions.length} questions`);
    for (const k of KINDS) assert.ok(kinds[k] >= 8, `${u.id}: only ${kinds[k]} ${k} questions`);
    for (const q of u.questions) {
      assert.ok(KINDS.includes(q.kind), `${q.id}: kind ${q.kind}`);
      assert.ok(q.question.trim() && q.answer.trim(), `${q.id}: question and answer`);
      assert.ok(answerUnits(q.answer).length > 0, `${q.id}: the answer "${q.answer}" has nothing to look for`);
      assert.ok(q.evidence.length > 0, `${q.id}: no evidence`);
      for (const id of [...q.evidence, ...(q.stale ?? [])]) assert.ok(obs.has(id), `${q.id}: unknown fact ${id}`);
      assert.ok(!(q.stale ?? []).some((id) => q.evidence.includes(id)), `${q.id}: a fact both evidence and stale`);
      if (q.kind === "when") assert.ok(findDates(q.answer).length === 1, `${q.id}: a "when" answer is one date`);
      // The block that shows every evidence fact with its date answers the question fully.
      const block = q.evidence
        .map((id) => obs.get(id))
        .map((o) => `- [${o.category} | ${o.confidence} | ${o.happenedAt ?? o.at.slice(0, 10)}] ${o.content}`)
        .join("\n");
      const { found, total } = recall(q.answer, block);
      assert.equal(found, total, `${q.id}: "${q.answer}" is not all in its evidence:\n${block}`);
    }
  }
});

test("the bench imports every observation as a dated fact, superseded ones only on request", () => {
  const u = data.users[0];
  const all = factsOf(u);
  assert.equal(
    all.length,
    u.sessions.reduce((n, s) => n + s.observations.length, 0),
  );
  const s = u.sessions.find((s) => s.observations.some((o) => o.happenedAt));
  const o = s.observations.find((o) => o.happenedAt);
  const f = all.find((f) => f.id === o.id);
  assert.equal(f.happenedAt, o.happenedAt);
  assert.equal(Date.parse(f.createdAt), Date.parse(s.at));
  assert.match(f.createdAt, /Z$/);
  assert.equal(f.source, s.id);
  const superseded = new Set(u.sessions.flatMap((s) => s.observations.flatMap((o) => o.supersedes ?? [])));
  assert.ok(superseded.size > 0);
  const current = factsOf(u, { dropSuperseded: true });
  assert.equal(current.length, all.length - superseded.size);
  assert.ok(current.every((f) => !superseded.has(f.id)));
});

test("a date in the gold answer is found in every written form", () => {
  const forms = [
    "2023-05-07",
    "2023-5-7",
    "2023/05/07",
    "2023.05.07",
    "2023-05-07T10:00:00Z",
    "7 May 2023",
    "7th May, 2023",
    "7 of May 2023",
    "May 7, 2023",
    "May 7 2023",
    "Sunday, May 7th 2023",
    "5/7/2023",
    "05/07/2023",
    "7.5.2023",
    "2023年5月7日",
    "2023年05月07日",
    "2023 年 5 月 7 号",
    "２０２３年５月７日",
    "- [context | 0.90 | 2023-05-07] Moved to Bristol",
    "Went hiking (on 7 May 2023).",
  ];
  for (const block of forms) assert.deepEqual(recall("2023-05-07", block), { found: 1, total: 1 }, block);
  // The gold answer may be written in any of the forms too.
  for (const gold of ["7 May 2023", "May 7, 2023", "2023年5月7日"])
    assert.deepEqual(recall(gold, "- [context | 0.90 | 2023-05-07] x"), { found: 1, total: 1 }, gold);
});

test("near misses are not the date", () => {
  const misses = [
    "2023-05-17",
    "2023-05-70",
    "12023-05-07",
    "2023-05-070",
    "2022-05-07",
    "17 May 2023",
    "May 17, 2023",
    "May 7, 2022",
    "7/5/2023", // 5 July in the month-first form
    "15/7/2023",
    "7.6.2023",
    "2023年5月17日",
    "2023年15月7日",
    "5月7日", // no year
    "May 7",
    "7 May",
    "May 2023", // a month does not answer a day
    "2023-05",
    "2023",
    "2023-04-31", // no such day: not even read as 31 April
  ];
  for (const block of misses) assert.deepEqual(recall("2023-05-07", block), { found: 0, total: 1 }, block);
});

test("a month or a year in the gold answer is answered by any date within it", () => {
  for (const block of ["2024-03-12", "12 March 2024", "March 2024", "Mar 2024", "2024年3月", "2024年3月底", "3/2024"])
    assert.equal(recall("March 2024", block).found, 1, block);
  for (const block of ["2024-04-01", "April 2024", "2023-03-12", "15/3/2023"])
    assert.equal(recall("2024-03", block).found, 0, block);
  assert.equal(recall("2022", "- [context | 0.8 | 2022-08-14] x").found, 1);
  assert.equal(recall("2022", "- [context | 0.8 | 2023-08-14] x").found, 0);
});

test("words match whole, with or without a plural, and Chinese runs as substrings", () => {
  assert.deepEqual(answerUnits("now eats fish, was vegetarian"), [
    { word: "eats" },
    { word: "fish" },
    { word: "vegetarian" },
  ]);
  assert.deepEqual(answerUnits("杭州 西湖区, Redis缓存"), [
    { han: "杭州" },
    { han: "西湖区" },
    { han: "缓存" },
    { word: "redis" },
  ]);
  assert.deepEqual(recall("1:57:48", "Ran the Bath Half in 1:57:48"), { found: 1, total: 1 });
  assert.deepEqual(recall("£40,000", "Has saved about £40,000 for a deposit"), { found: 1, total: 1 });
  assert.deepEqual(recall("greyhound", "Adopted two retired greyhounds"), { found: 1, total: 1 });
  assert.deepEqual(recall("cat", "Is allergic to cats"), { found: 1, total: 1 });
  assert.deepEqual(recall("cat", "Loves her catamaran"), { found: 0, total: 1 });
  assert.deepEqual(recall("V5", "climbs V51"), { found: 0, total: 1 });
  // Chinese characters around a number do not make it part of a longer word.
  assert.deepEqual(recall("3.5万 15薪", "月薪3.5万，15薪"), { found: 4, total: 4 });
  assert.deepEqual(recall("年糕", "养了一只叫年糕的橘猫"), { found: 1, total: 1 });
  // The dates of an answer are also counted on their own (the bench's "answer date").
  assert.deepEqual(answerRecall("weekend before May 24, 2023", "- [context | 0.9 | 2023-05-24] x"), {
    found: 1,
    total: 2, // the date and "weekend" ("before" is a stopword)
    dates: 1,
    datesFound: 1,
  });
  assert.deepEqual(recall("深圳南山区", "住在深圳"), { found: 0, total: 1 });
});

test("a fact is in the block only as a whole fact line", () => {
  const block =
    "<memory>\nFacts:\n- [context | 0.90 | 2024-05-18] Moved to Bristol with Sam\n- [goal | 0.70] Wants a dog\n</memory>";
  assert.ok(inBlock(block, "Moved to Bristol with Sam"));
  assert.ok(inBlock(block, "Wants a dog"));
  assert.ok(!inBlock(block, "Moved to Bristol"), "a prefix of a longer fact");
  assert.ok(!inBlock(block, "Bristol with Sam"), "a suffix");
  assert.ok(!inBlock(block, "Wants a dog named Pickle"));
});
