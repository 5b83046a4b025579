//! The debounce queue state machine (docs/design.md#queue-and-failures): timing, claims,
//! outcomes and persistence, driven by hand-passed times (nothing sleeps).

use super::{retry_delay_ms, Claim, FailureOutcome, QueueConfig, QueueFile};
use crate::memory::message::ChatMessage;
use proptest::prelude::*;
use std::collections::BTreeMap;

const S: u64 = 1_000;
const T0: u64 = 1_773_484_200_000;
const ME: &str = "inst-me";
const OTHER: &str = "inst-other";

fn cfg() -> QueueConfig {
    QueueConfig::default()
}

fn msgs(text: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::user(text), ChatMessage::assistant(format!("re: {text}"))]
}

fn obs(q: &mut QueueFile, thread: &str, text: &str, now: u64, version: &str) {
    q.observe(thread, msgs(text), now, version.to_string());
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---- observe and debounce ----------------------------------------------------------------

#[test]
fn three_observes_of_one_thread_within_the_debounce_give_one_entry_with_the_newest_messages() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t1", "a b", T0 + 5 * S, "v2");
    obs(&mut q, "t1", "a b c", T0 + 9 * S, "v3");
    assert_eq!(q.entries.len(), 1);
    let e = q.entry("t1").unwrap();
    assert_eq!(e.messages, msgs("a b c"));
    assert_eq!(e.version, "v3");
    assert_eq!(e.first_at, T0);
    assert_eq!(e.last_at, T0 + 9 * S);
    assert_eq!(q.next_due(&cfg(), ME, T0 + 9 * S), Some(T0 + 39 * S));
}

#[test]
fn empty_queue_has_no_due_time_and_nothing_due() {
    let q = QueueFile::default();
    assert_eq!(q.next_due(&cfg(), ME, T0), None);
    assert!(q.due(&cfg(), ME, T0).is_empty());
    assert!(q.claimable(ME, T0).is_empty());
}

#[test]
fn a_new_entry_is_due_one_debounce_after_its_observe_and_not_before() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    assert_eq!(q.next_due(&cfg(), ME, T0), Some(T0 + 30 * S));
    assert!(q.due(&cfg(), ME, T0 + 30 * S - 1).is_empty());
    assert_eq!(q.due(&cfg(), ME, T0 + 30 * S), ids(&["t1"]));
}

#[test]
fn each_observe_pushes_the_due_time_back_even_across_threads() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    assert_eq!(q.next_due(&cfg(), ME, T0), Some(T0 + 30 * S));
    obs(&mut q, "t2", "b", T0 + 20 * S, "v2");
    // t1 alone would be due at T0+30s; the observe of t2 resets the shared timer.
    assert_eq!(q.next_due(&cfg(), ME, T0 + 20 * S), Some(T0 + 50 * S));
    assert!(q.due(&cfg(), ME, T0 + 30 * S).is_empty());
    obs(&mut q, "t1", "a2", T0 + 40 * S, "v3");
    assert_eq!(q.next_due(&cfg(), ME, T0 + 40 * S), Some(T0 + 70 * S));
    assert!(q.due(&cfg(), ME, T0 + 69 * S).is_empty());
    assert_eq!(q.due(&cfg(), ME, T0 + 70 * S), ids(&["t1", "t2"]));
}

#[test]
fn under_a_continuous_stream_of_one_thread_the_queue_is_still_due_by_first_at_plus_max_wait() {
    let c = cfg();
    let mut q = QueueFile::default();
    let mut now = T0;
    let mut n = 0;
    // Observe every 10 s: the debounce alone (30 s) would never fire.
    while now < T0 + 300 * S {
        obs(&mut q, "t1", &format!("turn {n}"), now, &format!("v{n}"));
        assert!(q.next_due(&c, ME, now).unwrap() <= T0 + 300 * S);
        assert!(q.due(&c, ME, now).is_empty(), "due too early at +{}s", (now - T0) / S);
        now += 10 * S;
        n += 1;
    }
    assert_eq!(now, T0 + 300 * S);
    assert_eq!(q.next_due(&c, ME, now), Some(T0 + 300 * S));
    assert_eq!(q.due(&c, ME, now), ids(&["t1"]));
}

#[test]
fn under_a_continuous_stream_the_stream_keeps_being_processed_every_max_wait() {
    // The stream goes on while (and after) a run of it happens: each run's leftovers wait
    // at most max_wait from the end of that run.
    let c = cfg();
    let mut q = QueueFile::default();
    let mut runs = Vec::new();
    let mut now = T0;
    let mut n = 0;
    let mut running: Option<(String, u64)> = None; // (version, finishes at)
    while now < T0 + 3_600 * S {
        obs(&mut q, "t1", &format!("turn {n}"), now, &format!("v{n}"));
        if let Some((v, end)) = running.clone() {
            if now >= end {
                q.succeed("t1", &v, now);
                running = None;
            }
        }
        if running.is_none() && !q.due(&c, ME, now).is_empty() {
            let got = q.claim(&ids(&["t1"]), ME, now, 120 * S);
            runs.push(now);
            running = Some((got[0].1.clone(), now + 20 * S));
        }
        now += 10 * S;
        n += 1;
    }
    assert!(runs.len() >= 10, "only {} runs in an hour", runs.len());
    for w in runs.windows(2) {
        assert!(w[1] - w[0] <= 20 * S + 300 * S + 10 * S, "gap {}s", (w[1] - w[0]) / S);
    }
}

#[test]
fn one_quiet_thread_is_not_starved_by_another_busy_thread() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "quiet", "once", T0, "q1");
    let mut now = T0 + 5 * S;
    let mut n = 0;
    while now < T0 + 300 * S {
        obs(&mut q, "busy", "x", now, &format!("b{n}"));
        assert!(q.due(&c, ME, now).is_empty());
        now += 10 * S;
        n += 1;
    }
    assert_eq!(q.next_due(&c, ME, T0 + 295 * S), Some(T0 + 300 * S));
    // The whole group is due, oldest first.
    assert_eq!(q.due(&c, ME, T0 + 300 * S), ids(&["quiet", "busy"]));
}

#[test]
fn two_threads_give_two_due_entries_processed_together_oldest_first() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "b", "first", T0, "v1");
    obs(&mut q, "a", "second", T0 + 10 * S, "v2");
    let due = q.due(&c, ME, T0 + 40 * S);
    assert_eq!(due, ids(&["b", "a"]));
    let claimed = q.claim(&due, ME, T0 + 40 * S, 60 * S);
    assert_eq!(claimed, vec![("b".into(), "v1".into()), ("a".into(), "v2".into())]);
    // Both in progress for me: nothing due until they finish or their claims run out.
    assert_eq!(q.next_due(&c, ME, T0 + 41 * S), Some(T0 + 100 * S));
    assert!(q.due(&c, ME, T0 + 41 * S).is_empty());
    q.succeed("b", "v1", T0 + 45 * S);
    q.succeed("a", "v2", T0 + 50 * S);
    assert!(q.entries.is_empty());
}

#[test]
fn custom_small_timings_are_honoured() {
    let c = QueueConfig { debounce_ms: 150, max_wait_ms: 400, max_attempts: 2 };
    let mut q = QueueFile::default();
    obs(&mut q, "t", "a", 1_000, "v1");
    obs(&mut q, "t", "b", 1_100, "v2");
    obs(&mut q, "t", "c", 1_200, "v3");
    assert_eq!(q.next_due(&c, ME, 1_200), Some(1_350));
    obs(&mut q, "t", "d", 1_300, "v4");
    assert_eq!(q.next_due(&c, ME, 1_300), Some(1_400)); // max wait: 1000 + 400
}

// ---- claims --------------------------------------------------------------------------------

#[test]
fn a_live_foreign_claim_hides_the_entry_and_next_due_reports_the_claim_expiry() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    let got = q.claim(&ids(&["t1"]), OTHER, T0 + 30 * S, 60 * S);
    assert_eq!(got, vec![("t1".into(), "v1".into())]);
    let now = T0 + 31 * S;
    assert!(q.due(&c, ME, now).is_empty());
    assert!(q.claimable(ME, now).is_empty());
    assert_eq!(q.next_due(&c, ME, now), Some(T0 + 90 * S));
    // Nor can I claim it.
    assert!(q.claim(&ids(&["t1"]), ME, now, 60 * S).is_empty());
    assert_eq!(q.entry("t1").unwrap().claim.as_ref().unwrap().owner, OTHER);
}

#[test]
fn an_expired_foreign_claim_counts_as_no_claim_so_a_survivor_takes_over() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    q.claim(&ids(&["t1"]), OTHER, T0 + 30 * S, 60 * S);
    let expiry = T0 + 90 * S;
    assert!(q.due(&c, ME, expiry - 1).is_empty());
    // At `until` the claim is void (live means until > now).
    assert_eq!(q.due(&c, ME, expiry), ids(&["t1"]));
    assert_eq!(q.claimable(ME, expiry), ids(&["t1"]));
    assert_eq!(q.next_due(&c, ME, expiry), Some(T0 + 30 * S));
    let got = q.claim(&ids(&["t1"]), ME, expiry, 60 * S);
    assert_eq!(got, vec![("t1".into(), "v1".into())]);
    assert_eq!(q.entry("t1").unwrap().claim, Some(Claim { owner: ME.into(), until: expiry + 60 * S }));
}

#[test]
fn my_own_live_claim_is_in_progress_never_due_and_in_next_due_only_by_its_expiry() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t2", "b", T0 + 40 * S, "v2");
    q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 60 * S);
    // t2's debounce comes first, and t1's old first_at does not pull the group's max-wait
    // forward.
    assert_eq!(q.next_due(&c, ME, T0 + 41 * S), Some(T0 + 70 * S));
    assert_eq!(q.due(&c, ME, T0 + 70 * S), ids(&["t2"]));
    // For the other instance, my claim is foreign: it learns when it expires.
    assert_eq!(q.next_due(&c, OTHER, T0 + 41 * S), Some(T0 + 70 * S));
    assert_eq!(q.next_due(&c, OTHER, T0 + 80 * S), Some(T0 + 70 * S));
    q.succeed("t2", "v2", T0 + 80 * S);
    assert_eq!(q.next_due(&c, OTHER, T0 + 80 * S), Some(T0 + 90 * S));
    // My own claim on t1 is still live: not due, but its expiry is a due time (had my
    // settle write failed, the entry would be picked up again then, not forgotten).
    assert!(q.due(&c, ME, T0 + 80 * S).is_empty());
    assert_eq!(q.next_due(&c, ME, T0 + 80 * S), Some(T0 + 90 * S));
    assert_eq!(q.due(&c, ME, T0 + 90 * S), ids(&["t1"]));
}

#[test]
fn claim_skips_gone_threads_and_duplicates_and_renews_my_own() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    let got = q.claim(&ids(&["t1", "nope", "t1"]), ME, T0, 10 * S);
    assert_eq!(got, vec![("t1".into(), "v1".into())]);
    let got = q.claim(&ids(&["t1"]), ME, T0 + 5 * S, 10 * S);
    assert_eq!(got, vec![("t1".into(), "v1".into())]);
    assert_eq!(q.entry("t1").unwrap().claim.as_ref().unwrap().until, T0 + 15 * S);
}

#[test]
fn claimable_ignores_timing_but_not_foreign_claims() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t2", "b", T0 + S, "v2");
    obs(&mut q, "t3", "c", T0 + 2 * S, "v3");
    q.claim(&ids(&["t2"]), OTHER, T0 + 2 * S, 60 * S);
    q.claim(&ids(&["t3"]), ME, T0 + 2 * S, 60 * S);
    q.fail("t3", "v3", "LLM_ERROR", T0 + 3 * S, &c); // t3 now in backoff
    assert!(q.due(&c, ME, T0 + 3 * S).is_empty());
    assert_eq!(q.claimable(ME, T0 + 3 * S), ids(&["t1", "t3"]));
}

#[test]
fn release_frees_my_claims_at_once_and_leaves_others() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t2", "b", T0, "v2");
    q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 600 * S);
    q.claim(&ids(&["t2"]), OTHER, T0 + 30 * S, 600 * S);
    q.release(ME);
    assert_eq!(q.entry("t1").unwrap().claim, None);
    assert_eq!(q.entry("t2").unwrap().claim.as_ref().unwrap().owner, OTHER);
    // Another instance can take t1 right away, long before the lease would have ended.
    assert_eq!(q.due(&c, OTHER, T0 + 31 * S), ids(&["t1"]));
    assert_eq!(q.claim(&ids(&["t1"]), OTHER, T0 + 31 * S, 60 * S).len(), 1);
}

#[test]
fn renew_extends_only_a_claim_the_instance_still_holds() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t2", "b", T0, "v2");
    obs(&mut q, "t3", "c", T0, "v3");
    q.claim(&ids(&["t1", "t3"]), ME, T0, 15 * S);
    q.claim(&ids(&["t2"]), OTHER, T0, 15 * S);
    // Also after it ran out, as long as nobody took it.
    assert!(q.renew("t1", ME, T0 + 20 * S, 15 * S));
    assert_eq!(q.entry("t1").unwrap().claim, Some(Claim { owner: ME.into(), until: T0 + 35 * S }));
    assert!(!q.renew("t2", ME, T0 + 5 * S, 15 * S), "another instance's claim");
    assert_eq!(q.entry("t2").unwrap().claim.as_ref().unwrap().until, T0 + 15 * S, "left as it was");
    q.release(ME);
    assert!(!q.renew("t3", ME, T0 + 5 * S, 15 * S), "released (or re-created after someone else processed it)");
    assert!(!q.renew("gone", ME, T0 + 5 * S, 15 * S));
    // An expired claim taken by another instance is lost for good.
    q.claim(&ids(&["t1"]), OTHER, T0 + 40 * S, 15 * S);
    assert!(!q.renew("t1", ME, T0 + 41 * S, 15 * S));
}

#[test]
fn observe_while_claimed_keeps_the_claim_and_first_at() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 60 * S);
    obs(&mut q, "t1", "a b", T0 + 35 * S, "v2");
    let e = q.entry("t1").unwrap();
    assert_eq!(e.claim.as_ref().unwrap().owner, ME);
    assert_eq!(e.first_at, T0);
    assert_eq!(e.last_at, T0 + 35 * S);
    assert_eq!(e.version, "v2");
}

// ---- succeed -------------------------------------------------------------------------------

#[test]
fn succeed_with_the_claimed_version_removes_the_entry() {
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    let got = q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 60 * S);
    q.succeed("t1", &got[0].1, T0 + 40 * S);
    assert!(q.entry("t1").is_none());
    assert_eq!(q.next_due(&cfg(), ME, T0 + 40 * S), None);
    q.succeed("t1", "v1", T0 + 41 * S); // already gone: no-op
    assert!(q.entries.is_empty());
}

#[test]
fn succeed_after_a_newer_observe_keeps_the_entry_with_the_new_messages_waiting_from_now() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    obs(&mut q, "t2", "b", T0 + 10 * S, "w1");
    q.claim(&ids(&["t1"]), ME, T0 + 40 * S, 60 * S);
    obs(&mut q, "t1", "a b", T0 + 45 * S, "v2");
    q.succeed("t1", "v1", T0 + 50 * S);
    let e = q.entry("t1").unwrap();
    assert_eq!(e.messages, msgs("a b"));
    assert_eq!(e.version, "v2");
    assert_eq!(e.claim, None);
    assert_eq!(e.first_at, T0 + 50 * S);
    assert_eq!(e.last_at, T0 + 45 * S);
    // It moved behind t2, which has waited longer.
    assert_eq!(q.entries.iter().map(|e| e.thread_id.as_str()).collect::<Vec<_>>(), ["t2", "t1"]);
    // Group: max(last_at)=45 s → +30 s; min(first_at)=10 s → +300 s.
    assert_eq!(q.next_due(&c, ME, T0 + 50 * S), Some(T0 + 75 * S));
    assert_eq!(q.due(&c, ME, T0 + 75 * S), ids(&["t2", "t1"]));
}

// ---- fail, retry, abandon ----------------------------------------------------------------

#[test]
fn retry_delay_doubles_from_30s_and_is_capped_at_15_minutes() {
    let secs: Vec<u64> = (1..=8).map(|a| retry_delay_ms(a) / S).collect();
    assert_eq!(secs, [30, 60, 120, 240, 480, 900, 900, 900]);
    assert_eq!(retry_delay_ms(0), 30 * S);
    assert_eq!(retry_delay_ms(40), 900 * S);
    assert_eq!(retry_delay_ms(u32::MAX), 900 * S);
}

#[test]
fn fail_schedules_retries_30s_60s_120s_and_abandons_at_max_attempts() {
    let c = QueueConfig { max_attempts: 5, ..cfg() };
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    let mut now = T0 + 30 * S;
    let mut outcomes = Vec::new();
    loop {
        assert_eq!(q.due(&c, ME, now), ids(&["t1"]), "at +{}s", (now - T0) / S);
        let got = q.claim(&ids(&["t1"]), ME, now, 60 * S);
        assert_eq!(got.len(), 1);
        let out = q.fail("t1", "v1", "LLM_ERROR", now + S, &c);
        outcomes.push(out);
        match out {
            FailureOutcome::Retry { attempt, retry_at } => {
                let e = q.entry("t1").unwrap();
                assert_eq!(e.attempts, attempt);
                assert_eq!(e.claim, None);
                assert_eq!(e.last_error.as_deref(), Some("LLM_ERROR"));
                assert_eq!(e.retry_at, Some(retry_at));
                assert_eq!(retry_at, now + S + retry_delay_ms(attempt));
                assert_eq!(q.next_due(&c, ME, now + S), Some(retry_at));
                assert!(q.due(&c, ME, retry_at - 1).is_empty());
                now = retry_at;
            }
            _ => break,
        }
    }
    let t = T0 + 30 * S;
    assert_eq!(
        outcomes,
        [
            FailureOutcome::Retry { attempt: 1, retry_at: t + S + 30 * S },
            FailureOutcome::Retry { attempt: 2, retry_at: t + 2 * S + 90 * S },
            FailureOutcome::Retry { attempt: 3, retry_at: t + 3 * S + 210 * S },
            FailureOutcome::Retry { attempt: 4, retry_at: t + 4 * S + 450 * S },
            FailureOutcome::Abandoned { attempt: 5 },
        ]
    );
    assert!(q.entry("t1").is_none());
    assert_eq!(q.next_due(&c, ME, now), None);
}

#[test]
fn max_attempts_one_abandons_on_the_first_failure() {
    let c = QueueConfig { max_attempts: 1, ..cfg() };
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    assert_eq!(q.fail("t1", "v1", "X", T0, &c), FailureOutcome::Abandoned { attempt: 1 });
    assert!(q.entries.is_empty());
}

#[test]
fn a_failed_entry_re_observed_gets_attempts_reset_and_rejoins_the_debounce() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 60 * S);
    q.fail("t1", "v1", "LLM_ERROR", T0 + 31 * S, &c);
    q.claim(&ids(&["t1"]), ME, T0 + 61 * S, 60 * S);
    assert!(matches!(q.fail("t1", "v1", "LLM_ERROR", T0 + 62 * S, &c), FailureOutcome::Retry { attempt: 2, .. }));
    obs(&mut q, "t1", "a b", T0 + 70 * S, "v2");
    let e = q.entry("t1").unwrap();
    assert_eq!((e.attempts, e.retry_at, e.last_error.as_deref()), (0, None, None));
    // It starts waiting afresh (its max wait had passed): one call per debounce window,
    // not one per turn, while the LLM is failing and the user keeps chatting.
    assert_eq!(e.first_at, T0 + 70 * S);
    assert_eq!(q.next_due(&c, ME, T0 + 70 * S), Some(T0 + 100 * S));
    obs(&mut q, "t1", "a b c", T0 + 80 * S, "v3");
    assert_eq!(q.next_due(&c, ME, T0 + 80 * S), Some(T0 + 110 * S));
    q.claim(&ids(&["t1"]), ME, T0 + 110 * S, 60 * S);
    assert!(matches!(q.fail("t1", "v3", "LLM_ERROR", T0 + 111 * S, &c), FailureOutcome::Retry { attempt: 1, .. }));
    // Re-observed during backoff: waits a debounce from the new observation, not at once.
    obs(&mut q, "t1", "a b c d", T0 + 400 * S, "v4");
    assert_eq!(q.next_due(&c, ME, T0 + 400 * S), Some(T0 + 430 * S));
}

#[test]
fn a_failure_of_an_outdated_version_is_superseded_and_not_counted() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "a", T0, "v1");
    q.claim(&ids(&["t1"]), ME, T0 + 30 * S, 60 * S);
    obs(&mut q, "t1", "a b", T0 + 35 * S, "v2");
    assert_eq!(q.fail("t1", "v1", "LLM_ERROR", T0 + 40 * S, &c), FailureOutcome::Superseded);
    let e = q.entry("t1").unwrap();
    assert_eq!((e.attempts, e.retry_at, e.claim.clone()), (0, None, None));
    assert_eq!(e.version, "v2");
}

#[test]
fn a_failure_of_a_gone_entry_is_gone() {
    let mut q = QueueFile::default();
    assert_eq!(q.fail("t1", "v1", "X", T0, &cfg()), FailureOutcome::Gone);
}

#[test]
fn an_entry_in_backoff_is_outside_the_debounce_group() {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "old", "a", T0, "v1");
    q.claim(&ids(&["old"]), ME, T0 + 30 * S, 60 * S);
    q.fail("old", "v1", "LLM_ERROR", T0 + 31 * S, &c); // retry at +61 s
                                                       // A new thread: its debounce is not bounded by the failed entry's old first_at,
                                                       // and the failed entry does not ride along when the group fires.
    obs(&mut q, "new", "b", T0 + 50 * S, "w1");
    assert_eq!(q.next_due(&c, ME, T0 + 50 * S), Some(T0 + 61 * S));
    assert_eq!(q.due(&c, ME, T0 + 61 * S), ids(&["old"]));
    q.claim(&ids(&["old"]), ME, T0 + 61 * S, 60 * S);
    assert_eq!(q.next_due(&c, ME, T0 + 62 * S), Some(T0 + 80 * S));
    assert_eq!(q.due(&c, ME, T0 + 80 * S), ids(&["new"]));
}

// ---- persistence ---------------------------------------------------------------------------

fn busy_queue() -> QueueFile {
    let c = cfg();
    let mut q = QueueFile::default();
    obs(&mut q, "t1", "plain", T0, "v1");
    obs(&mut q, "t2", "claimed \"quoted\" ünïcödé 中文", T0 + S, "v2");
    obs(&mut q, "t3", "failed", T0 + 2 * S, "v3");
    q.claim(&ids(&["t2", "t3"]), ME, T0 + 40 * S, 60 * S);
    q.fail("t3", "v3", "LLM_ERROR", T0 + 41 * S, &c);
    q
}

#[test]
fn persistence_round_trip_gives_an_equal_queue_in_a_versioned_envelope() {
    let q = busy_queue();
    let text = q.to_json();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["v"], 1);
    assert_eq!(v["entries"].as_array().unwrap().len(), 3);
    assert_eq!(v["entries"][0]["threadId"], "t1");
    assert_eq!(v["entries"][2]["retryAt"], T0 + 71 * S);
    let (back, problems) = QueueFile::from_json(&text);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, q);
    let (empty, problems) = QueueFile::from_json(&QueueFile::default().to_json());
    assert!(problems.is_empty());
    assert_eq!(empty, QueueFile::default());
}

#[test]
fn message_times_and_their_offsets_round_trip_and_old_queues_without_them_still_read() {
    use crate::base::time::Stamp;
    let mut q = QueueFile::default();
    let said = [Some(Stamp { ms: 1_683_546_960_000, offset_min: -480 }), Some(Stamp::utc(1_683_546_961_000)), None];
    let messages = vec![
        ChatMessage::user("I went to a support group yesterday").said_at(said[0]),
        ChatMessage::assistant("How was it?").said_at(said[1]),
        ChatMessage::user("Good").said_at(said[2]),
    ];
    q.observe("t1", messages, T0, "v1".into());
    let text = q.to_json();
    assert!(text.contains(r#""at":1683546960000,"tz":-480"#) && text.contains(r#""at":1683546961000}"#), "{text}");
    let (back, problems) = QueueFile::from_json(&text);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back.entry("t1").unwrap().messages.iter().map(|m| m.at).collect::<Vec<_>>(), said);
    // A queue written before times were kept, and malformed times, read as "no time".
    let old = r#"{"v":1,"entries":[{"threadId":"t1","messages":[{"role":"user","content":"hi"},
        {"role":"assistant","content":"yo","at":"yesterday","tz":99999}],"firstAt":1,"lastAt":1,"version":"v","attempts":0}]}"#;
    let (back, problems) = QueueFile::from_json(old);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(back.entry("t1").unwrap().messages.iter().all(|m| m.at.is_none()));
}

#[test]
fn corrupt_entries_are_dropped_individually_with_descriptions_and_the_rest_kept() {
    let good = busy_queue();
    let mut v: serde_json::Value = serde_json::from_str(&good.to_json()).unwrap();
    let entries = v["entries"].as_array_mut().unwrap();
    let mut bad_first_at = entries[0].clone();
    bad_first_at["threadId"] = "bad-time".into();
    bad_first_at["firstAt"] = "yesterday".into();
    let mut empty_id = entries[0].clone();
    empty_id["threadId"] = "".into();
    let mut no_msgs = entries[0].clone();
    no_msgs["threadId"] = "silent".into();
    no_msgs["messages"] = serde_json::json!([]);
    let mut bad_role = entries[0].clone();
    bad_role["threadId"] = "weird".into();
    bad_role["messages"] = serde_json::json!([{"role": "robot", "content": "x"}]);
    entries.insert(1, bad_first_at);
    entries.insert(2, serde_json::json!(42));
    entries.push(empty_id);
    entries.push(no_msgs);
    entries.push(bad_role);
    entries.push(serde_json::json!({"threadId": 7}));
    let (q, problems) = QueueFile::from_json(&v.to_string());
    assert_eq!(q, good);
    assert_eq!(problems.len(), 6, "{problems:#?}");
    assert!(problems[0].contains("entry 1") && problems[0].contains("bad-time"), "{}", problems[0]);
    assert!(problems[1].contains("entry 2"), "{}", problems[1]);
    assert!(problems[2].contains("empty thread id"), "{}", problems[2]);
    assert!(problems[3].contains("silent") && problems[3].contains("no messages"), "{}", problems[3]);
    assert!(problems[4].contains("weird"), "{}", problems[4]);
    assert!(problems[5].contains("entry 8"), "{}", problems[5]);
}

#[test]
fn duplicate_threads_in_storage_keep_the_newest_observation() {
    let mut a = QueueFile::default();
    obs(&mut a, "t1", "old", T0, "v1");
    let mut b = QueueFile::default();
    obs(&mut b, "t1", "new", T0 + 5 * S, "v2");
    let entry_json = |q: &QueueFile| {
        let v: serde_json::Value = serde_json::from_str(&q.to_json()).unwrap();
        v["entries"][0].clone()
    };
    let (ea, eb) = (entry_json(&a), entry_json(&b));
    for list in [vec![ea.clone(), eb.clone()], vec![eb, ea]] {
        let text = serde_json::json!({"v": 1, "entries": list}).to_string();
        let (q, problems) = QueueFile::from_json(&text);
        assert_eq!(q.entries.len(), 1);
        assert_eq!(q.entry("t1").unwrap().version, "v2");
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}

#[test]
fn garbage_text_gives_an_empty_queue_and_one_description() {
    for text in ["", "not json", "{", "[]", "null", "42", "\"x\"", "{\"v\":1}", "{\"entries\":{}}"] {
        let (q, problems) = QueueFile::from_json(text);
        assert_eq!(q, QueueFile::default(), "{text}");
        assert_eq!(problems.len(), 1, "{text}: {problems:?}");
    }
}

#[test]
fn unknown_fields_and_a_missing_envelope_version_are_tolerated() {
    let text = r#"{"entries":[{"threadId":"t","messages":[{"role":"user","content":"hi"}],
        "firstAt":1,"lastAt":2,"version":"v","attempts":0,"future":true}],"extra":1}"#;
    let (q, problems) = QueueFile::from_json(text);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(q.entry("t").unwrap().last_at, 2);
}

// ---- property test -------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Observe { thread: u8 },
    Advance { ms: u64 },
    ClaimDue { who: u8, lease_ms: u64 },
    ClaimAll { who: u8, lease_ms: u64 },
    ClaimOne { who: u8, thread: u8, lease_ms: u64 },
    Succeed { thread: u8, stale: bool },
    Fail { thread: u8, stale: bool },
    Release { who: u8 },
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4).prop_map(|thread| Op::Observe { thread }),
        4 => prop_oneof![0u64..2_000, 0u64..60_000, 0u64..1_200_000].prop_map(|ms| Op::Advance { ms }),
        2 => (0u8..2, 1u64..120_000).prop_map(|(who, lease_ms)| Op::ClaimDue { who, lease_ms }),
        1 => (0u8..2, 1u64..120_000).prop_map(|(who, lease_ms)| Op::ClaimAll { who, lease_ms }),
        2 => (0u8..2, 0u8..4, 1u64..120_000).prop_map(|(who, thread, lease_ms)| Op::ClaimOne { who, thread, lease_ms }),
        2 => (0u8..4, any::<bool>()).prop_map(|(thread, stale)| Op::Succeed { thread, stale }),
        2 => (0u8..4, any::<bool>()).prop_map(|(thread, stale)| Op::Fail { thread, stale }),
        1 => (0u8..2).prop_map(|who| Op::Release { who }),
        1 => Just(Op::Reload),
    ]
}

const WHO: [&str; 2] = ["alpha", "beta"];
/// An instance that never claims: every claim is foreign to it.
const WATCHER: &str = "watcher";

fn check_invariants(q: &QueueFile, c: &QueueConfig, now: u64, model: &BTreeMap<String, String>) -> Result<(), TestCaseError> {
    // One entry per thread, and exactly the threads the model expects, with the newest version.
    let got: BTreeMap<String, String> = q.entries.iter().map(|e| (e.thread_id.clone(), e.version.clone())).collect();
    prop_assert_eq!(got.len(), q.entries.len(), "duplicate thread");
    prop_assert_eq!(&got, model, "entries lost or invented");
    // Entries stay in first_at order (time only moves forward here).
    prop_assert!(q.entries.windows(2).all(|w| w[0].first_at <= w[1].first_at));
    for e in &q.entries {
        prop_assert!(e.first_at <= now && e.last_at <= now);
        prop_assert!(e.attempts < c.max_attempts);
        prop_assert_eq!(e.retry_at.is_some(), e.attempts > 0);
    }
    for me in [WHO[0], WHO[1], WATCHER] {
        let nd = q.next_due(c, me, now);
        prop_assert_eq!(nd.is_some(), !q.entries.is_empty(), "next_due {:?} with {} entries", nd, q.entries.len());
        let due = q.due(c, me, now);
        // Something is due exactly when next_due says "now or earlier": a scheduler woken
        // at next_due always finds work, and is never told "due" with nothing to do.
        prop_assert_eq!(!due.is_empty(), nd.is_some_and(|t| t <= now), "due {:?} but next_due {:?}", due, nd);
        // Each due entry is due by its own rule: a retry by its time, a waiting one with its
        // group; never under a live claim.
        let group_due = q.debounce_due(c, me, now).is_some_and(|t| t <= now);
        for t in &due {
            let e = q.entry(t).unwrap();
            let live = e.claim.as_ref().is_some_and(|cl| cl.until > now);
            prop_assert!(!live, "{} due under a live claim", t);
            match e.retry_at {
                Some(r) => prop_assert!(r <= now, "{} due before its retry time", t),
                None => prop_assert!(group_due, "{} due before its group", t),
            }
        }
        let claimable = q.claimable(me, now);
        prop_assert!(due.iter().all(|t| claimable.contains(t)));
        let mut sorted = due.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), due.len());
    }
    // A scheduler that sleeps until next_due misses nothing: for an instance holding no
    // claims, nothing becomes due before the time it was told.
    if let Some(nd) = q.next_due(c, WATCHER, now) {
        if nd > now {
            for t in [now, now + (nd - now) / 2, nd - 1] {
                prop_assert!(q.due(c, WATCHER, t).is_empty(), "due at {} before next_due {}", t, nd);
            }
        }
    }
    // Persistence is lossless.
    let (back, problems) = QueueFile::from_json(&q.to_json());
    prop_assert!(problems.is_empty());
    prop_assert_eq!(&back, q);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_queue_invariants(
        ops in proptest::collection::vec(op(), 1..80),
        debounce_ms in 1u64..60_000,
        extra_wait in 0u64..600_000,
        max_attempts in 1u32..5,
    ) {
        let c = QueueConfig { debounce_ms, max_wait_ms: debounce_ms + extra_wait, max_attempts };
        let mut q = QueueFile::default();
        let mut now = T0;
        let mut counter = 0u64;
        // thread -> version the queue should hold
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        // thread -> versions handed out by claims (the latest one per thread)
        let mut claimed: BTreeMap<String, String> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Observe { thread } => {
                    counter += 1;
                    let t = format!("t{thread}");
                    let v = format!("v{counter}");
                    q.observe(&t, msgs(&v), now, v.clone());
                    model.insert(t, v);
                }
                Op::Advance { ms } => now += ms,
                Op::ClaimDue { who, lease_ms } => {
                    let due = q.due(&c, WHO[who as usize], now);
                    let got = q.claim(&due, WHO[who as usize], now, lease_ms);
                    prop_assert_eq!(got.len(), due.len(), "a due entry could not be claimed");
                    for (t, v) in got {
                        prop_assert!(q.entry(&t).unwrap().claimed_by(WHO[who as usize], now));
                        claimed.insert(t, v);
                    }
                }
                Op::ClaimAll { who, lease_ms } => {
                    let all = q.claimable(WHO[who as usize], now);
                    let got = q.claim(&all, WHO[who as usize], now, lease_ms);
                    prop_assert_eq!(got.len(), all.len());
                    claimed.extend(got);
                }
                Op::ClaimOne { who, thread, lease_ms } => {
                    let (me, t) = (WHO[who as usize], format!("t{thread}"));
                    let before = q.entry(&t).cloned();
                    let got = q.claim(std::slice::from_ref(&t), me, now, lease_ms);
                    match before {
                        None => prop_assert!(got.is_empty()),
                        Some(b) if b.claimed_by_other(me, now) => {
                            prop_assert!(got.is_empty(), "stole a live claim");
                            prop_assert_eq!(&q.entry(&t).unwrap().claim, &b.claim);
                        }
                        Some(b) => {
                            prop_assert_eq!(&got, &vec![(t.clone(), b.version.clone())]);
                            prop_assert_eq!(q.entry(&t).unwrap().claim.clone(), Some(Claim { owner: me.into(), until: now + lease_ms }));
                            claimed.extend(got);
                        }
                    }
                }
                Op::Succeed { thread, stale } => {
                    let t = format!("t{thread}");
                    let Some(v) = version_for(&claimed, &model, &t, stale) else { continue };
                    let before = q.entry(&t).cloned();
                    q.succeed(&t, &v, now);
                    match before {
                        Some(b) if b.version == v => { model.remove(&t); }
                        Some(b) => {
                            let e = q.entry(&t).unwrap();
                            prop_assert_eq!(&e.messages, &b.messages);
                            prop_assert_eq!(e.first_at, now);
                            prop_assert!(e.claim.is_none());
                        }
                        None => {}
                    }
                }
                Op::Fail { thread, stale } => {
                    let t = format!("t{thread}");
                    let Some(v) = version_for(&claimed, &model, &t, stale) else { continue };
                    let before = q.entry(&t).cloned();
                    let out = q.fail(&t, &v, "LLM_ERROR", now, &c);
                    if let Some(e) = q.entry(&t) {
                        prop_assert!(e.claim.is_none(), "a finished run left its claim");
                    }
                    match (before, out) {
                        (None, FailureOutcome::Gone) => {}
                        (Some(b), FailureOutcome::Superseded) => prop_assert_ne!(b.version, v),
                        (Some(b), FailureOutcome::Abandoned { attempt }) => {
                            prop_assert_eq!(attempt, b.attempts + 1);
                            prop_assert_eq!(attempt, c.max_attempts);
                            model.remove(&t);
                        }
                        (Some(b), FailureOutcome::Retry { attempt, retry_at }) => {
                            prop_assert_eq!(attempt, b.attempts + 1);
                            prop_assert_eq!(retry_at, now + retry_delay_ms(attempt));
                        }
                        (b, o) => prop_assert!(false, "unexpected {:?} for {:?}", o, b),
                    }
                }
                Op::Release { who } => {
                    q.release(WHO[who as usize]);
                    prop_assert!(q.entries.iter().all(|e| !e.claim.as_ref().is_some_and(|c| c.owner == WHO[who as usize])));
                }
                Op::Reload => {
                    let (back, problems) = QueueFile::from_json(&q.to_json());
                    prop_assert!(problems.is_empty());
                    q = back;
                }
            }
            check_invariants(&q, &c, now, &model)?;
        }
    }
}

/// The version a finishing run reports: the one it claimed, or (stale) some other version.
fn version_for(claimed: &BTreeMap<String, String>, model: &BTreeMap<String, String>, t: &str, stale: bool) -> Option<String> {
    if stale {
        Some("v-stale".to_string())
    } else {
        claimed.get(t).or_else(|| model.get(t)).cloned()
    }
}
