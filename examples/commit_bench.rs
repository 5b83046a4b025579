//! Commit-path speed of the engine, natively, on a large memory.
//!
//! ```text
//! cargo run --release --example commit_bench                # 10 000 and 20 000 facts
//! cargo run --release --example commit_bench -- 1000 50000  # other sizes
//! ```
//!
//! An engine over the in-memory key-value store (the versioned key swap, as for a JS
//! adapter), with an event sink that keeps every event (as a listener would). Per size: one
//! import of the whole document, then hand edits (addFact, updateFact, removeFact), a
//! fresh read (get), an extraction commit (flush of one queued thread whose scripted
//! reply adds one fact and removes one), and replacing the whole document by another one
//! with all facts changed. Each figure is the median of 5 runs.
//!
//! The same operations through the built npm package: `node bench/commit.mjs`.

// A benchmark run natively: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use futures::executor::block_on;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use user_memory::config::Config;
use user_memory::engine::{Engine, Event, EventSink, ManualScheduler, Parts};
use user_memory::error::Result;
use user_memory::ids::SequentialIds;
use user_memory::json::Value;
use user_memory::llm::{Llm, LlmReply, LlmRequest};
use user_memory::message::{InputMessage, Role};
use user_memory::storage::{MemoryKv, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::time::{Clock, Millis};
use user_memory::tokens::Estimate;

const REPS: usize = 5;

struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as Millis)
    }
    fn sleep(&self, _ms: Millis) -> LocalFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// Replies with whatever was set last.
#[derive(Default)]
struct FixedLlm(RefCell<String>);

impl Llm for FixedLlm {
    fn complete<'a>(&'a self, _: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        let text = self.0.borrow().clone();
        Box::pin(async move { Ok(LlmReply::text(text)) })
    }
}

/// Keeps the events (a listener holding on to what it was given).
#[derive(Default)]
struct Keep(RefCell<Vec<Event>>, Cell<usize>);

impl EventSink for Keep {
    fn emit(&self, event: Event) {
        self.1.set(self.1.get() + 1);
        let mut kept = self.0.borrow_mut();
        kept.clear();
        kept.push(event);
    }
}

fn document(n: usize, tag: &str) -> Value {
    let mut facts = String::new();
    for i in 0..n {
        if i > 0 {
            facts.push(',');
        }
        facts.push_str(&format!(
            r#"{{"id":"fact_{i:08x}","content":"fact number {i} about rust and kafka{tag}","category":"knowledge","confidence":0.{c:02},"createdAt":"2026-01-01T00:00:00Z","source":"bench"}}"#,
            c = 50 + i % 50
        ));
    }
    Value::parse(&format!(r#"{{"version":"1.0","user":{{}},"history":{{}},"facts":[{facts}]}}"#)).expect("valid JSON")
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    xs[xs.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t0 = Instant::now();
    let v = f();
    (t0.elapsed().as_secs_f64() * 1000.0, v)
}

fn fmt(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

fn bench(n: usize) -> Vec<f64> {
    let llm = Rc::new(FixedLlm::default());
    let events = Rc::new(Keep::default());
    let mut config = Config::default();
    config.apply.max_facts = n + 1000;
    config.queue.debounce_ms = 0;
    config.auto_process = false;
    let engine = block_on(Engine::open(Parts {
        config,
        store: Rc::new(VersionedKv::new(Rc::new(MemoryKv::new()), "bench")),
        llm: llm.clone(),
        clock: Rc::new(SystemClock),
        ids: Rc::new(SequentialIds::starting_at(0x8000_0000)),
        counter: Rc::new(Estimate),
        scheduler: Rc::new(ManualScheduler::default()),
        events: events.clone(),
        instance_id: "bench".into(),
        lease_ms: 60_000,
    }))
    .expect("opens");
    let base = document(n, "");
    let others = [document(n, " again"), base.clone()];
    let (t_import, _) = time(|| block_on(engine.import(&base)).expect("imports"));
    let mut added = Vec::new();
    let mut cells: Vec<Vec<f64>> = vec![Vec::new(); 6];
    for i in 0..REPS {
        let fact = Value::parse(&format!(r#"{{"content":"a new fact number {i}","confidence":0.95}}"#)).expect("valid");
        let (t, f) = time(|| block_on(engine.add_fact(&fact)).expect("adds"));
        cells[0].push(t);
        added.push(f.id);
    }
    for (i, id) in added.iter().enumerate() {
        let patch = Value::parse(&format!(r#"{{"content":"an edited fact number {i}"}}"#)).expect("valid");
        cells[1].push(time(|| block_on(engine.update_fact(id, &patch)).expect("updates")).0);
    }
    for id in &added {
        cells[2].push(time(|| block_on(engine.remove_fact(id, false)).expect("removes")).0);
    }
    for _ in 0..REPS {
        cells[3].push(time(|| block_on(engine.get()).expect("reads")).0);
    }
    for i in 0..REPS {
        *llm.0.borrow_mut() = format!(
            r#"{{"newFacts":[{{"content":"Learned thing number {i}","category":"knowledge","confidence":0.9}}],"factsToRemove":["fact_{:08x}"]}}"#,
            i + 1
        );
        let messages = [InputMessage::new(Role::User, format!("Remember thing {i}")), InputMessage::new(Role::Assistant, "Noted.")];
        block_on(engine.observe(&format!("thread-{i}"), &messages).expect("observes").expect("queued")).expect("persists");
        cells[4].push(time(|| block_on(engine.flush()).expect("flushes")).0);
    }
    for i in 0..REPS {
        cells[5].push(time(|| block_on(engine.import(&others[i % 2])).expect("imports")).0);
    }
    assert!(events.1.get() > 0, "events were emitted");
    let mut out = vec![t_import];
    out.extend(cells.into_iter().map(median));
    out
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 20_000] } else { sizes };
    println!("| facts | first import | addFact | updateFact | removeFact | get | extraction commit | replace all |");
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|");
    for n in sizes {
        let r = bench(n);
        println!("| {n} | {} |", r.iter().map(|x| fmt(*x)).collect::<Vec<_>>().join(" | "));
    }
}
