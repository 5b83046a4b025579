//! inject() natively at 100 … 10 000 facts: the selection without the JS boundary.
//!
//!   cargo run --release --example inject_bench

// A native benchmark, not shipped in the wasm: std's sort and join are fine here.
#![allow(clippy::disallowed_methods)]
use std::time::Instant;
use user_memory::config::Config;
use user_memory::document::{Document, Fact};
use user_memory::inject::inject;
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

fn main() {
    let messages = [
        ChatMessage::user("我想优化 kafka 服务的延迟，团队在上海"),
        ChatMessage::assistant("可以先看 consumer 的批量大小和 redis 缓存命中率。"),
        ChatMessage::user("Also my rabbit stopped eating, and I am training for a marathon in Berlin"),
    ];
    let mut opts = Config::default().inject;
    opts.now_ms = Some(1_780_000_000_000);
    for n in [100, 500, 2000, 10_000] {
        let mut doc = Document::empty();
        doc.facts = facts(n);
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        let runs = if n >= 10_000 { 300 } else { 1000 };
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let block = inject(&doc, &index, &messages, &opts, &Estimate);
                assert!(block.contains("<memory>"));
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!("{n:>6} facts: inject {:>8.1} µs (median of {runs})", times[runs / 2]);
    }
}
