//! Platform services for the engine: clock, timer, token counter, event listeners.

use super::convert::{from_json, set};
use super::error::{js_message, to_js};
use crate::base::time::{Clock, Millis};
use crate::engine::{Event, Scheduler, WeakEngine};
use crate::json::ToJson;
use crate::json::{ArrayWriter, ObjectWriter};
use crate::recall::token_count::{Estimate, TokenCounter};
use crate::Fact;
use js_sys::Function;
use std::cell::{Cell, RefCell};
use wasm_bindgen::JsValue;

/// `Date.now()`.
pub(crate) struct JsClock;

impl Clock for JsClock {
    fn now_ms(&self) -> Millis {
        js_sys::Date::now() as Millis
    }

    fn sleep(&self, ms: Millis) -> crate::base::sync::LocalFuture<'static, ()> {
        Box::pin(super::timer::sleep(ms))
    }
}

/// The queue timer (`super::timer`); calls `processDue()` when it fires.
#[derive(Default)]
pub(crate) struct TimerScheduler {
    timer: RefCell<Option<super::timer::Timeout>>,
    /// Read when the timer fires, not when it is armed: `Engine::open` arms the timer for a
    /// resumed queue before `set_target` can be called.
    target: std::rc::Rc<RefCell<Option<WeakEngine>>>,
}

impl TimerScheduler {
    /// The engine to drive (set once it is open).
    pub(crate) fn set_target(&self, engine: WeakEngine) {
        *self.target.borrow_mut() = Some(engine);
    }
}

impl Scheduler for TimerScheduler {
    fn arm(&self, at: Option<Millis>) {
        // Dropping a gloo Timeout cancels it.
        drop(self.timer.borrow_mut().take());
        let Some(at) = at else { return };
        let delay = at.saturating_sub(js_sys::Date::now() as Millis);
        let target = self.target.clone();
        let timeout = super::timer::after(delay, move || {
            let engine = target.borrow().as_ref().and_then(WeakEngine::upgrade);
            if let Some(engine) = engine {
                wasm_bindgen_futures::spawn_local(async move {
                    // Failures are reported as `error` events by the engine.
                    let _ = engine.process_due().await;
                });
            }
        });
        *self.timer.borrow_mut() = Some(timeout);
    }
}

/// A `countTokens` JS function; falls back to the built-in estimate if it throws or
/// returns something other than a finite number ≥ 0, and for a count asked for while the
/// function is running (it called `inject()` or `explain()`, which count again: calling it
/// once more would recurse without end).
pub(crate) struct JsCounter {
    pub(crate) f: Function,
    pub(crate) running: Cell<bool>,
}

impl TokenCounter for JsCounter {
    fn count(&self, text: &str) -> usize {
        if self.running.replace(true) {
            return Estimate.count(text);
        }
        let n = self.f.call1(&JsValue::NULL, &JsValue::from_str(text)).ok().and_then(|v| v.as_f64());
        self.running.set(false);
        match n {
            Some(n) if n.is_finite() && n >= 0.0 => n.ceil() as usize,
            _ => Estimate.count(text),
        }
    }
}

struct Listener {
    id: u32,
    kind: String,
    f: Function,
}

/// Registered `on(event, listener)` functions.
#[derive(Default)]
pub(crate) struct JsEvents {
    listeners: RefCell<Vec<Listener>>,
    next_id: Cell<u32>,
}

impl JsEvents {
    /// Adds a listener; returns its id for [`JsEvents::remove`].
    pub(crate) fn add(&self, kind: &str, f: Function) -> u32 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.listeners.borrow_mut().push(Listener { id, kind: kind.to_string(), f });
        id
    }

    /// Removes a listener (idempotent).
    pub(crate) fn remove(&self, id: u32) {
        self.listeners.borrow_mut().retain(|l| l.id != id);
    }

    /// Whether a listener for `kind` is registered.
    pub(crate) fn listens(&self, kind: &str) -> bool {
        self.listeners.borrow().iter().any(|l| l.kind == kind)
    }

    /// Removes all listeners.
    pub(crate) fn clear(&self) {
        self.listeners.borrow_mut().clear();
    }
}

impl crate::engine::EventSink for JsEvents {
    fn emit(&self, event: Event) {
        let name = event.name();
        let targets: Vec<Function> = self.listeners.borrow().iter().filter(|l| l.kind == name).map(|l| l.f.clone()).collect();
        if targets.is_empty() {
            return; // an error nobody listens to is dropped, never an unhandled rejection
        }
        let payload = event_to_js(&event);
        for f in targets {
            if let Err(e) = f.call1(&JsValue::NULL, &payload) {
                web_sys::console::error_2(&JsValue::from_str("user-memory: an event listener threw:"), &JsValue::from_str(&js_message(&e)));
            }
        }
    }
}

fn write_facts(out: &mut String, facts: &[Fact]) {
    let mut a = ArrayWriter::new(out);
    for f in facts {
        f.write_json(a.item());
    }
    a.finish();
}

/// The payload of an event as a plain JS object (written as JSON text, then parsed).
fn event_to_js(event: &Event) -> JsValue {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("type", event.name());
    match event {
        Event::Update(u) => {
            o.str("reason", u.reason.as_str()).opt_str("threadId", u.thread_id.as_deref()).u64("revision", u.revision);
            write_facts(o.key("added"), &u.added);
            let mut removed = ArrayWriter::new(o.key("removed"));
            for id in &u.removed {
                removed.str(id);
            }
            removed.finish();
            write_facts(o.key("changed"), &u.changed);
            let mut sections = ArrayWriter::new(o.key("sections"));
            for s in &u.sections {
                sections.str(s.key());
            }
            sections.finish();
            write_facts(o.key("evicted"), &u.evicted);
        }
        Event::Processed(p) => {
            o.str("threadId", &p.thread_id).bool("changed", p.changed).u64("revision", p.revision);
            let mut skipped = ArrayWriter::new(o.key("skipped"));
            for s in &p.skipped {
                let mut x = ObjectWriter::new(skipped.item());
                x.str("path", &s.path).str("reason", &s.reason).str("detail", &s.detail).opt_str("factId", s.fact.as_deref());
                x.finish();
            }
            skipped.finish();
            let mut usage = ObjectWriter::new(o.key("usage"));
            usage
                .u64("promptTokens", p.usage.prompt_tokens)
                .u64("completionTokens", p.usage.completion_tokens)
                .bool("reported", p.usage_reported);
            usage.finish();
            o.u64("proposed", p.proposed as u64).u64("learned", p.learned as u64);
        }
        Event::Error(e) => {
            o.str("code", e.error.code())
                .str("message", &e.error.message())
                .opt_str("threadId", e.thread_id.as_deref())
                .opt_u64("attempt", e.attempt.map(u64::from));
        }
        Event::Queued(q) => {
            o.str("threadId", &q.thread_id).opt_u64("dueAt", q.due_at).u64("pending", q.pending as u64);
        }
        Event::Debug(d) => {
            o.str("code", d.code).str("message", &d.message).opt_str("threadId", d.thread_id.as_deref()).opt_str("reason", d.reason);
        }
    }
    o.finish();
    let obj = from_json(&out);
    if let Event::Error(e) = event {
        set(&obj, "error", &to_js(&e.error));
    }
    obj
}
