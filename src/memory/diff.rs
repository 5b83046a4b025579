//! What changed between two versions of the facts: the `update` event and the history
//! entry of a commit are both built from it.
//!
//! Linear in the facts: the fact at the same position usually has the same id (an edit, an
//! append); otherwise the id is looked up in a hashed index of the old list, built only when
//! needed (a lookup by scanning made a commit at 10 000 facts take seconds).

use crate::base::hash::FxMap;
use crate::memory::document::Fact;

/// The difference between an old and a new list of facts, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FactDiff {
    /// Positions in the new list of facts whose id the old list does not have.
    pub(crate) added: Vec<usize>,
    /// Positions in the old list of facts whose id the new list does not have.
    pub(crate) removed: Vec<usize>,
    /// `(old position, new position)` of facts kept under their id but changed.
    pub(crate) changed: Vec<(usize, usize)>,
    /// Whether the facts kept are in another order than before.
    pub(crate) reordered: bool,
}

/// Compares `before` with `after` (see the module docs).
pub(crate) fn diff_facts(before: &[Fact], after: &[Fact]) -> FactDiff {
    let mut d = FactDiff::default();
    let mut by_id: Option<FxMap<Box<str>, u32>> = None;
    let mut seen = vec![false; before.len()];
    let mut last = None;
    for (pos, f) in after.iter().enumerate() {
        let old = match before.get(pos) {
            Some(b) if b.id == f.id => Some(pos),
            _ => by_id.get_or_insert_with(|| index_ids(before)).get(f.id.as_str()).map(|&i| i as usize),
        };
        match old {
            Some(i) if !seen[i] => {
                seen[i] = true;
                d.reordered |= last.is_some_and(|l| i < l);
                last = Some(i);
                if before[i] != *f {
                    d.changed.push((i, pos));
                }
            }
            _ => d.added.push(pos),
        }
    }
    d.removed = (0..before.len()).filter(|&i| !seen[i]).collect();
    d
}

/// Fact id → position (the first fact with that id).
pub(crate) fn index_ids(facts: &[Fact]) -> FxMap<Box<str>, u32> {
    let mut map = FxMap::with_capacity_and_hasher(facts.len(), Default::default());
    for (i, f) in facts.iter().enumerate() {
        map.entry(f.id.as_str().into()).or_insert(i as u32);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: &str, content: &str) -> Fact {
        Fact::for_test(id, content, 0.9)
    }

    #[test]
    fn added_removed_changed_and_order_are_found() {
        let before = [fact("a", "1"), fact("b", "2"), fact("c", "3")];
        let after = [fact("a", "1"), fact("c", "three"), fact("d", "4")];
        let d = diff_facts(&before, &after);
        assert_eq!((d.added, d.removed, d.changed, d.reordered), (vec![2], vec![1], vec![(2, 1)], false));
        let swapped = [fact("c", "3"), fact("a", "1")];
        let d = diff_facts(&before, &swapped);
        assert!(d.reordered && d.changed.is_empty());
        assert_eq!(d.removed, vec![1]);
    }
}
