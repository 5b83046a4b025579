//! The memory document: DeerFlow's `memory.json`, version "1.0" (docs/design.md#documents).
//!
//! Six fixed summary sections plus a list of scored facts. Every object level keeps the
//! fields this library does not know (`extra`), so a document imported from DeerFlow or
//! written by a newer version survives every read and write of this one.
//!
//! [`Document::from_value`] is the single gate through which outside data becomes a
//! document: it checks every field and names the first one that is wrong.

use crate::base::hash::FxMap;
use crate::base::ids::{fact_id, IdSource};
use crate::json::field::{object, opt_str, req_str, wrong_type};
use crate::json::{ArrayWriter, Map, ObjectWriter, ToJson, Value};

pub use crate::json::parse_decimal;

/// The document format version written by this library.
pub const VERSION: &str = "1.0";

/// Default confidence for facts that have none (docs/design.md#documents).
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

/// Category given to facts that have none.
pub const DEFAULT_CATEGORY: &str = "context";

/// `source` of facts added by hand.
pub const MANUAL_SOURCE: &str = "manual";

/// One of the six fixed summary sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SectionId {
    /// `user.workContext`: role, company, projects, stack.
    WorkContext,
    /// `user.personalContext`: languages, communication style, interests.
    PersonalContext,
    /// `user.topOfMind`: what the user is focused on now.
    TopOfMind,
    /// `history.recentMonths`: the last one to three months.
    RecentMonths,
    /// `history.earlierContext`: three to twelve months ago.
    EarlierContext,
    /// `history.longTermBackground`: foundational, rarely changing background.
    LongTermBackground,
}

impl SectionId {
    /// All six sections in document order.
    pub const ALL: [SectionId; 6] = [
        SectionId::WorkContext,
        SectionId::PersonalContext,
        SectionId::TopOfMind,
        SectionId::RecentMonths,
        SectionId::EarlierContext,
        SectionId::LongTermBackground,
    ];

    /// The group the section lives in: `"user"` or `"history"`.
    pub fn group(self) -> &'static str {
        match self {
            SectionId::WorkContext | SectionId::PersonalContext | SectionId::TopOfMind => "user",
            _ => "history",
        }
    }

    /// The JSON key of the section inside its group, e.g. `"workContext"`.
    pub fn key(self) -> &'static str {
        match self {
            SectionId::WorkContext => "workContext",
            SectionId::PersonalContext => "personalContext",
            SectionId::TopOfMind => "topOfMind",
            SectionId::RecentMonths => "recentMonths",
            SectionId::EarlierContext => "earlierContext",
            SectionId::LongTermBackground => "longTermBackground",
        }
    }

    /// The label used in the injected block, e.g. `"Work"`.
    pub fn label(self) -> &'static str {
        match self {
            SectionId::WorkContext => "Work",
            SectionId::PersonalContext => "Personal",
            SectionId::TopOfMind => "Current Focus",
            SectionId::RecentMonths => "Recent",
            SectionId::EarlierContext => "Earlier",
            SectionId::LongTermBackground => "Background",
        }
    }

    /// Position in [`SectionId::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Looks a section up by its group and key.
    pub fn find(group: &str, key: &str) -> Option<SectionId> {
        SectionId::ALL.into_iter().find(|s| s.group() == group && s.key() == key)
    }
}

/// A summary section: `{summary, updatedAt}` plus any unknown fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Section {
    /// The summary text; empty when nothing is known.
    pub summary: String,
    /// When the summary was last replaced (ISO-8601 UTC), or empty.
    pub updated_at: String,
    /// Fields this library does not know, kept as they were.
    pub extra: Map,
}

/// A discrete fact about the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// `fact_` + 8 lowercase hex (imported documents may carry other unique strings).
    pub id: String,
    /// The fact itself, one sentence.
    pub content: String,
    /// `preference`, `knowledge`, `context`, `behavior`, `goal`, `correction` or any other
    /// string the document carried.
    pub category: String,
    /// How sure the extraction was, finite and within [0, 1].
    pub confidence: f64,
    /// When the fact was added (ISO-8601 UTC), or empty if unknown.
    pub created_at: String,
    /// The thread the fact came from, `"manual"` for hand-added facts, `"unknown"` if unknown.
    pub source: String,
    /// Fields this library does not know, kept as they were.
    pub extra: Map,
}

/// The whole memory document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Format version, `"1.0"` for documents written by this library.
    pub version: String,
    /// When the document last changed (ISO-8601 UTC), or empty for a fresh one.
    pub last_updated: String,
    /// The six sections, indexed by [`SectionId::index`].
    pub sections: [Section; 6],
    /// The facts, oldest first.
    pub facts: Vec<Fact>,
    /// Unknown fields of the top level.
    pub extra: Map,
    /// Unknown fields of the `user` object.
    pub user_extra: Map,
    /// Unknown fields of the `history` object.
    pub history_extra: Map,
}

impl Default for Document {
    fn default() -> Self {
        Document {
            version: VERSION.to_string(),
            last_updated: String::new(),
            sections: Default::default(),
            facts: Vec::new(),
            extra: Map::new(),
            user_extra: Map::new(),
            history_extra: Map::new(),
        }
    }
}

/// An optional string field, owned.
fn opt_string(obj: &Map, key: &str, path: &str) -> Result<Option<String>, String> {
    Ok(opt_str(obj, path, key)?.map(str::to_string))
}

/// Reads a confidence: numbers and numeric strings are accepted and clamped to [0, 1];
/// `None` means absent.
pub(crate) fn read_confidence(v: Option<&Value>) -> Result<Option<f64>, &'static str> {
    let x = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64().ok_or("is not a finite number")?,
        Some(Value::String(s)) => match parse_decimal(s) {
            Some(x) => x,
            None => {
                let t = s.trim().trim_start_matches(['-', '+']).to_ascii_lowercase();
                return Err(if t == "nan" || t == "infinity" || t == "inf" { "is not a finite number" } else { "is not a number" });
            }
        },
        Some(_) => return Err("must be a number"),
    };
    if !x.is_finite() {
        return Err("is not a finite number");
    }
    Ok(Some(x.clamp(0.0, 1.0)))
}

/// Field of a fact (DeerFlow's name): days the fact is expected to stay true.
pub const EXPECTED_VALID_DAYS: &str = "expected_valid_days";
/// Field of a `correction` fact (DeerFlow's name): what was wrong.
pub const SOURCE_ERROR: &str = "sourceError";
/// Field of a fact (DeerFlow HEAD's name): when it was last re-stated, merged or reinforced.
pub const LAST_CONFIRMED_AT: &str = "lastConfirmedAt";
/// Field of a fact (DeerFlow HEAD's name): how often it was confirmed.
pub const CONFIRMATION_COUNT: &str = "confirmationCount";
/// Field of a fact (this library's): when the event it tells of happened, an ISO-8601 date
/// or date-time (`2023-05-07`, `2023-05-07T18:30:00Z`; see
/// [`event_days`](crate::base::time::event_days) for every accepted form). Facts without
/// one only have their `createdAt`, when they were learned.
pub const HAPPENED_AT: &str = "happenedAt";
/// The category whose facts are injected first and rendered with `(avoid: …)`.
pub const CORRECTION: &str = "correction";
/// Longest lifetime a fact may be given, in days (DeerFlow caps 90 × 20).
pub const MAX_VALID_DAYS: f64 = 1800.0;

/// One day in milliseconds.
pub(crate) const DAY_MS: f64 = 86_400_000.0;

/// The lifecycle fields live in [`Fact::extra`] under DeerFlow's names, so a document
/// written by DeerFlow keeps them and one written here reads there; these read them
/// leniently (a malformed value counts as absent).
impl Fact {
    /// `expected_valid_days`, when it is a positive finite number (numeric strings too).
    pub fn expected_valid_days(&self) -> Option<f64> {
        read_confidence_like(self.extra.get(EXPECTED_VALID_DAYS)).filter(|d| *d > 0.0)
    }

    /// `sourceError`, when it is a non-blank string.
    pub fn source_error(&self) -> Option<&str> {
        self.extra.get(SOURCE_ERROR).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }

    /// `lastConfirmedAt`, when it is a string.
    pub fn last_confirmed_at(&self) -> Option<&str> {
        self.extra.get(LAST_CONFIRMED_AT).and_then(Value::as_str)
    }

    /// `confirmationCount` (0 when absent or malformed).
    pub fn confirmation_count(&self) -> u64 {
        self.extra.get(CONFIRMATION_COUNT).and_then(Value::as_u64).unwrap_or(0)
    }

    /// `happenedAt`, trimmed, when it is a valid event time (a malformed imported value is
    /// kept in the document but counts as absent).
    pub fn happened_at(&self) -> Option<&str> {
        self.extra.get(HAPPENED_AT).and_then(Value::as_str).map(str::trim).filter(|s| crate::base::time::event_days(s).is_some())
    }

    /// The day `happenedAt` names, as days since 1970-01-01 (negative before), if valid.
    pub fn happened_days(&self) -> Option<i64> {
        self.happened_at().and_then(crate::base::time::event_days)
    }

    /// Whether the user wrote the fact by hand (`source: "manual"`).
    pub fn is_manual(&self) -> bool {
        self.source == MANUAL_SOURCE
    }

    /// When the fact was last known true (epoch ms): its last confirmation, else its creation.
    pub fn confirmed_ms(&self) -> Option<u64> {
        self.last_confirmed_at()
            .and_then(crate::base::time::millis_from_iso)
            .or_else(|| crate::base::time::millis_from_iso(&self.created_at))
    }

    /// Whether its lifetime (`expected_valid_days` from its last confirmation) is over at `now_ms`.
    /// The lifetime is read first: most facts have none, and parsing their timestamps on
    /// every `inject()` took a third of its time.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        let Some(days) = self.expected_valid_days() else { return false };
        self.confirmed_ms().is_some_and(|at| (at as f64) + days * DAY_MS <= now_ms as f64)
    }

    /// Records a confirmation at `now_iso`: `lastConfirmedAt` and `confirmationCount + 1`.
    /// A second confirmation at the same instant (or one at the instant of its creation)
    /// changes nothing, so a delta applied twice counts once. Returns whether it changed.
    pub fn confirm(&mut self, now_iso: &str) -> bool {
        // A fact created at this instant is confirmed by being created.
        if self.last_confirmed_at().unwrap_or(&self.created_at) == now_iso {
            return false;
        }
        let count = self.confirmation_count() + 1;
        self.extra.insert(LAST_CONFIRMED_AT.into(), now_iso.into());
        self.extra.insert(CONFIRMATION_COUNT.into(), count.into());
        true
    }

    /// Sets `expected_valid_days` (whole days, 1 to [`MAX_VALID_DAYS`]).
    pub fn set_expected_valid_days(&mut self, days: f64) {
        let days = days.clamp(1.0, MAX_VALID_DAYS).round() as u64;
        self.extra.insert(EXPECTED_VALID_DAYS.into(), days.into());
    }

    /// Sets `happenedAt` (the caller has checked it with
    /// [`event_days`](crate::base::time::event_days)).
    pub fn set_happened_at(&mut self, at: &str) {
        self.extra.insert(HAPPENED_AT.into(), at.trim().into());
    }

    /// Sets `sourceError`.
    pub fn set_source_error(&mut self, error: &str) {
        self.extra.insert(SOURCE_ERROR.into(), error.into());
    }
}

/// A finite number or numeric string, unclamped.
fn read_confidence_like(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => parse_decimal(s),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// Lower-cases and collapses whitespace: the key under which two facts count as the same.
pub fn normalize_content(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars() {
            crate::base::unicode::push_lowercase(&mut out, c);
        }
    }
    out
}

impl Section {
    /// Reads a section; a missing one is empty. `path` names it in the error.
    pub(crate) fn from_value(v: Option<&Value>, path: &str) -> Result<Section, String> {
        let v = match v {
            None | Some(Value::Null) => return Ok(Section::default()),
            Some(v) => v,
        };
        let obj = object(v, path)?;
        let extra = strip(obj, &SECTION_FIELDS);
        Ok(Section {
            summary: opt_string(obj, "summary", path)?.unwrap_or_default(),
            updated_at: opt_string(obj, "updatedAt", path)?.unwrap_or_default(),
            extra,
        })
    }
}

/// Known fields first, then unknown ones.
impl ToJson for Section {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.str("summary", &self.summary).str("updatedAt", &self.updated_at).entries(&self.extra, &SECTION_FIELDS);
        o.finish();
    }
}

impl Fact {
    /// Reads one fact; `index` is only used in error messages. A missing `id` is left empty
    /// for [`Document::from_value`] to fill in.
    pub(crate) fn from_value(v: &Value, index: usize) -> Result<Fact, String> {
        let path = crate::json::field::index_path("facts", index);
        let obj = object(v, &path)?;
        let content = req_str(obj, &path, "content")?.to_string();
        let confidence =
            read_confidence(obj.get("confidence")).map_err(|why| format!("`{path}.confidence` {why}"))?.unwrap_or(DEFAULT_CONFIDENCE);
        let category = opt_string(obj, "category", &path)?
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| DEFAULT_CATEGORY.to_string());
        let extra = strip(obj, &FACT_FIELDS);
        Ok(Fact {
            id: opt_string(obj, "id", &path)?.unwrap_or_default(),
            content,
            category,
            confidence,
            created_at: opt_string(obj, "createdAt", &path)?.unwrap_or_default(),
            source: opt_string(obj, "source", &path)?.unwrap_or_else(|| "unknown".to_string()),
            extra,
        })
    }
}

/// Known fields first, then unknown ones. The confidence is rounded to 4 decimals, so
/// repeated float arithmetic never shows up as `0.30000000000000004` in a user's file.
impl ToJson for Fact {
    fn write_json(&self, out: &mut String) {
        let confidence = if self.confidence.is_nan() { 0.0 } else { self.confidence.clamp(0.0, 1.0) };
        let mut o = ObjectWriter::new(out);
        o.str("id", &self.id)
            .str("content", &self.content)
            .str("category", &self.category)
            .fixed("confidence", confidence, 4)
            .str("createdAt", &self.created_at)
            .str("source", &self.source)
            .entries(&self.extra, &FACT_FIELDS);
        o.finish();
    }
}

/// The known fields of a section and of a fact, in the order they are written.
const SECTION_FIELDS: [&str; 2] = ["summary", "updatedAt"];
const FACT_FIELDS: [&str; 6] = ["id", "content", "category", "confidence", "createdAt", "source"];
const TOP_FIELDS: [&str; 5] = ["version", "lastUpdated", "user", "history", "facts"];
const USER_FIELDS: [&str; 3] = ["workContext", "personalContext", "topOfMind"];
const HISTORY_FIELDS: [&str; 3] = ["recentMonths", "earlierContext", "longTermBackground"];

#[cfg(test)]
impl Fact {
    /// A fact for unit tests: category `context`, source `manual`, created 2026-01-01.
    pub(crate) fn for_test(id: &str, content: &str, confidence: f64) -> Fact {
        Fact {
            id: id.into(),
            content: content.into(),
            category: DEFAULT_CATEGORY.into(),
            confidence,
            created_at: "2026-01-01T00:00:00Z".into(),
            source: MANUAL_SOURCE.into(),
            extra: Map::new(),
        }
    }
}

impl Document {
    /// An empty document.
    pub fn empty() -> Document {
        Document::default()
    }

    /// Whether the document holds nothing worth injecting: no summaries, no facts.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty() && self.sections.iter().all(|s| s.summary.trim().is_empty())
    }

    /// The section `id`.
    pub fn section(&self, id: SectionId) -> &Section {
        &self.sections[id.index()]
    }

    /// The section `id`, mutably.
    pub fn section_mut(&mut self, id: SectionId) -> &mut Section {
        &mut self.sections[id.index()]
    }

    /// The fact with `id`, if any.
    pub fn fact(&self, id: &str) -> Option<&Fact> {
        self.facts.iter().find(|f| f.id == id)
    }

    /// An id that no fact of this document has yet.
    pub fn fresh_id(&self, ids: &dyn IdSource) -> String {
        loop {
            let id = fact_id(ids.random_u32());
            if self.fact(&id).is_none() {
                return id;
            }
        }
    }

    /// Validates outside JSON and turns it into a document. The error names the first
    /// offending field, e.g. ``"`facts[3].content` must be a string, found a number"``.
    ///
    /// Missing sections become empty, facts without an `id` get a fresh one, facts without a
    /// `category` become `context`, and facts without a `confidence` get 0.5. Duplicate ids
    /// are an error (they would make `removeFact` ambiguous).
    pub fn from_value(v: &Value, ids: &dyn IdSource) -> Result<Document, String> {
        let obj = match v {
            Value::Object(o) => o,
            other => return Err(format!("memory must be a JSON object, found {}", other.type_name())),
        };
        let user = match obj.get("user") {
            Some(u) => object(u, "user")?,
            None => return Err("`user` is missing".into()),
        };
        let history = match obj.get("history") {
            Some(h) => object(h, "history")?,
            None => return Err("`history` is missing".into()),
        };
        let facts_v = match obj.get("facts") {
            Some(Value::Array(a)) => a,
            Some(other) => return Err(wrong_type("facts", "an array", other).into()),
            None => return Err("`facts` is missing".into()),
        };
        let mut doc = Document {
            version: opt_string(obj, "version", "memory")?.unwrap_or_else(|| VERSION.to_string()),
            last_updated: opt_string(obj, "lastUpdated", "memory")?.unwrap_or_default(),
            ..Document::default()
        };
        for id in SectionId::ALL {
            let group = if id.group() == "user" { user } else { history };
            let path = format!("{}.{}", id.group(), id.key());
            doc.sections[id.index()] = Section::from_value(group.get(id.key()), &path)?;
        }
        // Ids seen so far, hashed: this runs on every storage read, so it must stay linear
        // in the number of facts (a linear lookup per fact took 2.8 s at 20 000 facts).
        // (`Box<str>, u32`: the map type the rest of the crate uses, compiled once.)
        let mut seen: FxMap<Box<str>, u32> = FxMap::default();
        for (i, fv) in facts_v.iter().enumerate() {
            let fact = Fact::from_value(fv, i)?;
            if !fact.id.is_empty() && seen.insert(fact.id.as_str().into(), 0).is_some() {
                return Err(format!("`facts[{i}].id` \"{}\" is used twice", fact.id));
            }
            doc.facts.push(fact);
        }
        for fact in doc.facts.iter_mut().filter(|f| f.id.is_empty()) {
            fact.id = loop {
                let id = fact_id(ids.random_u32());
                if seen.insert(id.as_str().into(), 0).is_none() {
                    break id;
                }
            };
        }
        doc.extra = strip(obj, &TOP_FIELDS);
        doc.user_extra = strip(user, &USER_FIELDS);
        doc.history_extra = strip(history, &HISTORY_FIELDS);
        Ok(doc)
    }

    /// Parses and validates a JSON string (see [`Document::from_value`]).
    pub fn from_json(text: &str, ids: &dyn IdSource) -> Result<Document, String> {
        let v = Value::parse(text).map_err(|e| format!("not valid JSON: {e}"))?;
        Document::from_value(&v, ids)
    }
}

/// DeerFlow's field order, unknown fields after known ones.
impl ToJson for Document {
    fn write_json(&self, out: &mut String) {
        let mut top = ObjectWriter::new(out);
        top.str("version", &self.version).str("lastUpdated", &self.last_updated);
        for (group, known, extra) in [("user", &USER_FIELDS, &self.user_extra), ("history", &HISTORY_FIELDS, &self.history_extra)] {
            let mut o = ObjectWriter::new(top.key(group));
            for id in SectionId::ALL.into_iter().filter(|id| id.group() == group) {
                self.section(id).write_json(o.key(id.key()));
            }
            o.entries(extra, known);
            o.finish();
        }
        let mut facts = ArrayWriter::new(top.key("facts"));
        for f in &self.facts {
            f.write_json(facts.item());
        }
        facts.finish();
        top.entries(&self.extra, &TOP_FIELDS);
        top.finish();
    }
}

/// A copy of `obj` without the `known` fields.
fn strip(obj: &Map, known: &[&str]) -> Map {
    let mut out = obj.clone();
    out.retain(|k, _| !known.contains(&k));
    out
}
