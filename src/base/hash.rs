//! Hashing: the crate-wide hash map ([`FxMap`]) and the stable FNV-1a hash of stored keys
//! ([`fnv1a`]).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (as in rustc): a fast non-cryptographic hash for short keys (tokens, ids). The
/// keys are a user's own facts, so there is no adversary to defend against. The
/// `rustc-hash` crate's FxHasher (2.x) was measured instead: +0.8 KB gzip in the wasm
/// (its byte hashing is larger), so this 30-line copy stays.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut w = 0u64;
        for (k, &x) in bytes.iter().enumerate() {
            w |= u64::from(x) << ((k & 7) * 8);
            if k & 7 == 7 {
                self.add(w);
                w = 0;
            }
        }
        if bytes.len() & 7 != 0 {
            self.add(w);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// FNV-1a (64 bits) over `parts`, one after the other: stable across platforms and
/// versions, so it may key what is stored (watermarks, fact vectors).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}
