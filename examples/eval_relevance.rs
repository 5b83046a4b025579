//! Quality evaluation of fact selection on labelled sets (format of
//! `shared/data/relevance-sample.json`).
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

// An evaluation tool run natively: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use serde_json::Value;
use std::collections::HashMap;
use user_memory::config::Config;
use user_memory::document::{Document, Fact};
use user_memory::inject::{explain, InjectOptions};
use user_memory::message::ChatMessage;
use user_memory::relevance::{FactIndex, Params};
use user_memory::tokenize::TokenizerOptions;
use user_memory::tokens::Estimate;

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

fn load(path: &str) -> Vec<Persona> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
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
        let e = explain(doc, &index, &case.messages, &opts, &Estimate);
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sweep = args.iter().any(|a| a == "--sweep");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    assert!(!files.is_empty(), "usage: eval_relevance [--sweep] <file.json>…");
    let defaults = Config::default().inject;
    for file in files {
        let sets = load(file);
        let n: usize = sets.iter().map(|p| p.cases.len()).sum();
        let nf: usize = sets.iter().map(|p| p.doc.facts.len()).sum();
        println!("\n## {file}: {} personas, {nf} facts, {n} cases\n", sets.len());
        let groups = ["zh", "en", "mixed", "all"];
        println!("| ranker (recall@15 recall@5 nDCG@15) | zh | en | mixed | all |");
        println!("|---|---|---|---|---|");
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
        let rankers: Vec<(&str, Box<Ranker>)> = vec![
            ("library (explain, defaults)", Box::new(library(Params::default(), defaults))),
            ("seed TF-IDF (sklearn), 0.6/0.4", Box::new(seed_tfidf)),
            ("BM25 CJK tokens, 0.6 norm + 0.4 conf", Box::new(plain_bm25(0.6, 0.4))),
            ("BM25 CJK tokens, pure", Box::new(plain_bm25(1.0, 1e-9))),
        ];
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
