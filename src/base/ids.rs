//! Fact ids: `fact_` followed by 8 lowercase hex characters from a real random source.

use std::cell::Cell;

/// A source of fresh fact-id suffixes. Injected so tests are deterministic.
pub trait IdSource {
    /// Four random bytes; the id is `fact_` + their lowercase hex.
    fn random_u32(&self) -> u32;
}

/// Ids from the operating system / Web Crypto via `getrandom`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn random_u32(&self) -> u32 {
        let mut buf = [0u8; 4];
        // getrandom only fails where no entropy source exists at all (a wasm host without
        // `crypto.getRandomValues`). Fall back to a time-and-counter mix rather than panic:
        // ids must be unique within a document, which `Document::fresh_id` re-checks anyway.
        if getrandom::fill(&mut buf).is_err() {
            thread_local!(static FALLBACK: Cell<u32> = const { Cell::new(0x9e37_79b9) });
            return FALLBACK.with(|c| {
                let v = c.get().wrapping_mul(0x0101_0101).wrapping_add(0x6b43_a9b5).rotate_left(7);
                c.set(v);
                v
            });
        }
        u32::from_le_bytes(buf)
    }
}

/// Deterministic ids for tests: a simple counter-driven sequence.
#[derive(Debug, Default)]
pub struct SequentialIds(Cell<u32>);

impl SequentialIds {
    /// Starts the sequence at `start`.
    pub fn starting_at(start: u32) -> Self {
        SequentialIds(Cell::new(start))
    }
}

impl IdSource for SequentialIds {
    fn random_u32(&self) -> u32 {
        let v = self.0.get();
        self.0.set(v.wrapping_add(1));
        v
    }
}

/// Formats a fact id from 32 random bits.
pub fn fact_id(bits: u32) -> String {
    let mut s = String::with_capacity(13);
    s.push_str("fact_");
    crate::base::hex::push_hex(&mut s, bits.into(), 8);
    s
}

/// Whether `id` has the canonical `fact_` + 8 lowercase hex shape.
pub fn is_canonical_fact_id(id: &str) -> bool {
    id.len() == 13 && id.starts_with("fact_") && id[5..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_ids_are_prefixed_lowercase_hex() {
        assert_eq!(fact_id(0x3f9a_1c2e), "fact_3f9a1c2e");
        assert_eq!(fact_id(0), "fact_00000000");
        assert!(is_canonical_fact_id(&fact_id(RandomIds.random_u32())));
        assert!(!is_canonical_fact_id("fact_3F9A1C2E"));
        assert!(!is_canonical_fact_id("fact_123"));
    }

    #[test]
    fn random_ids_vary() {
        let a: Vec<u32> = (0..64).map(|_| RandomIds.random_u32()).collect();
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 60, "getrandom should not repeat itself");
    }
}
