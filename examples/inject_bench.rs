//! inject() natively at 100 … 10 000 facts: the selection without the JS boundary.
//!
//!   cargo run --release --example inject_bench
//!
//! For a profile with the functions kept apart (no LTO inlining across them):
//!   CARGO_PROFILE_RELEASE_DEBUG=true CARGO_PROFILE_RELEASE_LTO=false \\
//!   CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 perf record -g cargo run --release --example inject_bench

// A native benchmark, not shipped in the wasm: std's sort and join are fine here.
#![allow(clippy::disallowed_methods)]
use std::time::Instant;
use user_memory::config::Config;
use user_memory::document::{Document, Fact};
use user_memory::inject::{select, Report};
use user_memory::message::ChatMessage;
use user_memory::relevance::FactIndex;
use user_memory::tokens::Estimate;

const EN: &[&str] = &[
    "kafka",
    "latency",
    "rust",
    "marathon",
    "berlin",
    "coffee",
    "rabbit",
    "team",
    "shanghai",
    "postgres",
    "guitar",
    "vegetarian",
    "python",
    "redis",
    "hiking",
    "novel",
];
const ZH: &[&str] = &["上海", "团队", "延迟", "咖啡", "跑步", "兔子", "服务", "缓存", "音乐", "旅行", "工作", "周末"];
const CATS: &[&str] = &["preference", "knowledge", "context", "behavior", "goal"];

fn facts(n: usize) -> Vec<Fact> {
    let mut seed: u64 = 42;
    let mut next = move |m: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % m
    };
    (0..n)
        .map(|i| {
            let words = 4 + next(9);
            let content = if next(2) == 0 {
                (0..words).map(|_| EN[next(EN.len())]).collect::<Vec<_>>().join(" ")
            } else {
                (0..words.div_ceil(2)).map(|_| ZH[next(ZH.len())]).collect::<String>()
            };
            Fact {
                id: format!("fact_{i:08x}"),
                content: format!("{content} {i}"),
                category: CATS[next(CATS.len())].into(),
                confidence: 0.5 + next(50) as f64 / 100.0,
                created_at: "2026-01-01T00:00:00Z".into(),
                source: "bench".into(),
                extra: Default::default(),
            }
        })
        .collect()
}

/// 16 three-message conversations over the same words as the facts, used in turn.
fn queries() -> Vec<[ChatMessage; 3]> {
    let mut seed: u64 = 7;
    let mut next = move |m: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % m
    };
    (0..16)
        .map(|_| {
            let (a, b, c, d) = (EN[next(EN.len())], ZH[next(ZH.len())], EN[next(EN.len())], ZH[next(ZH.len())]);
            let (e, f) = (EN[next(EN.len())], EN[next(EN.len())]);
            [
                ChatMessage::user(format!("我想优化 {a} {b}的{d}，团队在上海")),
                ChatMessage::assistant(format!("可以先看 {c} 的批量大小和 {d} 命中率。")),
                ChatMessage::user(format!("Also my {e} stopped eating, and I am training for a {f} in Berlin")),
            ]
        })
        .collect()
}

fn main() {
    let queries = queries();
    let mut opts = Config::default().inject;
    opts.now_ms = Some(1_780_000_000_000);
    for n in [100, 500, 2000, 10_000] {
        let mut doc = Document::empty();
        doc.facts = facts(n);
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        let runs = if n >= 10_000 { 800 } else { 3200 };
        let mut times: Vec<f64> = (0..runs)
            .map(|i| {
                let t = Instant::now();
                let block = select(&doc, &index, None, &queries[i % queries.len()], &opts, &Estimate, Report::Block).block;
                assert!(block.contains("<memory>"));
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        // A sync that changes nothing: the pass over the facts every adopted document costs.
        let mut syncs: Vec<f64> = (0..21)
            .map(|_| {
                let t = Instant::now();
                index.sync(&doc.facts);
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        syncs.sort_by(f64::total_cmp);
        println!(
            "{n:>6} facts: inject {:>8.1} µs (median of {runs}, 16 queries in turn), unchanged sync {:>8.1} µs",
            times[runs / 2],
            syncs[10]
        );
    }
}
