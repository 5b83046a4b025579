use super::*;
use crate::base::ids::SequentialIds;
use crate::extract::delta::{Labels, NewFact, Removal, SectionUpdate};

const NOW: &str = "2026-03-14T10:30:00.000Z";
const CFG: ApplyConfig = ApplyConfig { threshold: 0.7, max_facts: 100, policy: EvictionPolicy::Confidence };

fn fact(id: &str, content: &str, confidence: f64, created: &str) -> Fact {
    Fact {
        id: id.into(),
        content: content.into(),
        category: "knowledge".into(),
        confidence,
        created_at: created.into(),
        source: "old".into(),
        extra: Default::default(),
    }
}

fn nf(content: &str, confidence: f64) -> NewFact {
    NewFact { content: content.into(), category: "knowledge".into(), confidence, ..NewFact::default() }
}

fn update(summary: &str) -> Option<SectionUpdate> {
    Some(SectionUpdate { summary: summary.into(), should_update: true, labels: Labels::default() })
}

fn run(doc: &mut Document, delta: &Delta, cfg: &ApplyConfig) -> ApplyReport {
    let ids = SequentialIds::starting_at(0xa0);
    apply_delta(
        doc,
        delta,
        cfg,
        &ApplyContext { now_iso: NOW, source: "thread-1", ids: &ids, conversation: None, forgotten: &[], shown: None },
    )
}

fn run_in(doc: &mut Document, delta: &Delta, messages: &[ChatMessage]) -> ApplyReport {
    let ids = SequentialIds::starting_at(0xa0);
    let conversation = Some(Conversation { messages, new_from: 0 });
    apply_delta(doc, delta, &CFG, &ApplyContext { now_iso: NOW, source: "thread-1", ids: &ids, conversation, forgotten: &[], shown: None })
}

fn reasons_of(r: &ApplyReport) -> Vec<(&str, &str)> {
    r.skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect()
}

fn contents(doc: &Document) -> Vec<&str> {
    doc.facts.iter().map(|f| f.content.as_str()).collect()
}

#[test]
fn section_replaced_only_when_flagged_and_not_blank() {
    let mut doc = Document::empty();
    doc.section_mut(SectionId::WorkContext).summary = "old work".into();
    doc.section_mut(SectionId::WorkContext).extra.insert("note".into(), "kept".into());
    doc.section_mut(SectionId::TopOfMind).summary = "old focus".into();
    doc.section_mut(SectionId::RecentMonths).summary = "old recent".into();
    let mut delta = Delta::default();
    delta.sections[SectionId::WorkContext.index()] = update("  Staff engineer at Acme.  ");
    delta.sections[SectionId::TopOfMind.index()] =
        Some(SectionUpdate { summary: "ignored".into(), should_update: false, labels: Labels::default() });
    delta.sections[SectionId::RecentMonths.index()] = update("   ");
    let report = run(&mut doc, &delta, &CFG);
    let work = doc.section(SectionId::WorkContext);
    assert_eq!((work.summary.as_str(), work.updated_at.as_str()), ("Staff engineer at Acme.", NOW));
    assert_eq!(work.extra.get("note").and_then(|v| v.as_str()), Some("kept"));
    assert_eq!(doc.section(SectionId::TopOfMind).summary, "old focus");
    assert_eq!(doc.section(SectionId::RecentMonths).summary, "old recent");
    assert_eq!(doc.section(SectionId::RecentMonths).updated_at, "");
    assert_eq!(report.updated_sections, vec![SectionId::WorkContext]);
    assert_eq!(doc.last_updated, "", "the engine sets lastUpdated at commit");
}

#[test]
fn a_paired_removal_applies_with_its_replacement_and_unknown_ids_are_reported() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Uses Python 3.11", 0.9, NOW), fact("fact_00000002", "Likes tea", 0.8, NOW)];
    let delta = Delta {
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }, Removal::id("fact_ffffffff")],
        new_facts: vec![nf("Uses Python 3.12", 0.95)],
        ..Delta::default()
    };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(contents(&doc), vec!["Likes tea", "Uses Python 3.12"]);
    assert_eq!(report.removed, vec!["fact_00000001"]);
    assert_eq!(report.added, vec!["fact_000000a0"]);
    assert_eq!(reasons_of(&report), vec![("factsToRemove[1]", reasons::UNKNOWN_FACT)]);
}

/// DeerFlow HEAD's data-loss cases: a replacement that is below the threshold, malformed
/// (skipped by the parser, so absent), scope-gated or evicted by the cap must not turn the
/// removal into a delete-only update.
#[test]
fn a_paired_removal_fails_closed_when_its_replacement_is_not_applied() {
    let berlin = || vec![fact("fact_00000001", "Lives in Berlin", 0.9, NOW)];
    let pair = |replacement: NewFact| Delta {
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }],
        new_facts: vec![replacement],
        ..Delta::default()
    };
    let cases: Vec<(&str, Delta, ApplyConfig)> = vec![
        ("below threshold", pair(nf("Lives in Munich", 0.5)), CFG),
        (
            "scope-gated",
            pair(NewFact { labels: Labels { scope: Some("thread".into()), ..Labels::default() }, ..nf("Lives in Munich", 0.9) }),
            CFG,
        ),
        ("index past the facts", Delta { new_facts: vec![], ..pair(nf("x", 0.9)) }, CFG),
    ];
    for (name, delta, cfg) in cases {
        let mut doc = Document::empty();
        doc.facts = berlin();
        let report = run(&mut doc, &delta, &cfg);
        assert_eq!(contents(&doc), vec!["Lives in Berlin"], "{name}");
        assert!(report.removed.is_empty(), "{name}");
        assert!(reasons_of(&report).contains(&("factsToRemove[0]", reasons::REPLACEMENT_NOT_APPLIED)), "{name}: {:?}", report.skipped);
    }
    // A standing pair swaps one fact for another: the cap takes other facts first (here
    // the jazz fact, though it has more confidence than Munich).
    let mut doc = Document::empty();
    doc.facts = vec![
        fact("fact_00000001", "Lives in Berlin", 0.9, NOW),
        fact("fact_00000002", "Likes tea", 0.95, NOW),
        fact("fact_00000003", "Likes jazz", 0.75, NOW),
    ];
    let delta = Delta {
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }],
        new_facts: vec![nf("Lives in Munich", 0.7), nf("Plays chess", 0.99)],
        ..Delta::default()
    };
    run(&mut doc, &delta, &ApplyConfig { max_facts: 3, ..CFG });
    assert_eq!(contents(&doc), vec!["Likes tea", "Lives in Munich", "Plays chess"]);
    // Only when the cap cannot be met otherwise (here a manual fact fills it) is the
    // replacement evicted: then the removal is refused, and the old fact competes again.
    let mut doc = Document::empty();
    let mut manual = fact("fact_00000002", "Likes tea", 0.5, NOW);
    manual.source = "manual".into();
    doc.facts = vec![fact("fact_00000001", "Lives in Berlin", 0.9, NOW), manual];
    let delta = Delta {
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }],
        new_facts: vec![nf("Lives in Munich", 0.95)],
        ..Delta::default()
    };
    let report = run(&mut doc, &delta, &ApplyConfig { max_facts: 1, ..CFG });
    assert_eq!(contents(&doc), vec!["Likes tea"]);
    let r = reasons_of(&report);
    assert!(r.contains(&("factsToRemove[0]", reasons::REPLACEMENT_NOT_APPLIED)) && r.contains(&("newFacts[0]", reasons::EVICTED)), "{r:?}");
    assert_eq!(report.evicted.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), vec!["Lives in Berlin", "Lives in Munich"]);
}

#[test]
fn removals_and_additions_none_applied_remove_nothing_but_delete_only_still_removes() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Lives in Berlin", 0.9, NOW)];
    let delta =
        Delta { facts_to_remove: vec![Removal::id("fact_00000001")], new_facts: vec![nf("Lives in Munich", 0.2)], ..Delta::default() };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts.len(), 1);
    assert!(reasons_of(&report).contains(&("factsToRemove[0]", reasons::NO_FACT_APPLIED)), "{:?}", report.skipped);

    let forget = Delta { facts_to_remove: vec![Removal::id("fact_00000001")], ..Delta::default() };
    let report = run(&mut doc, &forget, &CFG);
    assert!(doc.facts.is_empty());
    assert_eq!(report.removed, vec!["fact_00000001"]);
}

#[test]
fn a_non_user_scope_removes_nothing() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Lives in Berlin", 0.9, NOW)];
    let delta =
        Delta { facts_to_remove: vec![Removal { scope: Some("thread".into()), ..Removal::id("fact_00000001") }], ..Delta::default() };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts.len(), 1);
    assert_eq!(reasons_of(&report), vec![("factsToRemove[0]", reasons::SCOPE_GATED)]);
}

#[test]
fn the_scope_gate_keeps_task_residue_out_of_facts_and_summaries() {
    let mut doc = Document::empty();
    let label = |scope: Option<&str>, durability: Option<&str>, authority: Option<&str>| Labels {
        scope: scope.map(Into::into),
        durability: durability.map(Into::into),
        authority: authority.map(Into::into),
    };
    let mut delta = Delta {
        new_facts: vec![
            NewFact { labels: label(Some("thread"), None, None), ..nf("Answer in French this time", 0.9) },
            NewFact { labels: label(None, Some("temporary"), None), ..nf("Is at the airport right now", 0.9) },
            NewFact { labels: label(None, None, Some("transactional")), ..nf("This PR must not change the API", 0.9) },
            NewFact { labels: label(Some("user"), Some("durable"), Some("descriptive")), ..nf("Speaks French", 0.9) },
            nf("Lives in Lyon", 0.9),
        ],
        ..Delta::default()
    };
    delta.sections[SectionId::TopOfMind.index()] = Some(SectionUpdate {
        summary: "Refactoring repo X for a PR.".into(),
        should_update: true,
        labels: label(Some("project"), None, None),
    });
    delta.sections[SectionId::WorkContext.index()] = update("Engineer in Lyon.");
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(contents(&doc), vec!["Speaks French", "Lives in Lyon"]);
    assert_eq!(doc.section(SectionId::TopOfMind).summary, "");
    assert_eq!(doc.section(SectionId::WorkContext).summary, "Engineer in Lyon.");
    let r = reasons_of(&report);
    for path in ["newFacts[0]", "newFacts[1]", "newFacts[2]", "user.topOfMind"] {
        assert!(r.contains(&(path, reasons::SCOPE_GATED)), "{path}: {r:?}");
    }
    assert!(doc.facts.iter().all(|f| f.extra.is_empty()), "labels are not persisted");
}

#[test]
fn exact_duplicates_confirm_and_near_duplicates_merge_into_the_old_fact() {
    let mut doc = Document::empty();
    doc.facts = vec![
        fact("fact_00000001", "Writes Go microservices", 0.8, "2026-01-01T00:00:00.000Z"),
        fact("fact_00000002", "Prefers dark mode in VS Code and Vim", 0.75, "2026-01-02T00:00:00.000Z"),
    ];
    let delta = Delta {
        new_facts: vec![
            nf("  WRITES go   microservices ", 0.99),
            nf("User prefers dark mode in Vim and VS Code", 0.9),
            nf("Lives in Berlin", 0.7),
            nf("lives in berlin", 0.9),
        ],
        ..Delta::default()
    };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(contents(&doc), vec!["Writes Go microservices", "User prefers dark mode in Vim and VS Code", "Lives in Berlin"]);
    let (go, dark) = (&doc.facts[0], &doc.facts[1]);
    assert_eq!((go.id.as_str(), go.created_at.as_str(), go.confidence), ("fact_00000001", "2026-01-01T00:00:00.000Z", 0.99));
    assert_eq!((dark.id.as_str(), dark.created_at.as_str(), dark.confidence), ("fact_00000002", "2026-01-02T00:00:00.000Z", 0.9));
    for f in [go, dark] {
        assert_eq!((f.last_confirmed_at(), f.confirmation_count()), (Some(NOW), 1));
    }
    assert_eq!(report.added.len(), 1);
    assert_eq!(report.confirmed, vec!["fact_00000001", "fact_00000002"]);
    let r = reasons_of(&report);
    assert_eq!(r, vec![("newFacts[0]", reasons::DUPLICATE), ("newFacts[1]", reasons::NEAR_DUPLICATE), ("newFacts[3]", reasons::DUPLICATE)]);
    assert_eq!(report.skipped[1].fact.as_deref(), Some("fact_00000002"));
}

#[test]
fn near_duplicates_need_the_same_category_and_leave_contradictions_alone() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Uses Python 3.11 at work", 0.9, NOW)];
    let other = NewFact { category: "preference".into(), ..nf("Uses Python 3.11 at work daily", 0.9) };
    let delta = Delta { new_facts: vec![nf("Uses Python 3.12 at work", 0.9), other], ..Delta::default() };
    run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts.len(), 3, "{:?}", contents(&doc));
}

#[test]
fn a_manual_fact_keeps_its_words_when_a_paraphrase_merges_into_it() {
    let mut doc = Document::empty();
    let mut manual = fact("fact_00000001", "Prefers dark mode in VS Code and Vim", 0.9, "2026-01-01T00:00:00.000Z");
    manual.source = "manual".into();
    doc.facts = vec![manual];
    run(&mut doc, &Delta { new_facts: vec![nf("User prefers dark mode in Vim and VS Code", 0.95)], ..Delta::default() }, &CFG);
    assert_eq!(contents(&doc), vec!["Prefers dark mode in VS Code and Vim"]);
    assert_eq!(doc.facts[0].confirmation_count(), 1);
}

#[test]
fn remove_x_and_add_x_again_is_no_change() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Lives in Berlin", 0.9, "2026-01-01T00:00:00.000Z")];
    let before = doc.clone();
    let delta = Delta {
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }],
        new_facts: vec![nf("lives in Berlin", 0.95)],
        ..Delta::default()
    };
    let report = run(&mut doc, &delta, &CFG);
    let kept = &doc.facts[0];
    assert_eq!((kept.id.as_str(), kept.created_at.as_str(), kept.source.as_str()), ("fact_00000001", "2026-01-01T00:00:00.000Z", "old"));
    assert_eq!((kept.content.as_str(), kept.confidence), ("Lives in Berlin", 0.95));
    assert_eq!(doc.facts.len(), before.facts.len());
    assert!(report.added.is_empty() && report.removed.is_empty(), "{report:?}");
    assert_eq!(reasons_of(&report), vec![("newFacts[0]", reasons::UNCHANGED)]);
}

#[test]
fn the_removal_guard_refuses_mass_and_unrelated_removals_and_applies_the_rest() {
    let mut doc = Document::empty();
    doc.facts = (1..=5).map(|i| fact(&format!("fact_0000000{i}"), &format!("Fact number {i} about topic{i}"), 0.9, NOW)).collect();
    let all = Delta { facts_to_remove: (1..=5).map(|i| Removal::id(format!("fact_0000000{i}"))).collect(), ..Delta::default() };
    let mut with_fact = all.clone();
    with_fact.new_facts = vec![nf("Plays the cello", 0.9)];
    let report = run(&mut doc, &with_fact, &CFG);
    assert_eq!(doc.facts.len(), 6, "the removals were refused, the new fact applied");
    assert_eq!(report.skipped.iter().filter(|s| s.reason == reasons::TOO_MANY_REMOVALS).count(), 5);

    // A translation request names the only fact: it shares no word with what the user said.
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Lives in Berlin with two cats", 0.9, NOW)];
    let messages = [ChatMessage::user("Translate 'good morning' into Spanish"), ChatMessage::assistant("Buenos días")];
    let delta = Delta { facts_to_remove: vec![Removal::id("fact_00000001")], ..Delta::default() };
    let report = run_in(&mut doc, &delta, &messages);
    assert_eq!(doc.facts.len(), 1);
    assert_eq!(reasons_of(&report), vec![("factsToRemove[0]", reasons::REMOVAL_UNRELATED)]);
    // "Forget that I live in Berlin" mentions it: removed.
    let messages = [ChatMessage::user("Please forget that I live in Berlin"), ChatMessage::assistant("Done.")];
    let report = run_in(&mut doc, &delta, &messages);
    assert!(doc.facts.is_empty(), "{:?}", report.skipped);
}

#[test]
fn facts_copied_from_the_assistant_are_dropped() {
    let mut doc = Document::empty();
    let messages = [
        ChatMessage::user("How do I make a quick tomato sauce? I cook for my two kids every evening."),
        ChatMessage::assistant("Sauté garlic in olive oil, add crushed tomatoes, simmer 15 minutes and season with basil and salt."),
    ];
    let delta = Delta {
        new_facts: vec![
            nf("Sautés garlic in olive oil and simmers crushed tomatoes for 15 minutes", 0.9),
            nf("Cooks for two kids every evening", 0.9),
        ],
        ..Delta::default()
    };
    let report = run_in(&mut doc, &delta, &messages);
    assert_eq!(contents(&doc), vec!["Cooks for two kids every evening"]);
    assert_eq!(reasons_of(&report), vec![("newFacts[0]", reasons::ASSISTANT_COPY)]);
}

#[test]
fn reinforcement_confirms_and_unknown_ids_are_reported() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "Likes tea", 0.8, "2026-01-01T00:00:00.000Z")];
    let delta = Delta { facts_to_reinforce: vec!["fact_00000001".into(), "fact_nope".into()], ..Delta::default() };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts[0].last_confirmed_at(), Some(NOW));
    assert_eq!(report.confirmed, vec!["fact_00000001"]);
    assert_eq!(reasons_of(&report), vec![("factsToReinforce[1]", reasons::UNKNOWN_FACT)]);
    assert!(!report.is_empty());
}

#[test]
fn lifetimes_and_source_errors_are_stored() {
    let mut doc = Document::empty();
    let delta = Delta {
        new_facts: vec![
            NewFact { expected_valid_days: Some(30.4), ..nf("Is travelling in Japan", 0.9) },
            NewFact { category: "correction".into(), source_error: Some("suggested npm".into()), ..nf("Uses pnpm, not npm", 0.95) },
            NewFact { source_error: Some("ignored".into()), ..nf("Likes jazz", 0.9) },
        ],
        ..Delta::default()
    };
    run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts[0].expected_valid_days(), Some(30.0));
    assert_eq!(doc.facts[1].source_error(), Some("suggested npm"));
    assert_eq!(doc.facts[2].source_error(), None, "only corrections keep a sourceError");
    let json = crate::json::ToJson::to_json(&doc.facts[0]);
    assert!(json.contains(r#""expected_valid_days":30"#), "{json}");
}

#[test]
fn event_times_are_stored_as_happened_at_and_a_merge_keeps_the_users_own() {
    let mut doc = Document::empty();
    let mut manual = fact("fact_00000001", "Ran the Berlin marathon", 0.9, "2026-01-01T00:00:00Z");
    manual.source = "manual".into();
    manual.set_happened_at("2025-09-21");
    let undated = fact("fact_00000003", "Learned to swim", 0.8, "2026-01-01T00:00:00Z");
    doc.facts = vec![manual, undated, fact("fact_00000002", "Adopted a cat named Miso from the shelter", 0.8, "2026-01-01T00:00:00Z")];
    let delta = Delta {
        new_facts: vec![
            NewFact { happened_at: Some("2023-05-07".into()), ..nf("Went to a LGBTQ support group", 0.9) },
            NewFact { happened_at: Some("2023-05-07T18:30:00Z".into()), ..nf("Painted a lake sunrise", 0.9) },
            // Not checked by a parser: apply still refuses a value that is not a date.
            NewFact { happened_at: Some("last week".into()), ..nf("Started pottery classes", 0.9) },
            NewFact { happened_at: Some("2025-09-28".into()), ..nf("Ran the Berlin marathon", 0.9) },
            NewFact { happened_at: Some("1999-07-01".into()), ..nf("learned to  swim", 0.9) },
            NewFact { happened_at: Some("2024-03-02".into()), ..nf("Adopted the cat named Miso from a shelter", 0.9) },
        ],
        ..Delta::default()
    };
    run(&mut doc, &delta, &CFG);
    let at = |c: &str| doc.facts.iter().find(|f| f.content.contains(c)).unwrap().happened_at().map(str::to_string);
    assert_eq!(at("support group").as_deref(), Some("2023-05-07"));
    assert_eq!(at("sunrise").as_deref(), Some("2023-05-07T18:30:00Z"));
    assert_eq!(at("pottery"), None);
    assert_eq!(at("marathon").as_deref(), Some("2025-09-21"), "a manual fact keeps the date the user gave");
    assert_eq!(at("cat").as_deref(), Some("2024-03-02"), "a near-duplicate merge takes the new date");
    assert_eq!(at("swim").as_deref(), Some("1999-07-01"), "a duplicate gives a fact without a date its date");
    assert_eq!(doc.facts.iter().find(|f| f.content.contains("support")).unwrap().created_at, NOW, "createdAt stays when it was learned");
    let json = crate::json::ToJson::to_json(&doc);
    assert!(json.contains(r#""happenedAt":"2023-05-07""#), "{json}");
    let back = Document::from_json(&json, &SequentialIds::starting_at(1)).unwrap();
    assert_eq!(back, doc, "happenedAt round-trips as a field of the fact");
}

#[test]
fn eviction_drops_expired_then_lowest_confidence_then_newest_and_keeps_order() {
    let mut doc = Document::empty();
    doc.facts = vec![
        fact("fact_00000001", "a", 0.8, "2026-01-01T00:00:00Z"),
        fact("fact_00000002", "b", 0.7, "2026-02-01T00:00:00Z"),
        fact("fact_00000003", "c", 0.9, "2026-01-01T00:00:00Z"),
        fact("fact_00000004", "d", 0.7, "2026-01-15T00:00:00.000000Z"),
        fact("fact_00000005", "e", 0.7, "2026-01-15T00:00:00Z"),
    ];
    let cfg = ApplyConfig { max_facts: 3, ..CFG };
    let report = run(&mut doc, &Delta::default(), &cfg);
    let ids: Vec<&str> = doc.facts.iter().map(|f| f.id.as_str()).collect();
    // 0.7s: b is newest → out; d and e tie on time → later position (e) out.
    assert_eq!(ids, vec!["fact_00000001", "fact_00000003", "fact_00000004"]);
    assert_eq!(report.removed, vec!["fact_00000002", "fact_00000005"]);
    assert_eq!(report.evicted.len(), 2);

    // An expired fact goes first, whatever its confidence.
    let mut doc = Document::empty();
    let mut trip = fact("fact_00000001", "In Tokyo for a conference", 1.0, "2026-01-01T00:00:00Z");
    trip.set_expected_valid_days(30.0);
    doc.facts = vec![trip, fact("fact_00000002", "b", 0.7, NOW)];
    run(&mut doc, &Delta::default(), &ApplyConfig { max_facts: 1, ..CFG });
    assert_eq!(contents(&doc), vec!["b"]);
}

#[test]
fn hybrid_eviction_weighs_confirmation_freshness() {
    let mk = || {
        let mut doc = Document::empty();
        let stale = fact("fact_00000001", "stale but confident", 0.9, "2024-01-01T00:00:00Z");
        let mut fresh = fact("fact_00000002", "fresh", 0.8, "2024-01-01T00:00:00Z");
        fresh.confirm("2026-03-10T00:00:00.000Z");
        doc.facts = vec![stale, fresh];
        doc
    };
    let mut doc = mk();
    run(&mut doc, &Delta::default(), &ApplyConfig { max_facts: 1, ..CFG });
    assert_eq!(contents(&doc), vec!["stale but confident"]);
    let mut doc = mk();
    run(&mut doc, &Delta::default(), &ApplyConfig { max_facts: 1, policy: EvictionPolicy::Hybrid, ..CFG });
    assert_eq!(contents(&doc), vec!["fresh"]);
}

#[test]
fn an_extraction_never_evicts_a_manual_fact() {
    let mut doc = Document::empty();
    let mut manual = fact("fact_00000001", "manual one", 0.1, NOW);
    manual.source = "manual".into();
    doc.facts = vec![manual, fact("fact_00000002", "b", 0.8, NOW)];
    run(&mut doc, &Delta { new_facts: vec![nf("c", 0.9)], ..Delta::default() }, &ApplyConfig { max_facts: 2, ..CFG });
    assert_eq!(contents(&doc), vec!["manual one", "c"]);
}

#[test]
fn a_new_fact_evicted_at_once_is_not_added_but_reported() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_00000001", "a", 0.9, "2026-01-01T00:00:00Z")];
    let delta = Delta { new_facts: vec![nf("b", 0.8)], ..Delta::default() };
    let report = run(&mut doc, &delta, &ApplyConfig { max_facts: 1, ..CFG });
    assert_eq!(doc.facts.len(), 1);
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(reasons_of(&report), vec![("newFacts[0]", reasons::EVICTED)]);
}

#[test]
fn invisible_characters_never_reach_the_document() {
    let mut doc = Document::empty();
    let mut delta = Delta { new_facts: vec![nf("Likes\u{200B} tea\u{E0049}\u{E0047}\u{202E}", 0.9)], ..Delta::default() };
    delta.sections[SectionId::WorkContext.index()] = update("Engineer\u{2066} at Acme\u{FEFF}");
    run(&mut doc, &delta, &CFG);
    assert_eq!(doc.facts[0].content, "Likes tea");
    assert_eq!(doc.section(SectionId::WorkContext).summary, "Engineer at Acme");
}

#[test]
fn upload_mentions_are_scrubbed_after_merging() {
    let mut doc = Document::empty();
    let mut delta =
        Delta { new_facts: vec![nf("User uploaded a tax PDF file", 0.95), nf("Works with CSV files", 0.9)], ..Delta::default() };
    delta.sections[SectionId::TopOfMind.index()] = update("Preparing taxes. Uploaded three files to the chat.");
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(doc.section(SectionId::TopOfMind).summary, "Preparing taxes.");
    assert_eq!(doc.facts.len(), 1);
    assert_eq!(reasons_of(&report), vec![("newFacts[0]", reasons::UPLOAD)]);
    assert_eq!(doc.facts[0].content, "Works with CSV files");
    assert_eq!(report.added, vec![doc.facts[0].id.clone()]);
}

#[test]
fn scrubbing_an_old_summary_reports_the_section() {
    let mut doc = Document::empty();
    doc.section_mut(SectionId::EarlierContext).summary = "Did X. Uploaded files at /mnt/user-data/uploads/a.".into();
    let report = run(&mut doc, &Delta::default(), &CFG);
    assert_eq!(report.updated_sections, vec![SectionId::EarlierContext]);
    assert_eq!(doc.section(SectionId::EarlierContext).summary, "Did X.");
}

#[test]
fn the_delta_is_replayable_deterministic_and_idempotent() {
    let mut base = Document::empty();
    base.facts = vec![fact("fact_00000001", "a one", 0.9, NOW), fact("fact_00000002", "Likes green tea", 0.8, NOW)];
    let delta = Delta {
        new_facts: vec![nf("b two", 0.9), nf("c three", 0.8), nf("Likes green tea", 0.9)],
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_00000001") }],
        facts_to_reinforce: vec!["fact_00000002".into()],
        ..Delta::default()
    };
    let copy = delta.clone();
    let (mut d1, mut d2) = (base.clone(), base.clone());
    let r1 = run(&mut d1, &delta, &CFG);
    let r2 = run(&mut d2, &delta, &CFG);
    assert_eq!((&d1, &r1), (&d2, &r2));
    assert_eq!(delta, copy);
    let once = d1.clone();
    run(&mut d1, &delta, &CFG);
    assert_eq!(d1, once, "a second application changes nothing");
}

#[test]
fn ids_of_removed_facts_are_not_reused() {
    let mut doc = Document::empty();
    doc.facts = vec![fact("fact_000000a0", "x", 0.9, NOW)];
    let delta = Delta {
        new_facts: vec![nf("y", 0.9)],
        facts_to_remove: vec![Removal { replacement: Some(0), ..Removal::id("fact_000000a0") }],
        ..Delta::default()
    };
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(report.added, vec!["fact_000000a1"]);
    assert_eq!(report.removed, vec!["fact_000000a0"]);
}

#[test]
fn manual_caps_evict_by_policy_but_keep_the_named_facts() {
    let mut doc = Document::empty();
    let mut manual = fact("fact_00000001", "manual", 0.1, NOW);
    manual.source = "manual".into();
    doc.facts = vec![manual, fact("fact_00000002", "b", 0.8, NOW), fact("fact_00000003", "new", 0.05, NOW)];
    let evicted = enforce_max_facts(&mut doc, &ApplyConfig { max_facts: 2, ..CFG }, NOW, &["fact_00000003"]);
    assert_eq!(evicted.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), vec!["fact_00000001"]);
    assert_eq!(contents(&doc), vec!["b", "new"]);
}

#[test]
fn an_unpaired_removal_applies_when_the_only_new_fact_is_a_duplicate() {
    let stored = || {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_00000001", "User likes Python", 0.9, NOW), fact("fact_00000002", "Old context to remove", 0.8, NOW)];
        doc
    };
    let delta =
        Delta { new_facts: vec![nf("User likes Python", 0.9)], facts_to_remove: vec![Removal::id("fact_00000002")], ..Delta::default() };
    let mut doc = stored();
    let report = run(&mut doc, &delta, &CFG);
    assert_eq!(contents(&doc), vec!["User likes Python"], "{:?}", report.skipped);
    let mut doc = stored();
    // The user never mentions the removed fact: DeerFlow applies such a removal, and so do we
    // when the delta stored something.
    let messages = [ChatMessage::user("I like Python, it is my favourite language."), ChatMessage::assistant("Noted.")];
    let report = run_in(&mut doc, &delta, &messages);
    assert_eq!(contents(&doc), vec!["User likes Python"], "{:?}", report.skipped);
}
