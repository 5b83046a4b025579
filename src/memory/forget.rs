//! Forget tombstones: what the user asked to forget (`removeFact(id, { forget: true })`), so
//! that extraction does not learn it again from the next conversation that mentions it.
//!
//! Stored in the record beside the document (committed atomically with the removal):
//! `"forgotten":[{"id":"fact_…","content":"allergic to penicillin","at":1773484200000}]`,
//! oldest first. A tombstone holds only what matching needs: the fact's normalised content
//! ([`normalize_content`]) and the id it had (to name it in `processed.skipped` and to
//! `unforget` it). Matching ([`Tombstones::find`]) is [`crate::extract::apply`]'s duplicate
//! test (the same normalised text, or a near-duplicate by token Jaccard, whatever the
//! category) and [`variant_of`]: the same words on a confusable-folded skeleton (Cyrillic
//! `е` for `e`, fullwidth letters), give or take a one-letter slip in a long word, up to two
//! added words (`(severe)`) or one dropped from a long fact, never a negation. With an
//! embedder, the engine also matches by meaning ([`FORGET_COSINE`], [`same_claim`];
//! `src/engine/embedding.rs`).

use crate::base::time::Millis;
use crate::json::{ArrayWriter, ObjectWriter, ToJson, Value};
use crate::memory::document::{normalize_content, Fact};
use crate::recall::similar::{jaccard, Vocab};

/// Token Jaccard at or above which a text is a near-duplicate of a tombstone (the same
/// threshold as a near-duplicate fact).
pub const FORGET_JACCARD: f64 = 0.7;

/// Tombstones kept: past this, the oldest are dropped (each is one short sentence, so the
/// list stays under ~100 KB).
pub const MAX_TOMBSTONES: usize = 1000;

/// One forgotten fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// The id of the removed fact.
    pub id: String,
    /// Its normalised content.
    pub content: String,
    /// When it was forgotten (epoch ms).
    pub at: Millis,
}

/// The tombstones of a record, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tombstones {
    /// The tombstones, oldest first.
    pub list: Vec<Tombstone>,
}

impl Tombstones {
    /// Forgets `fact` at `now`: a tombstone of its normalised content (one per content; a
    /// newer one replaces it). Keeps the newest [`MAX_TOMBSTONES`].
    pub fn forget(&mut self, fact: &Fact, now: Millis) {
        let content = normalize_content(&fact.content);
        self.list.retain(|t| t.content != content && t.id != fact.id);
        self.list.push(Tombstone { id: fact.id.clone(), content, at: now });
        let over = self.list.len().saturating_sub(MAX_TOMBSTONES);
        self.list.drain(..over);
    }

    /// Drops the tombstone with `id`; returns it.
    pub fn unforget(&mut self, id: &str) -> Option<Tombstone> {
        let pos = self.list.iter().position(|t| t.id == id)?;
        Some(self.list.remove(pos))
    }

    /// The ids of tombstones that are in `self` but not in `before` (what a commit added).
    pub fn added_since(&self, before: &Tombstones) -> Vec<String> {
        self.list.iter().filter(|t| !before.list.iter().any(|b| b.id == t.id)).map(|t| t.id.clone()).collect()
    }

    /// The position of the tombstone `content` matches, if any (see the module docs).
    pub fn find(&self, content: &str) -> Option<usize> {
        let key = normalize_content(content);
        if let Some(k) = self.list.iter().position(|t| t.content == key) {
            return Some(k);
        }
        let mut vocab = Vocab::new();
        let set = vocab.set(content);
        let words = skeleton(content);
        self.list.iter().position(|t| {
            let other = vocab.set(&t.content);
            let common = vocab.overlap(&set, &[&other]);
            (!set.is_empty() && jaccard(set.len(), other.len(), common) >= FORGET_JACCARD) || variant_of(&skeleton(&t.content), &words)
        })
    }

    /// Reads the stored list; malformed tombstones are left out.
    pub fn from_value(v: Option<&Value>) -> Tombstones {
        let list = v.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let list = list
            .iter()
            .filter_map(|t| {
                let (id, content) = (t.get("id")?.as_str()?, t.get("content")?.as_str()?);
                Some(Tombstone { id: id.to_string(), content: content.to_string(), at: t.get("at").and_then(Value::as_u64).unwrap_or(0) })
            })
            .collect();
        Tombstones { list }
    }
}

/// Cyrillic and Greek letters (lower case) that look like a Latin one, each followed by it.
const CONFUSABLES: &str = "аaвbсcԁdеeёeһhнhіiıiјjкkмmоoрpԛqѕsтtуyхxԝwαaβbεeζzηhιiκkμmνnοoρpτtυyχx";

/// What a lower-case letter of another script or a fullwidth form looks like in Latin (a
/// confusable skeleton, after the idea of Unicode's UTS #39, for the letters that matter
/// in practice).
fn fold(c: char) -> char {
    let c = match c as u32 {
        // Fullwidth ASCII.
        x @ 0xFF01..=0xFF5E => char::from_u32(x - 0xFEE0).unwrap_or(c),
        0x0370..=0x052F => {
            let mut pairs = CONFUSABLES.chars();
            while let (Some(from), Some(to)) = (pairs.next(), pairs.next()) {
                if from == c {
                    return to;
                }
            }
            c
        }
        _ => c,
    };
    match c {
        '|' | '1' => 'l',
        '0' => 'o',
        c => c,
    }
}

/// The words of `s` on a confusable-folded, lower-cased skeleton: letters and digits of
/// other scripts that look Latin become Latin, marks, invisible characters, hyphens and
/// apostrophes are skipped (`co-worker` is `coworker`, `doesn't` is `doesnt`), whitespace
/// and other punctuation separate words.
pub fn skeleton(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut lower = String::new();
    for c in s.chars() {
        lower.clear();
        crate::base::unicode::push_lowercase(&mut lower, c);
        let Some(c) = lower.chars().next().map(fold) else { continue };
        if c.is_alphanumeric() {
            word.push(c);
            word.extend(lower.chars().skip(1).map(fold));
        } else if matches!(c, '-' | '\'' | '\u{2010}' | '\u{2011}' | '\u{2019}') {
            continue;
        } else if (c.is_whitespace() || c.is_ascii() || matches!(c as u32, 0x2010..=0x2027 | 0x2030..=0x205E | 0x3000..=0x303F))
            && !word.is_empty()
        {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Words that turn a fact around: a variant that adds or drops one is a new fact.
const TURNS: [&str; 21] = [
    "not", "no", "never", "longer", "nor", "without", "anymore", "stopped", "quit", "former", "formerly", "ex", "used", "dont", "doesnt",
    "isnt", "wasnt", "didnt", "cant", "wont", "neither",
];

/// Whether `b` says what `a` says with a trivial change: the same words (one-letter slips
/// in words of five letters or more allowed), up to two added words (three to a fact of
/// five words or more), or one word dropped
/// from a fact of four or more; never a number changed, never a negation added or dropped.
pub fn variant_of(a: &[String], b: &[String]) -> bool {
    if a.is_empty() || b.is_empty() || a.len() > 64 || b.len() > 64 {
        return false;
    }
    // Longest common subsequence of near-equal words.
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diag = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if near(x, y) { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    let k = row[b.len()];
    let (missing, extra) = (a.len() - k, b.len() - k);
    let shape = if a.len() == 1 {
        k == 1 && extra == 0
    } else {
        k >= 2 && ((missing == 0 && (extra <= 2 || (extra == 3 && a.len() >= 5))) || (missing == 1 && extra == 0 && a.len() >= 4))
    };
    let turns = |w: &[String], other: &[String]| w.iter().any(|t| TURNS.contains(&t.as_str()) && !other.contains(t));
    shape && !turns(a, b) && !turns(b, a)
}

/// Cosine (of the embedding model's vectors of the normalised texts) at or above which a new
/// fact means what a tombstone says, when [`same_claim`] allows it. Tuned with
/// multilingual-e5-small on `tests/data/forget-variants.json` (`node bench/forget-embed.mjs`,
/// then `cargo test --test forget_match -- --nocapture`): at 0.94, 16 of 24 paraphrases
/// match (the lexical test alone: 3) and 0 of 1 419 different facts, the lowest value
/// without one (0.93: 20 paraphrases, and "Takes penicillin for an infection" for
/// "Allergic to penicillin"). The cosine alone lets 15 of 1 335 different facts in at 0.94
/// (a negation, another number, one word swapped), which [`same_claim`] keeps out. e5's
/// cosines are compressed (unrelated facts ≈ 0.79): another model needs its own value.
pub const FORGET_COSINE: f32 = 0.94;

/// Whether `b` can be the same claim as `a` for the embedder's test (what a cosine cannot
/// see): no negation added or dropped, the same numbers, and not the same sentence with one
/// word swapped for another (`left knee` / `right knee`, `Tuesday` / `Friday`: another
/// value of the same attribute, which embeddings place very close).
pub fn same_claim(a: &[String], b: &[String]) -> bool {
    let turns = |w: &[String], other: &[String]| w.iter().any(|t| TURNS.contains(&t.as_str()) && !other.contains(t));
    fn numbers(w: &[String]) -> Vec<&str> {
        let mut n: Vec<&str> = w.iter().filter(|t| t.bytes().any(|c| c.is_ascii_digit())).map(String::as_str).collect();
        crate::base::sort::sort_by(&mut n, |x, y| x < y);
        n
    }
    let swapped = a.len() == b.len() && a.iter().zip(b).filter(|(x, y)| x != y).count() == 1;
    !turns(a, b) && !turns(b, a) && numbers(a) == numbers(b) && !swapped
}

/// The same word, or one letter apart in words of five letters or more (not numbers).
fn near(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (x, y): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if x.len().min(y.len()) < 5 || x.len().abs_diff(y.len()) > 1 || x.iter().chain(&y).any(char::is_ascii_digit) {
        return false;
    }
    // One substitution, insertion, deletion or swap of neighbours.
    let p = x.iter().zip(&y).take_while(|(c, d)| c == d).count();
    let s = x.iter().rev().zip(y.iter().rev()).take_while(|(c, d)| c == d).count();
    let (lx, ly) = (x.len().saturating_sub(p + s), y.len().saturating_sub(p + s));
    let swap = x.len() == y.len() && lx == 2 && x[p] == y[p + 1] && x[p + 1] == y[p];
    (lx <= 1 && ly <= 1) || (p + s >= x.len().min(y.len()) && lx.max(ly) <= 1) || swap
}

impl ToJson for Tombstone {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.str("id", &self.id).str("content", &self.content).u64("at", self.at);
        o.finish();
    }
}

impl ToJson for Tombstones {
    fn write_json(&self, out: &mut String) {
        let mut a = ArrayWriter::new(out);
        for t in &self.list {
            t.write_json(a.item());
        }
        a.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_hold_the_normalised_content_once_and_are_bounded() {
        let fact = |id: &str, c: &str| Fact::from_value(&json!({"id": id, "content": c}), 0).unwrap();
        let mut t = Tombstones::default();
        t.forget(&fact("f1", "  Allergic to   PENICILLIN "), 5);
        t.forget(&fact("f2", "allergic to penicillin"), 6);
        assert_eq!(t.list, vec![Tombstone { id: "f2".into(), content: "allergic to penicillin".into(), at: 6 }]);
        let back = Tombstones::from_value(Some(&t.to_value()));
        assert_eq!(back, t);
        for i in 0..MAX_TOMBSTONES + 3 {
            t.forget(&fact(&format!("g{i}"), &format!("thing {i}")), i as u64);
        }
        assert_eq!(t.list.len(), MAX_TOMBSTONES);
        assert_eq!(t.list[0].id, "g3", "the oldest go first");
        assert!(t.unforget("g3").is_some() && t.unforget("g3").is_none());
    }
}
