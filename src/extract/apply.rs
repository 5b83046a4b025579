//! Applying a delta to a document, deterministically and failing closed.
//!
//! In this order, with one timestamp for the whole update:
//! 1. **Sections** are replaced when `shouldUpdate` is true, the summary is not blank and its
//!    labels say it is about the user in general (`scope` `user`, `durability` `durable`,
//!    `authority` `descriptive`; a missing label counts as accepted).
//! 2. **New facts** pass, each in turn: the confidence threshold, the same label gate, the
//!    assistant-copy filter (a fact the model copied from an assistant message that the user
//!    did not say), then: the same text as a fact this delta removes is *no change*; the same
//!    text as another fact *confirms* that fact; a near-duplicate (token Jaccard ≥ 0.7, same
//!    category) is *merged* into it (old id and `createdAt`, new wording unless the old fact
//!    is manual, the higher confidence, a confirmation); anything else is added.
//! 3. **`factsToReinforce`** confirm their facts (`lastConfirmedAt`, `confirmationCount`).
//! 4. **Removals** fail closed: a removal paired with a replacement (`replacementFactIndex`)
//!    applies only if that replacement passed every gate and survives the cap (a standing
//!    pair swaps one fact for another, so the cap evicts its replacement only after every
//!    other fact); a removal in a delta whose new facts were all refused applies not at all; more than
//!    [`MAX_UNPAIRED_REMOVALS`] unpaired removals are all refused; an unpaired removal of a
//!    fact the user's new messages share no word with is refused; a non-`user` scope removes
//!    nothing. A delta that only removes (the user asked to forget) still removes.
//! 5. **Eviction** over `max_facts`: expired facts first, then by the policy (lowest
//!    confidence, or confidence with confirmation freshness), among equals the newest.
//!    A manual fact is never evicted by an extraction.
//!
//! **Upload mentions** are scrubbed from the summaries and the old facts right after step 1,
//! and new facts that record an upload are refused in step 2.
//!
//! Every refusal is reported in [`ApplyReport::skipped`] with a stable reason from
//! [`crate::extract::delta::reasons`]. Invisible and bidi-control characters are stripped from all
//! stored text.
//!
//! The delta is only read, so a commit that lost a race can apply it again to the newer
//! document; applying it a second time with the same context changes nothing.
//! `last_updated` is left to the caller, which sets it when it commits. Every step is
//! linear in the number of facts (hash maps and an inverted token index; the eviction sort
//! is `n log n`).

use crate::base::hash::FxMap;
use crate::base::ids::IdSource;
use crate::base::time::millis_from_iso;
use crate::extract::delta::{cat, path, reasons, Delta, Labels, NewFact, Skipped};
use crate::extract::parse::USER_SAID;
use crate::extract::prompt::EXAMPLE_FACTS;
use crate::extract::said::{self, share_in};
use crate::extract::sanitize::{safe_category, strip_invisible};
use crate::extract::scrub::scrub_document;
use crate::memory::document::{normalize_content, Document, Fact, SectionId, CORRECTION};
use crate::memory::forget::Tombstone;
use crate::memory::message::{ChatMessage, Speaker};
use crate::recall::similar::{SetIndex, Vocab};

/// A new fact at least this similar (token Jaccard) to an existing one of the same category
/// is merged into it (DeerFlow's threshold).
pub const NEAR_DUPLICATE_JACCARD: f64 = 0.7;

/// A delta may remove at most this many facts without naming their replacements; with more,
/// none of those removals applies (small models copy every id they see).
pub const MAX_UNPAIRED_REMOVALS: usize = 3;

/// A new fact of at least [`COPY_MIN_TOKENS`] tokens is an assistant copy when at least this
/// share of its tokens occurs in one assistant message…
pub const COPY_ASSISTANT_SHARE: f64 = 0.7;
/// …and less than this share in the user's messages (measured on
/// `tests/data/assistant-copy.json`, docs/pipeline.md).
pub const COPY_USER_SHARE: f64 = 0.5;
/// Shorter facts are not judged (too few words to tell a copy from an agreement).
pub const COPY_MIN_TOKENS: usize = 3;

/// Confirmation freshness halves after this many days in the hybrid eviction policy.
pub const FRESHNESS_HALF_LIFE_DAYS: f64 = 90.0;
/// Weight of the confidence in the hybrid eviction score (the rest is freshness).
pub const HYBRID_CONFIDENCE_WEIGHT: f64 = 0.7;

/// Which facts go first when memory holds more than `maxFacts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionPolicy {
    /// Lowest confidence first, among equals the newest (DeerFlow's default).
    #[default]
    Confidence,
    /// Lowest `0.7 × confidence + 0.3 × freshness` first, where freshness is 1 for a fact
    /// confirmed today and halves every 90 days (DeerFlow HEAD's `hybrid-v1` without its
    /// access-heat term: this library does not write on reads).
    Hybrid,
}

impl EvictionPolicy {
    /// The option value: `"confidence"` or `"hybrid"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionPolicy::Confidence => "confidence",
            EvictionPolicy::Hybrid => "hybrid",
        }
    }

    /// Reads an option value.
    pub fn parse(s: &str) -> Option<EvictionPolicy> {
        match s {
            "confidence" => Some(EvictionPolicy::Confidence),
            "hybrid" => Some(EvictionPolicy::Hybrid),
            _ => None,
        }
    }
}

/// Limits applied while merging a delta.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplyConfig {
    /// New facts need at least this confidence (default 0.7).
    pub threshold: f64,
    /// At most this many facts are kept (default 100).
    pub max_facts: usize,
    /// What goes first over `max_facts`.
    pub policy: EvictionPolicy,
}

/// The conversation a delta was extracted from: what the model was shown.
#[derive(Debug, Clone, Copy)]
pub struct Conversation<'a> {
    /// Every message sent, the already-processed context first.
    pub messages: &'a [ChatMessage],
    /// Index of the first new (not yet processed) message.
    pub new_from: usize,
}

/// Where the applied changes come from.
pub struct ApplyContext<'a> {
    /// The one timestamp of this update (ISO-8601 UTC).
    pub now_iso: &'a str,
    /// `source` of new facts: the thread id.
    pub source: &'a str,
    /// Fresh fact ids.
    pub ids: &'a dyn IdSource,
    /// The conversation, for the assistant-copy filter and the removal guard; `None` skips
    /// both (a delta applied without one, as in replays of old tests).
    pub conversation: Option<Conversation<'a>>,
    /// What the user asked to forget: a new fact matching one is not stored.
    pub forgotten: &'a [Tombstone],
    /// The ids of the facts the prompt showed, when it showed only some: a removal of any
    /// other is refused (`not-shown`). `None`: the whole memory was shown.
    pub shown: Option<&'a [String]>,
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
    /// Ids of existing facts that were re-stated, merged into or reinforced.
    pub confirmed: Vec<String>,
    /// Facts dropped by the `max_facts` cap (existing ones and new ones evicted at once).
    pub evicted: Vec<Fact>,
    /// Every part of the delta that was refused or folded into an existing fact, and why.
    pub skipped: Vec<Skipped>,
}

impl ApplyReport {
    /// Whether the document was left as it was.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated_sections.is_empty() && self.confirmed.is_empty()
    }
}

/// A removal named by the delta, and whether it still stands.
struct Pending {
    /// Index in `factsToRemove`.
    index: usize,
    /// Position of its fact in the document.
    pos: usize,
    /// Index in `newFacts` of its replacement.
    replacement: Option<usize>,
    /// `None` while it stands; the refusal once refused.
    refused: Option<(&'static str, &'static str)>,
    /// "Remove X and add X's same text": dropped silently (reported on the new fact).
    cancelled: bool,
}

impl Pending {
    fn stands(&self) -> bool {
        self.refused.is_none() && !self.cancelled
    }
}

/// Applies `delta` to `doc` (see the module docs for every rule).
///
/// The report lists the net change: facts added that survived eviction and scrubbing,
/// facts of the original document that are gone, sections whose summary was replaced by
/// the delta or changed by the upload scrubber, facts confirmed, facts evicted, and every
/// refusal. A fact added and evicted in the same update appears in neither `added` nor
/// `removed` (it is in `evicted` and `skipped`).
pub fn apply_delta(doc: &mut Document, delta: &Delta, cfg: &ApplyConfig, ctx: &ApplyContext<'_>) -> ApplyReport {
    let mut applier = Applier::new(doc, delta, cfg, ctx);
    applier.sections();
    // Upload mentions go first, from the summaries and the old facts (new facts that
    // mention one are refused in step 2): so the cap and the removals are decided on what
    // stays, and a second application finds the same.
    scrub_document(applier.doc);
    applier.name_removals();
    applier.gather_new_facts();
    applier.place_new_facts();
    applier.reinforce();
    applier.judge_removals();
    applier.evict();
    applier.finish()
}

/// One application of a delta: what it reads, and what each step decided so far. The
/// steps are its methods, called in the module docs' order by [`apply_delta`].
struct Applier<'a, 'c> {
    doc: &'a mut Document,
    delta: &'a Delta,
    cfg: &'a ApplyConfig,
    ctx: &'a ApplyContext<'c>,
    report: ApplyReport,
    /// The ids of the document before the update, in order, and by id.
    original: Vec<String>,
    original_ids: FxMap<Box<str>, u32>,
    /// The section summaries before the update (the scrubber may change them too).
    before_summaries: Vec<String>,
    /// `ctx.now_iso` in milliseconds, for expiry and freshness.
    now_ms: u64,
    /// Which sections step 1 replaced, by [`SectionId::index`].
    replaced: [bool; 6],
    /// The token ids every comparison of this update shares.
    vocab: Vocab,
    /// The conversation's token sets (what the model saw); `None` without a conversation.
    sets: Option<ConversationSets>,
    /// Section strings and fragment summaries: kept as facts when they are the user's own
    /// words ([`salvage`]), else refused with the reason they carry.
    candidates: Vec<Candidate>,
    /// The removals the delta names, decided in step 4.
    pending: Vec<Pending>,
    /// Per document position: whether a pending removal names that fact (appended facts:
    /// `false`).
    removing: Vec<bool>,
    /// The facts to place and their path in the delta: the reply's, then the salvaged
    /// candidates (after them, so `replacementFactIndex` keeps pointing at the reply's).
    facts: Vec<(String, NewFact)>,
    /// `outcome[i]`: the position of the fact holding new fact `i`'s content afterwards.
    outcome: Vec<Option<usize>>,
    /// Positions of the facts appended.
    added: Vec<usize>,
}

impl<'a, 'c> Applier<'a, 'c> {
    fn new(doc: &'a mut Document, delta: &'a Delta, cfg: &'a ApplyConfig, ctx: &'a ApplyContext<'c>) -> Applier<'a, 'c> {
        let mut vocab = Vocab::new();
        let sets = ctx.conversation.map(|conv| ConversationSets::new(&mut vocab, &conv));
        let candidates = delta
            .section_strings
            .iter()
            .map(|s| Candidate {
                path: s.path.clone(),
                text: s.text.clone(),
                labels: Labels::default(),
                reason: reasons::INVALID,
                detail: if s.path.starts_with(USER_SAID) { NOT_OWN_WORDS } else { SECTION_STRING },
            })
            .collect();
        Applier {
            original: doc.facts.iter().map(|f| f.id.clone()).collect(),
            original_ids: ids_of(&doc.facts),
            before_summaries: doc.sections.iter().map(|s| s.summary.clone()).collect(),
            now_ms: millis_from_iso(ctx.now_iso).unwrap_or(0),
            doc,
            delta,
            cfg,
            ctx,
            report: ApplyReport::default(),
            replaced: [false; 6],
            vocab,
            sets,
            candidates,
            pending: Vec::new(),
            removing: Vec::new(),
            facts: Vec::new(),
            outcome: Vec::new(),
            added: Vec::new(),
        }
    }

    /// Step 1: replaces the summaries that pass the gates; fragments become candidates.
    fn sections(&mut self) {
        for id in SectionId::ALL {
            let Some(update) = self.delta.section(id) else { continue };
            if !update.should_update || update.summary.trim().is_empty() {
                continue;
            }
            let at = || cat(&[id.group(), ".", id.key()]);
            let skipped = &mut self.report.skipped;
            if !update.labels.accepted() {
                skipped.push(Skipped::new(at(), reasons::SCOPE_GATED, NOT_ABOUT_THE_USER));
                continue;
            }
            let summary = strip_invisible(update.summary.trim());
            let summary = summary.trim();
            if gates::copies_section_hint(summary) {
                skipped.push(Skipped::new(at(), reasons::PROMPT_COPY, "repeats the prompt's description of the section"));
                continue;
            }
            if let Some(sets) = self.sets.as_ref() {
                if said::task_shape(summary).is_some() {
                    skipped.push(Skipped::new(at(), reasons::TASK_RESIDUE, "the user's question or request, not a summary"));
                    continue;
                }
                let set = self.vocab.set(summary);
                if sets.assistant_copy(&mut self.vocab, &set) {
                    skipped.push(Skipped::new(at(), reasons::ASSISTANT_COPY, "mostly the assistant's words"));
                    continue;
                }
            }
            if gates::is_fragment(summary) {
                let detail = "too short to be a summary";
                self.candidates.push(Candidate {
                    path: at(),
                    text: summary.to_string(),
                    labels: update.labels.clone(),
                    reason: reasons::FRAGMENT,
                    detail,
                });
                continue;
            }
            if !summary.is_empty() {
                let section = self.doc.section_mut(id);
                section.summary = summary.to_string();
                section.updated_at = self.ctx.now_iso.to_string();
                self.replaced[id.index()] = true;
            }
        }
    }

    /// Before step 2: the removals the delta names that name a fact it may remove
    /// (decided in step 4).
    fn name_removals(&mut self) {
        let before_ids = ids_of(&self.doc.facts);
        let removals = &self.delta.facts_to_remove;
        for (index, r) in removals.iter().enumerate() {
            // The first mention of an id counts (as the parser keeps it).
            if removals[..index].iter().any(|x| x.id == r.id) {
                continue;
            }
            let at = || path("factsToRemove", index);
            let Some(&pos) = before_ids.get(r.id.as_str()) else {
                self.report.skipped.push(Skipped::new(at(), reasons::UNKNOWN_FACT, "no fact has this id").with_fact(&r.id));
                continue;
            };
            if self.ctx.shown.is_some_and(|shown| !shown.contains(&r.id)) {
                let why = "the extraction prompt did not show this fact";
                self.report.skipped.push(Skipped::new(at(), reasons::NOT_SHOWN, why).with_fact(&r.id));
                continue;
            }
            if r.scope.as_deref().is_some_and(|s| s != "user") {
                self.report.skipped.push(Skipped::new(at(), reasons::SCOPE_GATED, "scope is not user").with_fact(&r.id));
                continue;
            }
            self.pending.push(Pending { index, pos: pos as usize, replacement: r.replacement, refused: None, cancelled: false });
        }
        self.removing = vec![false; self.doc.facts.len()];
        for p in &self.pending {
            self.removing[p.pos] = true;
        }
    }

    /// Before step 2: the facts to place, the reply's and then the candidates that are the
    /// user's own words.
    fn gather_new_facts(&mut self) {
        self.facts = self.delta.new_facts.iter().enumerate().map(|(i, f)| (path("newFacts", i), f.clone())).collect();
        // What the reply's own facts say, so a statement of `userSaid` they already hold
        // ("I'm a nurse in Lyon" beside "Works as a nurse", "Lives in Lyon") is not kept twice.
        // A correction's wrong version counts as said ("I use pnpm, not npm" beside "Uses
        // pnpm" correcting "npm").
        let mut reply_facts: Vec<&str> = Vec::new();
        for f in &self.delta.new_facts {
            reply_facts.push(&f.content);
            reply_facts.extend(f.source_error.as_deref());
        }
        for c in std::mem::take(&mut self.candidates) {
            if c.path.starts_with(USER_SAID) && share_in(&c.text, &reply_facts) >= SAID_IN_REPLY_SHARE {
                self.report.skipped.push(Skipped::new(c.path, reasons::DUPLICATE, "the reply's newFacts already say this"));
                continue;
            }
            match self.sets.as_ref().map(|s| salvage(&mut self.vocab, s, self.doc, &c)) {
                Some(Ok(())) => self.facts.push((
                    c.path,
                    NewFact {
                        content: c.text,
                        category: "context".into(),
                        confidence: gates::SALVAGE_CONFIDENCE,
                        labels: c.labels,
                        ..NewFact::default()
                    },
                )),
                Some(Err((reason, detail))) => self.report.skipped.push(Skipped::new(c.path, reason, detail)),
                None => self.report.skipped.push(Skipped::new(c.path, c.reason, c.detail)),
            }
        }
    }

    /// Step 2: places each new fact in turn ([`Applier::place`]) and records where it went.
    fn place_new_facts(&mut self) {
        self.outcome = vec![None; self.facts.len()];
        if self.facts.is_empty() {
            return;
        }
        let mut known = Known::new(self.doc, self.ctx.forgotten, &mut self.vocab);
        let facts = std::mem::take(&mut self.facts);
        for (i, (path, nf)) in facts.iter().enumerate() {
            let placed = self.place(nf, &mut known);
            self.record(i, path, placed, &known.exact);
        }
        self.facts = facts;
    }

    /// Notes where new fact `i` (at `path`) went: its outcome, and its report entry.
    fn record(&mut self, i: usize, path: &str, placed: Placed, exact: &Exact) {
        let path = path.to_string();
        let skipped = match placed {
            Placed::Refused(reason, detail) => Skipped::new(path, reason, detail),
            Placed::Forgotten(k) => {
                let why = "the user asked to forget this";
                Skipped::new(path, reasons::FORGOTTEN, why).with_fact(&self.ctx.forgotten[k].id)
            }
            Placed::Unchanged(pos) => {
                let same = exact.positions(&normalize_content(&self.doc.facts[pos].content));
                for p in self.pending.iter_mut().filter(|p| same.contains(&p.pos)) {
                    p.cancelled = true;
                }
                self.outcome[i] = Some(pos);
                Skipped::new(path, reasons::UNCHANGED, "re-added with the same text").with_fact(&self.doc.facts[pos].id)
            }
            Placed::Confirmed(pos, reason, detail) => {
                self.outcome[i] = Some(pos);
                Skipped::new(path, reason, detail).with_fact(&self.doc.facts[pos].id)
            }
            Placed::Added(pos) => {
                self.outcome[i] = Some(pos);
                self.added.push(pos);
                self.removing.push(false);
                return;
            }
        };
        self.report.skipped.push(skipped);
    }

    /// Decides where new fact `nf` goes and does it (confirm, merge or append).
    fn place(&mut self, nf: &NewFact, known: &mut Known) -> Placed {
        let content = strip_invisible(nf.content.trim());
        let content = content.trim();
        let key = normalize_content(content);
        if let Some(refused) = self.refusal(nf, content, &key, known) {
            return refused;
        }
        let confidence = nf.confidence.clamp(0.0, 1.0);
        // Every fact with this text (an imported document may hold one twice): all are
        // confirmed, so a second application finds nothing left to confirm.
        let same = known.exact.positions(&key);
        if !same.is_empty() {
            for &pos in &same {
                let f = &mut self.doc.facts[pos];
                f.confidence = f.confidence.max(confidence);
                f.confirm(self.ctx.now_iso);
                if f.happened_at().is_none() {
                    set_happened_at(f, nf);
                }
            }
            return match same.iter().find(|&&p| !self.removing[p]) {
                Some(&pos) => Placed::Confirmed(pos, reasons::DUPLICATE, "same text as an existing fact"),
                // "Remove X and add X's text": X stays.
                None => Placed::Unchanged(same[0]),
            };
        }
        let set = self.vocab.set(content);
        if let Some(sets) = self.sets.as_ref() {
            if sets.assistant_copy(&mut self.vocab, &set) {
                return Placed::Refused(reasons::ASSISTANT_COPY, "mostly the assistant's words");
            }
        }
        let category = {
            let c = safe_category(&nf.category);
            if c.is_empty() {
                crate::memory::document::DEFAULT_CATEGORY.to_string()
            } else {
                c.into_owned()
            }
        };
        let (doc, removing) = (&mut *self.doc, &self.removing);
        let near = known.index.best(&set, NEAR_DUPLICATE_JACCARD, |item| {
            let p = item as usize;
            p < removing.len() && !removing[p] && doc.facts[p].category == category
        });
        if let Some((item, _)) = near {
            let pos = item as usize;
            let f = &mut doc.facts[pos];
            if !f.is_manual() {
                f.content = content.to_string();
            }
            f.confidence = f.confidence.max(confidence);
            f.confirm(self.ctx.now_iso);
            set_lifecycle(f, nf);
            known.exact.insert(key, pos);
            return Placed::Confirmed(pos, reasons::NEAR_DUPLICATE, "same meaning as an existing fact");
        }
        // Facts the delta removes are still in `doc`, so their ids are not reused either
        // (clients may still hold them).
        let mut fact = Fact {
            id: doc.fresh_id(self.ctx.ids),
            content: content.to_string(),
            category,
            confidence,
            created_at: self.ctx.now_iso.to_string(),
            source: self.ctx.source.to_string(),
            extra: Default::default(),
        };
        set_lifecycle(&mut fact, nf);
        let pos = doc.facts.len();
        doc.facts.push(fact);
        known.index.add(&set);
        known.exact.insert(key, pos);
        Placed::Added(pos)
    }

    /// Why new fact `nf` (its stripped `content`, normalised `key`) is not stored, if it
    /// is not: the confidence threshold, the label gate, empty text, an upload, a forget
    /// tombstone, a copy of the prompt or the user's task.
    fn refusal(&mut self, nf: &NewFact, content: &str, key: &str, known: &mut Known) -> Option<Placed> {
        let confidence = nf.confidence;
        if !confidence.is_finite() || confidence < self.cfg.threshold {
            return Some(Placed::Refused(reasons::BELOW_THRESHOLD, "confidence below threshold"));
        }
        if !nf.labels.accepted() {
            return Some(Placed::Refused(reasons::SCOPE_GATED, NOT_ABOUT_THE_USER));
        }
        if key.is_empty() {
            return Some(Placed::Refused(reasons::INVALID, "content is empty"));
        }
        if crate::extract::scrub::mentions_upload(content) {
            // It would be scrubbed right after: refusing it now keeps a removal paired with it
            // from applying.
            return Some(Placed::Refused(reasons::UPLOAD, "records a file upload"));
        }
        if !self.ctx.forgotten.is_empty() {
            let same = known.forgotten_exact.positions(key).first().copied();
            let near = || known.forgotten_index.best(&self.vocab.set(content), NEAR_DUPLICATE_JACCARD, |_| true).map(|(k, _)| k as usize);
            let variant = || {
                let words = crate::memory::forget::skeleton(content);
                known.skeletons.iter().position(|t| crate::memory::forget::variant_of(t, &words))
            };
            if let Some(k) = same.or_else(near).or_else(variant) {
                return Some(Placed::Forgotten(k));
            }
        }
        let sets = self.sets.as_ref()?;
        copied_or_task(&mut self.vocab, sets, content).map(|(reason, detail)| Placed::Refused(reason, detail))
    }

    /// Step 3: `factsToReinforce` confirm their facts.
    fn reinforce(&mut self) {
        let ids_now = ids_of(&self.doc.facts);
        for (k, id) in self.delta.facts_to_reinforce.iter().enumerate() {
            match ids_now.get(id.as_str()) {
                Some(&pos) => {
                    self.doc.facts[pos as usize].confirm(self.ctx.now_iso);
                }
                None => self
                    .report
                    .skipped
                    .push(Skipped::new(path("factsToReinforce", k), reasons::UNKNOWN_FACT, "no fact has this id").with_fact(id)),
            }
        }
    }

    /// Step 4: a removal paired with a replacement stands only while the replacement passed
    /// every gate; one without stands only if some new fact did (or the delta adds none:
    /// "forget this", which the user's words must then mention).
    fn judge_removals(&mut self) {
        let unpaired = self.pending.iter().filter(|p| p.stands() && p.replacement.is_none()).count();
        let n_reply_facts = self.delta.new_facts.len();
        let any_placed = self.outcome[..n_reply_facts].iter().any(Option::is_some);
        for p in self.pending.iter_mut().filter(|p| p.stands()) {
            match p.replacement {
                Some(r) if r >= n_reply_facts => {
                    p.refused = Some((reasons::REPLACEMENT_NOT_APPLIED, "replacementFactIndex past newFacts"));
                }
                Some(r) if self.outcome[r].is_none() => {
                    p.refused = Some((reasons::REPLACEMENT_NOT_APPLIED, "replacement refused"));
                }
                Some(_) => {}
                None if n_reply_facts > 0 && !any_placed => {
                    p.refused = Some((reasons::NO_FACT_APPLIED, "no new fact applied"));
                }
                None if unpaired > MAX_UNPAIRED_REMOVALS => {
                    p.refused = Some((reasons::TOO_MANY_REMOVALS, "over 3 unpaired removals"));
                }
                // A delta that stores nothing and only deletes ("forget this") must be about
                // what the user said. One that also stored something (a duplicate or a
                // near-duplicate counts: the model read this conversation as news about the
                // user) may drop a fact it judged stale, within the guard above.
                None if !any_placed => {
                    let Some(sets) = self.sets.as_ref() else { continue };
                    let set = self.vocab.set(&self.doc.facts[p.pos].content);
                    let new_user: Vec<&[u32]> = sets.new_user.iter().map(Vec::as_slice).collect();
                    if !set.is_empty() && self.vocab.overlap(&set, &new_user) == 0 {
                        p.refused = Some((reasons::REMOVAL_UNRELATED, "not in the user's new messages"));
                    }
                }
                None => {}
            }
        }
    }

    /// Step 5: the `max_facts` cap. A standing pair swaps one fact for another, so its
    /// replacement is evicted only after every other fact (when the cap is smaller than
    /// what must stay); then the pair is refused, its old fact restored, and the cap decided
    /// again. Drops what the delta removes and what the cap evicts.
    fn evict(&mut self) {
        let evict_set = loop {
            let mut gone = vec![false; self.doc.facts.len()];
            let mut last = vec![false; self.doc.facts.len()];
            for p in self.pending.iter().filter(|p| p.stands()) {
                gone[p.pos] = true;
                if let Some(pos) = p.replacement.and_then(|r| self.outcome[r]) {
                    last[pos] = true;
                }
            }
            let evicted = eviction(self.doc, &gone, &last, self.cfg, self.now_ms, &Fact::is_manual);
            for &e in &evicted {
                gone[e] = true;
            }
            let mut changed = false;
            for p in self.pending.iter_mut().filter(|p| p.stands()) {
                if p.replacement.is_some_and(|r| self.outcome[r].is_some_and(|pos| gone[pos])) {
                    p.refused = Some((reasons::REPLACEMENT_NOT_APPLIED, "replacement evicted by maxFacts"));
                    changed = true;
                }
            }
            if !changed {
                break gone;
            }
        };
        let mut removed_by_delta = vec![false; self.doc.facts.len()];
        for p in &self.pending {
            match p.refused {
                Some((reason, detail)) => self
                    .report
                    .skipped
                    .push(Skipped::new(path("factsToRemove", p.index), reason, detail).with_fact(&self.doc.facts[p.pos].id)),
                None if !p.cancelled => removed_by_delta[p.pos] = true,
                None => {}
            }
        }
        for (i, pos) in self.outcome.iter().enumerate() {
            if let Some(pos) = *pos {
                if evict_set[pos] && !removed_by_delta[pos] && self.added.contains(&pos) {
                    self.report.skipped.push(Skipped::new(self.facts[i].0.clone(), reasons::EVICTED, "evicted by maxFacts"));
                }
            }
        }
        let facts = std::mem::take(&mut self.doc.facts);
        for (k, f) in facts.into_iter().enumerate() {
            let gone = evict_set[k];
            if gone && !removed_by_delta[k] {
                self.report.evicted.push(f.clone());
            }
            if !gone {
                self.doc.facts.push(f);
            }
        }
    }

    /// The report's net change: what was added, removed, confirmed and updated.
    fn finish(self) -> ApplyReport {
        let Applier { doc, ctx, mut report, original, original_ids, before_summaries, replaced, .. } = self;
        let after = ids_of(&doc.facts);
        report.added = doc.facts.iter().filter(|f| !original_ids.contains_key(f.id.as_str())).map(|f| f.id.clone()).collect();
        report.removed = original.into_iter().filter(|id| !after.contains_key(id.as_str())).collect();
        report.confirmed = doc
            .facts
            .iter()
            .filter(|f| f.last_confirmed_at() == Some(ctx.now_iso) && original_ids.contains_key(f.id.as_str()))
            .map(|f| f.id.clone())
            .collect();
        for id in SectionId::ALL {
            if replaced[id.index()] || doc.section(id).summary != before_summaries[id.index()] {
                report.updated_sections.push(id);
            }
        }
        report
    }
}

/// What a new fact is compared with: the document's facts (by normalised text and by token
/// set, appended facts included) and the forget tombstones (the same two tests, and their
/// confusable skeletons).
#[derive(Default)]
struct Known {
    exact: Exact,
    index: SetIndex,
    forgotten_exact: Exact,
    forgotten_index: SetIndex,
    skeletons: Vec<Vec<String>>,
}

impl Known {
    fn new(doc: &Document, forgotten: &[Tombstone], vocab: &mut Vocab) -> Known {
        let mut known = Known::default();
        for (pos, f) in doc.facts.iter().enumerate() {
            known.exact.insert(normalize_content(&f.content), pos);
            known.index.add(&vocab.set(&f.content));
        }
        for (k, t) in forgotten.iter().enumerate() {
            known.forgotten_exact.insert(t.content.clone(), k);
            known.forgotten_index.add(&vocab.set(&t.content));
            known.skeletons.push(crate::memory::forget::skeleton(&t.content));
        }
        known
    }
}

/// Where a new fact went.
enum Placed {
    /// Not stored: the reason code and a detail.
    Refused(&'static str, &'static str),
    /// Not stored: it matches the forget tombstone at that index.
    Forgotten(usize),
    /// The same text as a fact this delta removes (at that position): no change.
    Unchanged(usize),
    /// Folded into the fact at that position, which was confirmed.
    Confirmed(usize, &'static str, &'static str),
    /// Appended at that position.
    Added(usize),
}

/// Normalised content → every position holding it (a chain through `prev`).
#[derive(Default)]
struct Exact {
    last: FxMap<Box<str>, u32>,
    prev: Vec<u32>,
}

impl Exact {
    fn insert(&mut self, key: String, pos: usize) {
        if self.prev.len() <= pos {
            self.prev.resize(pos + 1, u32::MAX);
        }
        let before = self.last.insert(key.into(), pos as u32).unwrap_or(u32::MAX);
        self.prev[pos] = if before as usize == pos { self.prev[pos] } else { before };
    }

    /// The positions holding `key`, first one first.
    fn positions(&self, key: &str) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = self.last.get(key).copied().unwrap_or(u32::MAX);
        while at != u32::MAX && out.len() < self.prev.len() {
            out.push(at as usize);
            at = self.prev[at as usize];
        }
        out.reverse();
        out
    }
}

/// Copies `expected_valid_days`, `happenedAt` and (on corrections) `sourceError` from a new
/// fact. A manual fact that already has a `happenedAt` keeps the user's.
fn set_lifecycle(f: &mut Fact, nf: &NewFact) {
    if !(f.is_manual() && f.happened_at().is_some()) {
        set_happened_at(f, nf);
    }
    if let Some(days) = nf.expected_valid_days.filter(|d| d.is_finite() && *d > 0.0) {
        f.set_expected_valid_days(days);
    }
    if f.category == CORRECTION {
        if let Some(err) = nf.source_error.as_deref().map(|e| strip_invisible(e.trim()).into_owned()).filter(|e| !e.trim().is_empty()) {
            f.set_source_error(err.trim());
        }
    }
}

/// Sets the new fact's `happenedAt` on `f`, if it has a valid one.
fn set_happened_at(f: &mut Fact, nf: &NewFact) {
    if let Some(at) = nf.happened_at.as_deref().filter(|at| crate::base::time::event_days(at).is_some()) {
        f.set_happened_at(at);
    }
}

/// The token sets of the conversation's messages.
struct ConversationSets {
    assistant: Vec<Vec<u32>>,
    user: Vec<Vec<u32>>,
    /// The user's messages after the already-processed context.
    new_user: Vec<Vec<u32>>,
    /// What the user's messages quote or paste ([`gates::quoted_parts`]).
    quoted: Vec<Vec<u32>>,
    /// The user's clauses that ask something (end with a question mark), and the others.
    questions: Vec<Vec<u32>>,
    statements: Vec<Vec<u32>>,
    /// The prompt's example facts and the word that would make each the user's.
    examples: Vec<(Vec<u32>, Vec<u32>)>,
}

impl ConversationSets {
    fn new(vocab: &mut Vocab, conv: &Conversation<'_>) -> ConversationSets {
        let mut sets = ConversationSets {
            assistant: Vec::new(),
            user: Vec::new(),
            new_user: Vec::new(),
            quoted: Vec::new(),
            questions: Vec::new(),
            statements: Vec::new(),
            examples: Vec::new(),
        };
        for (i, m) in conv.messages.iter().enumerate() {
            let set = vocab.set(&m.content);
            match m.role {
                Speaker::Assistant => sets.assistant.push(set),
                Speaker::User => {
                    if i >= conv.new_from {
                        sets.new_user.push(set.clone());
                    }
                    sets.user.push(set);
                    let quoted = gates::quoted_parts(&m.content);
                    if !quoted.is_empty() {
                        sets.quoted.push(vocab.set(&quoted));
                    }
                    for (clause, asks) in gates::clauses(&m.content) {
                        let set = vocab.set(clause);
                        if asks {
                            sets.questions.push(set);
                        } else {
                            sets.statements.push(set);
                        }
                    }
                }
            }
        }
        sets.examples = EXAMPLE_FACTS.iter().map(|(fact, word)| (vocab.set(fact), vocab.set(word))).collect();
        sets
    }

    /// The share of `set`'s tokens that occur in `of` (0 for an empty set).
    fn share(vocab: &mut Vocab, set: &[u32], of: &[Vec<u32>]) -> f64 {
        if set.is_empty() {
            return 0.0;
        }
        let of: Vec<&[u32]> = of.iter().map(Vec::as_slice).collect();
        vocab.overlap(set, &of) as f64 / set.len() as f64
    }

    /// Whether a fact with token set `set` is a copy of an assistant message: at least
    /// [`COPY_ASSISTANT_SHARE`] of its tokens in one assistant message and less than
    /// [`COPY_USER_SHARE`] in the user's messages.
    fn assistant_copy(&self, vocab: &mut Vocab, set: &[u32]) -> bool {
        if set.len() < COPY_MIN_TOKENS {
            return false;
        }
        let n = set.len() as f64;
        let best = self.assistant.iter().map(|s| vocab.overlap(set, &[s]) as f64 / n).fold(0.0, f64::max);
        if best < COPY_ASSISTANT_SHARE {
            return false;
        }
        let user: Vec<&[u32]> = self.user.iter().map(Vec::as_slice).collect();
        (vocab.overlap(set, &user) as f64 / n) < COPY_USER_SHARE
    }
}

/// A section string or fragment summary that may become a fact, and the refusal it gets
/// when it does not.
struct Candidate {
    path: String,
    text: String,
    labels: Labels,
    reason: &'static str,
    detail: &'static str,
}

/// The detail of a statement of `userSaid` that is not kept.
const NOT_OWN_WORDS: &str = "not what the user stated in their own words";

/// The share of a `userSaid` statement's words in the reply's own new facts from which it
/// is taken as said already: three words in four, so a statement that says more is kept.
const SAID_IN_REPLY_SHARE: f64 = 0.75;

/// The detail of a section given as a bare string that is not kept.
const SECTION_STRING: &str = "`section` must be an object {summary, shouldUpdate}, found a string (not the user's own words)";

/// Whether a section string or fragment summary is the user's own words, worth placing as
/// a fact: not the prompt's description of a section, not a time phrase, and at least
/// [`gates::SALVAGE_USER_SHARE`] of its tokens in the user's messages. `Err`: the refusal.
fn salvage(vocab: &mut Vocab, sets: &ConversationSets, doc: &Document, c: &Candidate) -> Result<(), (&'static str, &'static str)> {
    if gates::copies_section_hint(&c.text) {
        return Err((reasons::PROMPT_COPY, "repeats the prompt's description of a section"));
    }
    if gates::is_time_phrase(&c.text) {
        return Err((reasons::FRAGMENT, "a time phrase, not a summary or a fact"));
    }
    // What the user states, not what they ask ("boiling" of "how long should I boil an egg?").
    let set = vocab.set(&c.text);
    if ConversationSets::share(vocab, &set, &sets.statements) < gates::SALVAGE_USER_SHARE {
        return Err((c.reason, c.detail));
    }
    // A keyword of a fact memory holds ("Berlin" of "Lives in Berlin" when the user moved
    // away) says nothing new.
    if doc.facts.iter().any(|f| {
        let fact = vocab.set(&f.content);
        fact.len() > set.len() && vocab.overlap(&set, &[&fact]) == set.len()
    }) {
        return Err((reasons::FRAGMENT, "a keyword of a fact memory already holds"));
    }
    Ok(())
}

/// Why a new fact copies the prompt or is the user's task, if it does: a restated example
/// fact whose word the user never said, a section description, a question or request, or
/// text that is mostly what the user quoted or pasted.
fn copied_or_task(vocab: &mut Vocab, sets: &ConversationSets, content: &str) -> Option<(&'static str, &'static str)> {
    if gates::copies_section_hint(content) {
        return Some((reasons::PROMPT_COPY, "repeats the prompt's description of a section"));
    }
    let set = vocab.set(content);
    for (example, word) in &sets.examples {
        // The example's own word (npm, Porto …) that the user never wrote, or its text.
        let has_word = !word.is_empty() && vocab.overlap(word, &[&set]) == word.len();
        let common = vocab.overlap(&set, &[example]);
        let restated = crate::recall::similar::jaccard(set.len(), example.len(), common) >= NEAR_DUPLICATE_JACCARD;
        if (has_word || restated) && ConversationSets::share(vocab, word, &sets.user) < 1.0 {
            return Some((reasons::PROMPT_COPY, "restates an example of the prompt the user did not say"));
        }
    }
    if let Some(why) = said::task_shape(content) {
        return Some((reasons::TASK_RESIDUE, if why == "a question" { "a question, not a fact" } else { "a request, not a fact" }));
    }
    if !sets.quoted.is_empty() && ConversationSets::share(vocab, &set, &sets.quoted) >= COPY_ASSISTANT_SHARE {
        return Some((reasons::TASK_RESIDUE, "mostly text the user quoted or pasted"));
    }
    // The user's question turned into a statement ("Sleeping after a night shift is
    // crucial …" from "Any tips for sleeping after a night shift?"): several of its words,
    // none of what the user states.
    let questions: Vec<&[u32]> = sets.questions.iter().map(Vec::as_slice).collect();
    let statements: Vec<&[u32]> = sets.statements.iter().map(Vec::as_slice).collect();
    if vocab.overlap(&set, &questions) >= gates::QUESTION_TOKENS && vocab.overlap(&set, &statements) == 0 {
        return Some((reasons::TASK_RESIDUE, "restates the user's question, nothing they said about themself"));
    }
    None
}

/// Positions of the facts to evict so that at most `cfg.max_facts` of those not `gone`
/// remain: facts not marked `last` before those marked, then expired first, then by the
/// policy, among equals the newest (`createdAt`, then position). Facts `protect` returns
/// true for are never chosen. (Not inlined: two callers would carry a copy each.)
#[inline(never)]
fn eviction(doc: &Document, gone: &[bool], last: &[bool], cfg: &ApplyConfig, now_ms: u64, protect: &dyn Fn(&Fact) -> bool) -> Vec<usize> {
    let alive = gone.iter().filter(|g| !**g).count();
    let excess = alive.saturating_sub(cfg.max_facts);
    if excess == 0 {
        return Vec::new();
    }
    let mut order: Vec<(bool, bool, f64, Option<u64>, usize)> = doc
        .facts
        .iter()
        .enumerate()
        .filter(|(i, f)| !gone[*i] && !protect(f))
        .map(|(i, f)| {
            (
                last.get(i).copied().unwrap_or(false),
                f.is_expired(now_ms),
                keep_score(f, cfg.policy, now_ms),
                millis_from_iso(&f.created_at),
                i,
            )
        })
        .collect();
    // Eviction order: not `last` first, expired first, score ascending, then created
    // descending (unknown = oldest), then position descending.
    crate::base::sort::sort_by(&mut order, |a, b| {
        a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.total_cmp(&b.2)).then(b.3.cmp(&a.3)).then(b.4.cmp(&a.4)).is_lt()
    });
    order.iter().take(excess).map(|o| o.4).collect()
}

/// How much a fact deserves to stay under `policy` (higher stays longer).
fn keep_score(f: &Fact, policy: EvictionPolicy, now_ms: u64) -> f64 {
    match policy {
        EvictionPolicy::Confidence => f.confidence,
        EvictionPolicy::Hybrid => {
            // A hyperbolic decay (1 today, ½ after one half-life, ⅓ after two): no
            // transcendental functions in the wasm.
            let freshness = f.confirmed_ms().map_or(0.0, |at| {
                let days = now_ms.saturating_sub(at) as f64 / 86_400_000.0;
                FRESHNESS_HALF_LIFE_DAYS / (FRESHNESS_HALF_LIFE_DAYS + days)
            });
            HYBRID_CONFIDENCE_WEIGHT * f.confidence + (1.0 - HYBRID_CONFIDENCE_WEIGHT) * freshness
        }
    }
}

/// Applies the `max_facts` cap outside an extraction (`addFact`, `import`): evicts by the
/// policy, manual facts included, but never the facts `keep` names. Returns what was evicted.
pub fn enforce_max_facts(doc: &mut Document, cfg: &ApplyConfig, now_iso: &str, keep: &[&str]) -> Vec<Fact> {
    let now_ms = millis_from_iso(now_iso).unwrap_or(0);
    let gone = vec![false; doc.facts.len()];
    let evicted = eviction(doc, &gone, &[], cfg, now_ms, &|f: &Fact| keep.contains(&f.id.as_str()));
    if evicted.is_empty() {
        return Vec::new();
    }
    let mut drop = vec![false; doc.facts.len()];
    for e in evicted {
        drop[e] = true;
    }
    let mut out = Vec::new();
    let mut i = 0;
    doc.facts.retain(|f| {
        let d = drop[i];
        i += 1;
        if d {
            out.push(f.clone());
        }
        !d
    });
    out
}

/// Fact id → position, as the map type the relevance index already uses (one hash table
/// type compiled into the wasm instead of one per element type). The first position of a
/// repeated id wins.
fn ids_of(facts: &[Fact]) -> FxMap<Box<str>, u32> {
    let mut m: FxMap<Box<str>, u32> = FxMap::default();
    for (i, f) in facts.iter().enumerate() {
        m.entry(Box::from(f.id.as_str())).or_insert(i as u32);
    }
    m
}

/// The detail of a `scope-gated` refusal.
const NOT_ABOUT_THE_USER: &str = "labelled not a lasting fact about the user";

pub mod gates;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
