//! Applying a delta to a document (SPEC §7), deterministically.
//!
//! In this order, with one timestamp for the whole update:
//! 1. sections are replaced when `shouldUpdate` is true and the summary is not blank;
//! 2. `factsToRemove` ids are removed (unknown ids ignored);
//! 3. new facts at or above the threshold are appended, unless their normalised content is
//!    already there;
//! 4. over `max_facts`, the lowest-confidence facts are dropped (among equals the newest);
//! 5. upload mentions are scrubbed.
//!
//! The delta is only read, so a commit that lost a race can apply it again to the newer
//! document. `last_updated` is left to the caller, which sets it when it commits.

use crate::delta::Delta;
use crate::document::{normalize_content, Document, Fact, SectionId};
use crate::ids::IdSource;
use crate::scrub::scrub_document;
use crate::time::millis_from_iso;
use crate::tokenize::FxMap;

/// Limits applied while merging a delta.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplyConfig {
    /// New facts need at least this confidence (default 0.7).
    pub threshold: f64,
    /// At most this many facts are kept (default 100).
    pub max_facts: usize,
}

/// Where the applied changes come from.
pub struct ApplyContext<'a> {
    /// The one timestamp of this update (ISO-8601 UTC).
    pub now_iso: &'a str,
    /// `source` of new facts: the thread id.
    pub source: &'a str,
    /// Fresh fact ids.
    pub ids: &'a dyn IdSource,
}

/// What an application of a delta changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplyReport {
    /// Ids of the facts added (and still present after eviction).
    pub added: Vec<String>,
    /// Ids of the facts removed (by the delta, eviction or scrubbing).
    pub removed: Vec<String>,
    /// Sections whose summary was replaced.
    pub updated_sections: Vec<SectionId>,
}

impl ApplyReport {
    /// Whether the document was left as it was.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated_sections.is_empty()
    }
}

/// Applies `delta` to `doc` (SPEC §7).
///
/// The report lists the net change: facts added that survived eviction and scrubbing,
/// facts of the original document that are gone, and sections whose summary was replaced by
/// the delta or changed by the upload scrubber. A fact added and evicted in the same update
/// appears in neither list.
pub fn apply_delta(doc: &mut Document, delta: &Delta, cfg: &ApplyConfig, ctx: &ApplyContext<'_>) -> ApplyReport {
    let before_ids: Vec<String> = doc.facts.iter().map(|f| f.id.clone()).collect();
    let before_summaries: Vec<String> = doc.sections.iter().map(|s| s.summary.clone()).collect();
    let mut replaced = [false; 6];

    // 1. Sections.
    for id in SectionId::ALL {
        if let Some(update) = delta.section(id) {
            let summary = update.summary.trim();
            if update.should_update && !summary.is_empty() {
                let section = doc.section_mut(id);
                section.summary = summary.to_string();
                section.updated_at = ctx.now_iso.to_string();
                replaced[id.index()] = true;
            }
        }
    }

    // 2. Removals.
    if !delta.facts_to_remove.is_empty() {
        let remove = key_set(delta.facts_to_remove.iter().map(|s| s.trim()));
        doc.facts.retain(|f| !remove.contains_key(f.id.as_str()));
    }

    // 3. Additions.
    let mut known = key_set(doc.facts.iter().map(|f| normalize_content(&f.content)));
    let mut added = Vec::new();
    for nf in &delta.new_facts {
        let confidence = nf.confidence;
        if !confidence.is_finite() || confidence < cfg.threshold {
            continue;
        }
        let content = nf.content.trim();
        let key = normalize_content(content);
        if key.is_empty() || known.insert(key.into(), 0).is_some() {
            continue;
        }
        let category = nf.category.trim();
        // Never reuse the id of a fact this update removed: clients may still hold it.
        let id = loop {
            let id = doc.fresh_id(ctx.ids);
            if !before_ids.contains(&id) {
                break id;
            }
        };
        let fact = Fact {
            id,
            content: content.to_string(),
            category: if category.is_empty() { crate::document::DEFAULT_CATEGORY } else { category }.to_string(),
            confidence: confidence.clamp(0.0, 1.0),
            created_at: ctx.now_iso.to_string(),
            source: ctx.source.to_string(),
            extra: Default::default(),
        };
        added.push(fact.id.clone());
        doc.facts.push(fact);
    }

    // 4. Eviction.
    evict(doc, cfg.max_facts);

    // 5. Upload mentions.
    scrub_document(doc);

    let after = key_set(doc.facts.iter().map(|f| f.id.as_str()));
    let mut report = ApplyReport {
        added: added.into_iter().filter(|id| after.contains_key(id.as_str())).collect(),
        removed: before_ids.into_iter().filter(|id| !after.contains_key(id.as_str())).collect(),
        updated_sections: Vec::new(),
    };
    for id in SectionId::ALL {
        if replaced[id.index()] || doc.section(id).summary != before_summaries[id.index()] {
            report.updated_sections.push(id);
        }
    }
    report
}

/// Drops facts until at most `max_facts` remain: lowest confidence first; among equal
/// confidence the newest (`createdAt`, then position) first. Survivors keep their order.
fn evict(doc: &mut Document, max_facts: usize) {
    let excess = doc.facts.len().saturating_sub(max_facts);
    if excess == 0 {
        return;
    }
    let mut order: Vec<(f64, Option<u64>, usize)> =
        doc.facts.iter().enumerate().map(|(i, f)| (f.confidence, millis_from_iso(&f.created_at), i)).collect();
    // Eviction order: confidence ascending, then created descending (unknown = oldest),
    // then position descending.
    crate::sort::sort_by(&mut order, |a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)).is_lt());
    let mut drop = vec![false; doc.facts.len()];
    for &(_, _, i) in order.iter().take(excess) {
        drop[i] = true;
    }
    let mut i = 0;
    doc.facts.retain(|_| {
        let keep = !drop[i];
        i += 1;
        keep
    });
}

/// A set of strings, as the map type the relevance index already uses (one hash table
/// type compiled into the wasm instead of one per element type).
fn key_set<S: AsRef<str>>(keys: impl Iterator<Item = S>) -> FxMap<Box<str>, u32> {
    keys.map(|k| (Box::from(k.as_ref()), 0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::{NewFact, SectionUpdate};
    use crate::ids::SequentialIds;

    const NOW: &str = "2026-03-14T10:30:00.000Z";
    const CFG: ApplyConfig = ApplyConfig { threshold: 0.7, max_facts: 100 };

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
        NewFact { content: content.into(), category: "knowledge".into(), confidence }
    }

    fn run(doc: &mut Document, delta: &Delta, cfg: &ApplyConfig) -> ApplyReport {
        let ids = SequentialIds::starting_at(0xa0);
        apply_delta(doc, delta, cfg, &ApplyContext { now_iso: NOW, source: "thread-1", ids: &ids })
    }

    #[test]
    fn section_replaced_only_when_flagged_and_not_blank() {
        let mut doc = Document::empty();
        doc.section_mut(SectionId::WorkContext).summary = "old work".into();
        doc.section_mut(SectionId::WorkContext).extra.insert("note".into(), "kept".into());
        doc.section_mut(SectionId::TopOfMind).summary = "old focus".into();
        doc.section_mut(SectionId::RecentMonths).summary = "old recent".into();
        let mut delta = Delta::default();
        delta.sections[SectionId::WorkContext.index()] =
            Some(SectionUpdate { summary: "  Staff engineer at Acme.  ".into(), should_update: true });
        delta.sections[SectionId::TopOfMind.index()] = Some(SectionUpdate { summary: "ignored".into(), should_update: false });
        delta.sections[SectionId::RecentMonths.index()] = Some(SectionUpdate { summary: "   ".into(), should_update: true });
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
    fn removal_runs_before_addition_and_ignores_unknown_ids() {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_00000001", "Uses Python 3.11", 0.9, NOW), fact("fact_00000002", "Likes tea", 0.8, NOW)];
        let delta = Delta {
            facts_to_remove: vec!["fact_00000001".into(), "fact_ffffffff".into()],
            new_facts: vec![nf("Uses Python 3.12", 0.95), nf("uses  python 3.11", 0.9)],
            ..Delta::default()
        };
        let report = run(&mut doc, &delta, &CFG);
        let contents: Vec<&str> = doc.facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, vec!["Likes tea", "Uses Python 3.12", "uses  python 3.11"]);
        assert_eq!(report.removed, vec!["fact_00000001"]);
        assert_eq!(report.added, vec!["fact_000000a0", "fact_000000a1"]);
    }

    #[test]
    fn new_facts_respect_threshold_trim_and_dedupe() {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_00000001", "Writes Go microservices", 0.9, NOW)];
        let delta = Delta {
            new_facts: vec![
                nf("  WRITES go   microservices ", 0.99),
                nf("Lives in Berlin", 0.7),
                nf("lives in berlin", 0.9),
                nf("Maybe likes jazz", 0.69),
                nf("   ", 0.9),
            ],
            ..Delta::default()
        };
        let report = run(&mut doc, &delta, &CFG);
        assert_eq!(report.added.len(), 1);
        let f = doc.facts.last().unwrap();
        assert_eq!((f.content.as_str(), f.created_at.as_str(), f.source.as_str()), ("Lives in Berlin", NOW, "thread-1"));
        assert_eq!(f.confidence, 0.7);
        assert_eq!(doc.facts.len(), 2);
    }

    #[test]
    fn eviction_drops_lowest_confidence_then_newest_and_keeps_order() {
        let mut doc = Document::empty();
        doc.facts = vec![
            fact("fact_00000001", "a", 0.8, "2026-01-01T00:00:00Z"),
            fact("fact_00000002", "b", 0.7, "2026-02-01T00:00:00Z"),
            fact("fact_00000003", "c", 0.9, "2026-01-01T00:00:00Z"),
            fact("fact_00000004", "d", 0.7, "2026-01-15T00:00:00.000000Z"),
            fact("fact_00000005", "e", 0.7, "2026-01-15T00:00:00Z"),
        ];
        let cfg = ApplyConfig { threshold: 0.7, max_facts: 3 };
        let report = run(&mut doc, &Delta::default(), &cfg);
        let ids: Vec<&str> = doc.facts.iter().map(|f| f.id.as_str()).collect();
        // 0.7s: b is newest → out; d and e tie on time → later position (e) out.
        assert_eq!(ids, vec!["fact_00000001", "fact_00000003", "fact_00000004"]);
        assert_eq!(report.removed, vec!["fact_00000002", "fact_00000005"]);
    }

    #[test]
    fn a_new_fact_evicted_at_once_is_not_reported() {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_00000001", "a", 0.9, "2026-01-01T00:00:00Z")];
        let delta = Delta { new_facts: vec![nf("b", 0.8)], ..Delta::default() };
        let report = run(&mut doc, &delta, &ApplyConfig { threshold: 0.7, max_facts: 1 });
        assert_eq!(doc.facts.len(), 1);
        assert!(report.is_empty(), "{report:?}");
    }

    #[test]
    fn upload_mentions_are_scrubbed_after_merging() {
        let mut doc = Document::empty();
        let mut delta =
            Delta { new_facts: vec![nf("User uploaded a tax PDF file", 0.95), nf("Works with CSV files", 0.9)], ..Delta::default() };
        delta.sections[SectionId::TopOfMind.index()] =
            Some(SectionUpdate { summary: "Preparing taxes. Uploaded three files to the chat.".into(), should_update: true });
        let report = run(&mut doc, &delta, &CFG);
        assert_eq!(doc.section(SectionId::TopOfMind).summary, "Preparing taxes.");
        assert_eq!(doc.facts.len(), 1);
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
    fn the_delta_is_replayable_and_deterministic() {
        let mut base = Document::empty();
        base.facts = vec![fact("fact_00000001", "a", 0.9, NOW)];
        let delta =
            Delta { new_facts: vec![nf("b", 0.9), nf("c", 0.8)], facts_to_remove: vec!["fact_00000001".into()], ..Delta::default() };
        let copy = delta.clone();
        let (mut d1, mut d2) = (base.clone(), base.clone());
        let r1 = run(&mut d1, &delta, &CFG);
        let r2 = run(&mut d2, &delta, &CFG);
        assert_eq!((d1, r1), (d2, r2));
        assert_eq!(delta, copy);
    }

    #[test]
    fn ids_of_removed_facts_are_not_reused() {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_000000a0", "x", 0.9, NOW)];
        let delta = Delta { new_facts: vec![nf("y", 0.9)], facts_to_remove: vec!["fact_000000a0".into()], ..Delta::default() };
        let report = run(&mut doc, &delta, &CFG);
        assert_eq!(report.added, vec!["fact_000000a1"]);
        assert_eq!(report.removed, vec!["fact_000000a0"]);
    }

    #[test]
    fn fresh_ids_avoid_existing_ones() {
        let mut doc = Document::empty();
        doc.facts = vec![fact("fact_000000a0", "x", 0.9, NOW)];
        let delta = Delta { new_facts: vec![nf("y", 0.9)], ..Delta::default() };
        let report = run(&mut doc, &delta, &CFG);
        assert_eq!(report.added, vec!["fact_000000a1"]);
    }
}
