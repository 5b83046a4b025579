//! The leader protocol among simulated tabs (sim.rs): each rule pinned by a scripted
//! scenario, and all of them at once by a property test over random workloads, networks
//! that lose, duplicate, delay and reorder messages, and tabs that freeze, die and close.
//!
//! The oracle is localStorage's own write log: it says which commits and discards really
//! happened, when, and at which revision; every client's results are checked against it.

use super::sim::{Call, Event, Faults, Outcome, Record, Sim, Step, Write, AGENT};
use super::{Answer, Message, Op, Reply, Request, Role, DEADLINE_MARGIN_MS, GIVE_UP_MS, REQUEST_TIMEOUT_MS, SETTLE_MS};
use crate::base::time::Millis;
use crate::json::Value;
use crate::storage::{Slot, Versioned};
use futures::executor::LocalPool;
use proptest::prelude::*;

const DOC: Slot = Slot::Document;

/// What the log says happened to a slot.
#[derive(Debug, Clone, PartialEq)]
enum Happened {
    Commit { rev: u64, value: String },
    Discard,
}

#[derive(Debug, Clone)]
struct Ev {
    at: Millis,
    /// The tab that wrote it.
    by: usize,
    what: Happened,
}

impl Ev {
    fn state(&self) -> Option<Versioned> {
        match &self.what {
            Happened::Commit { rev, value } => Some(Versioned { revision: *rev, value: value.clone() }),
            Happened::Discard => None,
        }
    }
    fn is_value(&self, v: &str) -> bool {
        matches!(&self.what, Happened::Commit { value, .. } if value == v)
    }
}

/// The commits and discards of `slot`, in the order they happened: each flip of the slot's
/// pointer is a commit (of the version it names), each removal of it a discard.
fn history(log: &[Write], slot: Slot) -> Vec<Ev> {
    let pointer = format!("user-memory/{AGENT}/{}", slot.name());
    let mut out = Vec::new();
    for (i, w) in log.iter().enumerate().filter(|(_, w)| w.key == pointer) {
        let what = match &w.value {
            None => Happened::Discard,
            Some(raw) => {
                let p = Value::parse(raw).expect("pointers are JSON");
                let key = p.get("key").and_then(Value::as_str).expect("a pointer names its version");
                let value = log[..i].iter().rev().find(|v| v.key == key).and_then(|v| v.value.clone());
                Happened::Commit {
                    rev: p.get("rev").and_then(Value::as_u64).expect("a pointer has a rev"),
                    value: value.expect("the version was written first"),
                }
            }
        };
        out.push(Ev { at: w.at, by: w.by, what });
    }
    out
}

fn slot_of(call: &Call) -> Slot {
    match call {
        Call::Load(s) | Call::Commit(s, ..) | Call::Discard(s) => *s,
    }
}

/// Whether the call failed saying it may still be carried out (its tab closed meanwhile).
fn may_still(r: &Record) -> bool {
    matches!(&r.outcome, Some(Outcome::Failed(why)) if why.contains("may still be carried out"))
}

fn deadline(r: &Record) -> Millis {
    r.start + GIVE_UP_MS - DEADLINE_MARGIN_MS
}

/// Every client result against the log. `strict`: tabs see each other's writes within
/// [`SETTLE_MS`], as measured in browsers, so the leader's view is the truth: no lost
/// update, each commit written once, every load returns what the slot held at some moment
/// of the call. With slower views (and lost messages) a new leader may not know of the
/// last commits; then each tab's own reads are still monotonic, and the deadline, failure
/// and liveness rules hold.
fn check(sim: &Sim, strict: bool) -> Result<(), String> {
    let log = sim.log();
    let records = sim.records.borrow().clone();
    for slot in [Slot::Document, Slot::Queue] {
        let h = history(&log, slot);
        // No lost update: each commit builds on the one before (a discard restarts at 0).
        let mut rev = 0;
        let mut lost = None;
        for e in &h {
            match &e.what {
                Happened::Commit { rev: r, value } if *r != rev + 1 => {
                    lost.get_or_insert(format!("{value} landed at revision {r} on top of revision {rev}: {h:?}"));
                    rev = *r;
                }
                Happened::Commit { rev: r, .. } => rev = *r,
                Happened::Discard => rev = 0,
            }
        }
        if let (true, Some(why)) = (strict, &lost) {
            return Err(why.clone());
        }
        let mine: Vec<&Record> = records.iter().filter(|r| slot_of(&r.call) == slot).collect();
        for r in &mine {
            let end = r.end.unwrap_or(Millis::MAX);
            match (&r.call, &r.outcome) {
                (Call::Commit(_, _, value), outcome) => {
                    let landed: Vec<&Ev> = h.iter().filter(|e| e.is_value(value)).collect();
                    if strict && landed.len() > 1 {
                        return Err(format!("{value} was written {} times: {h:?} {r:?}", landed.len()));
                    }
                    // A tab may carry out its own call late (its caller still waits), another
                    // tab's only until the deadline its sender set.
                    if let Some(e) = landed.iter().find(|e| e.at < r.start || (e.by != r.tab && e.at > deadline(r))) {
                        return Err(format!("{value} landed at {}, outside its call {} .. deadline {}", e.at, r.start, deadline(r)));
                    }
                    let at = landed.first().map(|e| e.at);
                    match (outcome, at) {
                        (Some(Outcome::Committed(rev)), _)
                            if landed.iter().any(|e| e.at <= end && e.state().map(|v| v.revision) == Some(*rev)) => {}
                        (Some(Outcome::Committed(rev)), _) => {
                            return Err(format!("{value} was answered committed at {rev} but the log says {landed:?}"))
                        }
                        (Some(Outcome::Conflict), Some(t)) if strict => {
                            return Err(format!("{value} landed at {t} but was answered as a conflict at {end}: {h:?} {r:?}"))
                        }
                        (Some(Outcome::Failed(why)), _) if !may_still(r) => {
                            if let Some(e) = landed.iter().find(|e| e.at > end) {
                                return Err(format!("{value} failed at {end} ({why}) and landed later, at {}", e.at));
                            }
                        }
                        _ => {}
                    }
                }
                (Call::Load(_), Some(Outcome::Loaded(got))) if strict => {
                    let before = h.iter().take_while(|e| e.at < r.start).last().and_then(Ev::state);
                    let during = h.iter().filter(|e| e.at >= r.start && e.at <= end).map(Ev::state);
                    if !std::iter::once(before).chain(during).any(|s| s == *got) {
                        return Err(format!(
                            "tab {} loaded {got:?} during {}..{end}, which the slot never held then: {h:?}",
                            r.tab, r.start
                        ));
                    }
                }
                _ => {}
            }
        }
        // Each discard happened at most once per call, within its call and deadline.
        let discards: Vec<&&Record> = mine.iter().filter(|r| matches!(r.call, Call::Discard(_))).collect();
        let mut free: Vec<bool> = vec![true; discards.len()];
        for e in h.iter().filter(|e| e.what == Happened::Discard) {
            // Points matched to intervals greedily, the interval that closes first first.
            // (A tab's own call has no deadline; another's has.)
            let closes = |r: &Record| {
                let end = if may_still(r) { Millis::MAX } else { r.end.unwrap_or(Millis::MAX) };
                if e.by == r.tab {
                    end
                } else {
                    end.min(deadline(r))
                }
            };
            let pick = (0..discards.len())
                .filter(|&i| free[i] && discards[i].start <= e.at && e.at <= closes(discards[i]))
                .min_by_key(|&i| closes(discards[i]));
            match pick {
                Some(i) => free[i] = false,
                None => {
                    return Err(format!(
                        "a discard at {} that no call asked for (a copy served twice, or a late one): {h:?} {discards:?}",
                        e.at
                    ))
                }
            }
        }
        let acked = discards.iter().filter(|r| r.outcome == Some(Outcome::Done)).count();
        let done = h.iter().filter(|e| e.what == Happened::Discard).count();
        if done < acked {
            return Err(format!("{acked} discards answered done, {done} happened"));
        }
        // Each tab's reads are monotonic (while nothing is discarded, and unless a slow view
        // lost an update already): a load returns at least every revision the tab was told
        // of by calls that ended before it began.
        if lost.is_none() && h.iter().all(|e| e.what != Happened::Discard) {
            for r in &mine {
                let Some(Outcome::Loaded(got)) = &r.outcome else { continue };
                let seen = mine
                    .iter()
                    .filter(|o| o.tab == r.tab && o.end.is_some_and(|e| e < r.start))
                    .filter_map(|o| match &o.outcome {
                        Some(Outcome::Loaded(Some(v))) => Some(v.revision),
                        Some(Outcome::Committed(rev)) => Some(*rev),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                if got.as_ref().map_or(0, |v| v.revision) < seen {
                    let own: Vec<&&Record> = mine.iter().filter(|o| o.tab == r.tab).collect();
                    return Err(format!("tab {} loaded {got:?} at {} after it had seen revision {seen}: {h:?} {own:?}", r.tab, r.start));
                }
            }
        }
    }
    // Once the network is healthy again, everything works.
    for r in records.iter().filter(|r| r.probe) {
        match &r.outcome {
            Some(Outcome::Failed(why)) => return Err(format!("tab {} failed after the network healed: {why}", r.tab)),
            None if sim.open_tabs().contains(&r.tab) => return Err(format!("tab {} never finished {:?}", r.tab, r.call)),
            _ => {}
        }
    }
    Ok(())
}

fn quiet() -> Faults {
    Faults::default()
}

fn last(sim: &Sim, tab: usize) -> Record {
    sim.records.borrow().iter().rev().find(|r| r.tab == tab).cloned().expect("the tab made a call")
}

/// Three tabs on a network that delivers everything at once; tab 0 leads.
fn three_tabs(faults: Faults, lag: Millis) -> (LocalPool, std::rc::Rc<Sim>) {
    let mut pool = LocalPool::new();
    let sim = Sim::new(&pool, faults, lag, 7);
    for _ in 0..3 {
        sim.open_tab(Vec::new());
    }
    sim.run(&mut pool, Some(SETTLE_MS + 10));
    assert_eq!([sim.role(0), sim.role(1), sim.role(2)], [Role::Leader, Role::Follower, Role::Follower]);
    (pool, sim)
}

fn request(id: &str, op: Op) -> Message {
    Message::Request(Request { id: id.into(), op, known: [0; Slot::ALL.len()], retry: false, until: None })
}

#[test]
fn a_late_copy_of_an_answered_request_is_answered_again_not_served_again() {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    sim.client(2, vec![Step::Update(DOC, 0)], false);
    sim.run(&mut pool, None);
    // Tab 1's commit on revision 0 is refused: the slot is at 1.
    let stale = request("tab1-99", Op::Commit(DOC, 0, "stale".into()));
    sim.inject(1, &stale);
    sim.run(&mut pool, Some(5));
    // The slot is discarded (back to revision 0), then a copy of the request comes late:
    // served again, it would now be written.
    sim.client(2, vec![Step::Discard(DOC, 0)], false);
    sim.run(&mut pool, None);
    sim.inject(1, &stale);
    sim.run(&mut pool, Some(5));
    let h = history(&sim.log(), DOC);
    assert!(!h.iter().any(|e| e.is_value("stale")), "{h:?}");
    // A discard's copy, after a commit, neither.
    let discard = request("tab1-100", Op::Discard(DOC));
    sim.inject(1, &discard);
    sim.run(&mut pool, Some(5));
    sim.client(2, vec![Step::Update(DOC, 0)], false);
    sim.run(&mut pool, None);
    sim.inject(1, &discard);
    sim.run(&mut pool, Some(5));
    let h = history(&sim.log(), DOC);
    assert!(matches!(h.last().map(|e| &e.what), Some(Happened::Commit { rev: 1, .. })), "tab 2's commit survives: {h:?}");
}

#[test]
fn a_request_that_reaches_the_leader_after_its_deadline_is_not_performed() {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    // The leader's tab hangs for 40 s (a debugger, a frozen background tab), while tab 1
    // sends a commit and tab 2 a load.
    sim.at(0, Event::Freeze(0, 40_000));
    sim.run(&mut pool, Some(1));
    let until = Some(sim.now() + GIVE_UP_MS - DEADLINE_MARGIN_MS);
    sim.inject(
        1,
        &Message::Request(Request {
            id: "tab1-99".into(),
            op: Op::Commit(DOC, 0, "late".into()),
            known: [0; Slot::ALL.len()],
            retry: false,
            until,
        }),
    );
    sim.client(2, vec![Step::Load(DOC, 0)], false);
    sim.run(&mut pool, Some(45_000));
    let r = last(&sim, 2);
    assert!(matches!(&r.outcome, Some(Outcome::Failed(why)) if why.contains("no tab answered")), "{r:?}");
    assert!(r.end.unwrap() >= r.start + GIVE_UP_MS, "it failed only after {GIVE_UP_MS} ms: {r:?}");
    // Thawed, the leader found the commit and ~30 copies of the load waiting: all late.
    assert!(history(&sim.log(), DOC).is_empty(), "nothing was written: {:?}", history(&sim.log(), DOC));
    check(&sim, true).unwrap();
}

#[test]
fn a_waiting_request_is_sent_again_as_soon_as_a_new_leader_announces_itself() {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    sim.at(0, Event::Kill(0));
    sim.client(2, vec![Step::Load(DOC, 1)], false);
    sim.run(&mut pool, None);
    let r = last(&sim, 2);
    assert_eq!(r.outcome, Some(Outcome::Loaded(None)));
    let took = r.end.unwrap() - r.start;
    assert!(took < REQUEST_TIMEOUT_MS / 2, "answered {took} ms after the call: at the new leader's announcement, not at the timeout");
}

/// Tab 0 leads and carries out tab 2's commit, but its answer is lost and it dies; with
/// `then` run before it dies.
fn commit_then_leader_dies(then: impl FnOnce(&mut LocalPool, &Sim)) -> (LocalPool, std::rc::Rc<Sim>) {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    let to_commit = |m: &Message| matches!(m, Message::Reply(Reply { outcome: Ok(Answer::Committed(_)), .. }));
    sim.lose(Box::new(move |from, m| from == 0 && to_commit(m)));
    sim.client(2, vec![Step::Update(DOC, 0)], false);
    sim.run(&mut pool, Some(5));
    assert_eq!(history(&sim.log(), DOC).len(), 1, "the commit landed");
    assert_eq!(last(&sim, 2).outcome, None, "unanswered");
    then(&mut pool, &sim);
    sim.at(0, Event::Kill(0));
    sim.run(&mut pool, None);
    (pool, sim)
}

#[test]
fn a_commit_that_landed_before_its_leader_died_is_answered_committed_by_the_next() {
    let (_, sim) = commit_then_leader_dies(|_, _| {});
    assert_eq!(last(&sim, 2).outcome, Some(Outcome::Committed(1)), "not a conflict: it landed");
    check(&sim, true).unwrap();
}

#[test]
fn it_is_answered_committed_also_when_the_slot_has_moved_on_since() {
    let (_, sim) = commit_then_leader_dies(|pool, sim| {
        sim.client(0, vec![Step::Update(DOC, 0)], false); // the leader's own commit: revision 2
        sim.run(pool, Some(10));
        assert_eq!(history(&sim.log(), DOC).len(), 2);
    });
    assert_eq!(last(&sim, 2).outcome, Some(Outcome::Committed(1)), "it landed at revision 1");
    check(&sim, true).unwrap();
}

#[test]
fn it_is_recognised_by_its_value_where_a_leader_kept_no_record_of_it() {
    // A leader of an older version of the library did not record what it carried out.
    let (_, sim) = commit_then_leader_dies(|_, sim| sim.remove_key(&format!("user-memory/{AGENT}/served")));
    assert_eq!(last(&sim, 2).outcome, Some(Outcome::Committed(1)), "not a conflict: it landed");
    check(&sim, true).unwrap();
}

#[test]
fn a_follower_gives_up_by_the_clock_however_often_new_leaders_announce_themselves() {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    sim.at(0, Event::Freeze(0, 5_000));
    sim.client(1, vec![Step::Load(DOC, 0)], false);
    // Announcements (from tabs that never get to lead, say) cut every wait short.
    for _ in 0..100 {
        sim.inject(2, &Message::Leader);
        sim.run(&mut pool, Some(2));
    }
    sim.run(&mut pool, None);
    let r = last(&sim, 1);
    assert_eq!(r.outcome, Some(Outcome::Loaded(None)), "answered once the leader is back: {r:?}");
}

#[test]
fn a_new_leader_whose_view_lags_waits_for_the_revision_a_tab_has_seen() {
    // Other tabs' writes reach this tab's view 500 ms late, beyond the settling time.
    let (mut pool, sim) = three_tabs(quiet(), 500);
    sim.client(1, vec![Step::Update(DOC, 0)], false);
    sim.run(&mut pool, None);
    assert_eq!(last(&sim, 1).outcome, Some(Outcome::Committed(1)));
    sim.at(0, Event::Close(0));
    sim.client(1, vec![Step::Load(DOC, SETTLE_MS + 10)], false);
    sim.run(&mut pool, None);
    assert_eq!(sim.role(1), Role::Leader);
    let r = last(&sim, 1);
    assert!(matches!(&r.outcome, Some(Outcome::Loaded(Some(v))) if v.revision == 1), "its own commit, not an older view: {r:?}");
    check(&sim, false).unwrap();
}

#[test]
fn after_storage_is_emptied_behind_its_back_the_leader_waits_for_old_revisions_once() {
    let (mut pool, sim) = three_tabs(quiet(), 0);
    sim.client(1, vec![Step::Update(DOC, 0), Step::Update(DOC, 0), Step::Update(DOC, 0)], false);
    sim.run(&mut pool, None);
    sim.clear_storage(); // `localStorage.clear()` on logout
    sim.client(1, vec![Step::Load(DOC, 0)], false);
    sim.run(&mut pool, None);
    let first = last(&sim, 1);
    assert_eq!(first.outcome, Some(Outcome::Loaded(None)));
    assert!(first.end.unwrap() - first.start >= super::CATCH_UP_MS, "the first read waits for revision 3 to show up");
    sim.client(1, vec![Step::Load(DOC, 0)], false);
    sim.run(&mut pool, None);
    let second = last(&sim, 1);
    assert_eq!(second.outcome, Some(Outcome::Loaded(None)));
    assert!(second.end.unwrap() - second.start < 100, "the next one does not wait again: {second:?}");
}

// ───────────────────────── random workloads and failures ─────────────────────────

#[derive(Debug, Clone)]
struct Plan {
    tabs: Vec<Vec<Step>>,
    events: Vec<(Millis, u8, usize, Millis)>,
    faults: Faults,
    lag: Millis,
    seed: u64,
}

fn step(discards: bool) -> impl Strategy<Value = Step> {
    let slot = prop_oneof![3 => Just(Slot::Document), 1 => Just(Slot::Queue)];
    (0u8..12, slot, prop_oneof![Just(0u64), 0u64..200, 0u64..4000]).prop_map(move |(k, slot, think)| match k {
        0..=3 => Step::Load(slot, think),
        11 if discards => Step::Discard(slot, think),
        _ => Step::Update(slot, think),
    })
}

fn plan() -> impl Strategy<Value = Plan> {
    (any::<bool>(), 2usize..5).prop_flat_map(|(slow_views, n)| {
        let tabs = proptest::collection::vec(proptest::collection::vec(step(!slow_views), 1..7), n..=n);
        let freeze = prop_oneof![100u64..3000, 25_000u64..45_000];
        // The first tab leads at first: most events hit it (or the one after it).
        let tab = prop_oneof![2 => 0..2usize, 1 => 0..n + 1];
        let events = proptest::collection::vec((prop_oneof![0u64..3000, 0u64..15_000], 0u8..4, tab, freeze), 0..6);
        let faults = (0u32..300, 0u32..300, 0u64..150, 0u32..50, 1u64..40_000).prop_map(|(loss, dup, max_delay, long, long_max)| Faults {
            loss,
            dup,
            max_delay,
            long,
            long_max,
        });
        let lag = if slow_views { (SETTLE_MS + 1..1500).boxed() } else { (0..SETTLE_MS - 10).boxed() };
        (tabs, events, faults, lag, any::<u64>()).prop_map(|(tabs, events, faults, lag, seed)| Plan { tabs, events, faults, lag, seed })
    })
}

/// Runs `plan`: its tabs and failures, then a healthy network and a reloaded tab, whose
/// calls (and every open tab's) must all succeed.
fn simulate(plan: &Plan) -> Result<(), String> {
    let mut pool = LocalPool::new();
    let sim = Sim::new(&pool, plan.faults, plan.lag, plan.seed);
    for steps in &plan.tabs {
        sim.open_tab(steps.clone());
    }
    let mut heal = 0;
    for &(at, kind, tab, ms) in &plan.events {
        let event = match kind {
            0 => Event::Kill(tab),
            1 => Event::Close(tab),
            _ => Event::Freeze(tab, ms),
        };
        if tab == plan.tabs.len() {
            continue; // "no one": fewer events
        }
        sim.at(at, event);
        heal = heal.max(at + if kind >= 2 { ms } else { 0 });
    }
    sim.run(&mut pool, Some(heal + 1));
    sim.heal();
    let probe = vec![Step::Load(Slot::Document, 0), Step::Update(Slot::Document, 0), Step::Load(Slot::Queue, 0)];
    for tab in sim.open_tabs() {
        sim.client(tab, probe.clone(), true);
    }
    let reloaded = sim.open_tab(Vec::new());
    sim.client(reloaded, probe, true);
    sim.run(&mut pool, None);
    check(&sim, plan.lag < SETTLE_MS)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn tabs_agree_on_storage_whatever_the_network_and_the_tabs_do(plan in plan()) {
        if let Err(why) = simulate(&plan) {
            return Err(TestCaseError::fail(why));
        }
    }
}
