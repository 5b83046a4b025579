//! Fact vectors of the embedding model (`embed`): unit length, quantised to int8 with one
//! scale per vector, stored in their own slot beside the document, and compared with a
//! query vector by a dot product.
//!
//! A vector is keyed by a 64-bit hash of the fact's content ([`content_key`]), not by the
//! fact's id: it is computed once per content and model, survives an import or a re-id of
//! the same text, and an edited fact simply has no vector until its new content is embedded.
//!
//! Stored value of the `vectors` slot (JSON):
//!
//! ```text
//! {"version":1,"model":"text-embedding-3-small","dimensions":1536,"encoding":"int8",
//!  "vectors":{"<16 hex digits of the content key>":"<base64: f32 scale (LE) + one byte per dimension>", …}}
//! ```
//!
//! A component `x` of a unit vector is stored as `round(x / scale)` with
//! `scale = max|x| / 127`, so a vector of `d` dimensions costs `4 + d` bytes, base64 makes
//! that `4 × ⌈(4 + d) / 3⌉` characters (520 for 384 dimensions), plus 22 for its key and the
//! punctuation around it: 542 bytes a fact for a 384-dimension model. The
//! cost of int8 against float32 on the ranking is measured in `docs/relevance.md`.

pub use crate::base::base64::{base64_decode, base64_encode};
use crate::base::error::{Error, Result};
use crate::json::{ObjectWriter, Value};
use crate::memory::document::Fact;

/// The layout version written in the slot.
pub const FORMAT_VERSION: u64 = 1;

/// Where a fact has no vector in [`VectorSet::align`]'s result.
pub const NO_VECTOR: u32 = u32::MAX;

/// The key of a fact's vector: FNV-1a (64 bits) of its content.
pub fn content_key(text: &str) -> u64 {
    crate::base::hash::fnv1a(&[text.as_bytes()])
}

/// Scales `v` to unit length. `false` (and `v` unchanged) when it has a non-finite
/// component or no direction (all zeros): such a vector cannot be compared.
pub fn normalize(v: &mut [f32]) -> bool {
    let mut norm = 0.0f64;
    for &x in v.iter() {
        if !x.is_finite() {
            return false;
        }
        norm += f64::from(x) * f64::from(x);
    }
    if !(norm > 0.0 && norm.is_finite()) {
        return false;
    }
    let inv = (1.0 / norm.sqrt()) as f32;
    for x in v.iter_mut() {
        *x *= inv;
    }
    true
}

/// `v` (unit length) as int8 components (stored as their two's-complement bytes) and
/// their scale.
fn quantize(v: &[f32], out: &mut Vec<u8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    for x in v {
        out.push((x / scale).round().clamp(-127.0, 127.0) as i8 as u8);
    }
    scale
}

/// `out[i] = cos(query, vector of aligned[i])`: the int8 dot product (exact in 32-bit
/// integers below 130 000 dimensions) times both scales; `None` without a vector.
#[cfg(not(target_arch = "wasm32"))]
fn cosines(set: &VectorSet, aligned: &[u32], query: &QueryVector, out: &mut [Option<f32>]) {
    let d = set.dims;
    for (o, &slot) in out.iter_mut().zip(aligned) {
        let s = slot as usize;
        if let (Some(v), Some(scale)) = (set.data.get(s * d..(s + 1) * d), set.scales.get(s)) {
            let dot: i32 = v.iter().zip(&query.data).map(|(&x, &y)| i32::from(x as i8) * i32::from(y as i8)).sum();
            *o = Some(dot as f32 * scale * query.scale);
        }
    }
}

/// [`cosines`] with WebAssembly SIMD, 16 components at a time: the dot products are most of
/// the hybrid ranking's cost (about a fifth of the scalar loop's time at 10 000 facts).
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn cosines(set: &VectorSet, aligned: &[u32], query: &QueryVector, out: &mut [Option<f32>]) {
    use core::arch::wasm32::*;
    let d = set.dims;
    let lanes = |c: &[u8]| {
        let x = <[u8; 16]>::try_from(c).map_or(0, u128::from_le_bytes);
        i64x2(x as i64, (x >> 64) as i64)
    };
    for (o, &slot) in out.iter_mut().zip(aligned) {
        let s = slot as usize;
        let (Some(v), Some(scale)) = (set.data.get(s * d..(s + 1) * d), set.scales.get(s)) else { continue };
        let mut acc = i32x4_splat(0);
        let whole = d / 16 * 16;
        for (a, b) in v[..whole].chunks_exact(16).zip(query.data[..whole].chunks_exact(16)) {
            let (x, y) = (lanes(a), lanes(b));
            acc = i32x4_add(acc, i32x4_dot_i16x8(i16x8_extend_low_i8x16(x), i16x8_extend_low_i8x16(y)));
            acc = i32x4_add(acc, i32x4_dot_i16x8(i16x8_extend_high_i8x16(x), i16x8_extend_high_i8x16(y)));
        }
        let mut dot =
            i32x4_extract_lane::<0>(acc) + i32x4_extract_lane::<1>(acc) + i32x4_extract_lane::<2>(acc) + i32x4_extract_lane::<3>(acc);
        for (&x, &y) in v[whole..].iter().zip(&query.data[whole..]) {
            dot += i32::from(x as i8) * i32::from(y as i8);
        }
        *o = Some(dot as f32 * scale * query.scale);
    }
}

/// A query's vector, normalised and quantised like the facts'.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    data: Vec<u8>,
    scale: f32,
}

impl QueryVector {
    /// The query vector for `v`; `None` if it cannot be compared (see [`normalize`]).
    pub fn new(mut v: Vec<f32>) -> Option<QueryVector> {
        if !normalize(&mut v) {
            return None;
        }
        let mut data = Vec::with_capacity(v.len());
        let scale = quantize(&v, &mut data);
        Some(QueryVector { data, scale })
    }

    /// Its number of dimensions.
    pub fn dimensions(&self) -> usize {
        self.data.len()
    }
}

/// The stored vectors of one model, keyed by [`content_key`].
///
/// The vectors live in one arena (`keys`, `scales`, `data` by slot); `order` lists the slots
/// by key, for binary search (no hash table: this keeps the wasm small, and a lookup per
/// fact on a document change is cheap).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorSet {
    model: String,
    dims: usize,
    keys: Vec<u64>,
    scales: Vec<f32>,
    /// `keys.len() × dims` int8 components, as bytes.
    data: Vec<u8>,
    /// Slots sorted by key.
    order: Vec<u32>,
}

impl VectorSet {
    /// An empty set for `model` (any name that changes when the vectors would: model name,
    /// requested dimensions …); `dims` 0 = set by the first vector.
    pub fn new(model: &str, dims: usize) -> VectorSet {
        VectorSet { model: model.to_string(), dims, ..VectorSet::default() }
    }

    /// The model the vectors belong to.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Dimensions of every vector (0 while empty and not fixed).
    pub fn dimensions(&self) -> usize {
        self.dims
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The slot of `key`, or where in `order` it would go.
    fn find(&self, key: u64) -> std::result::Result<u32, usize> {
        let at = self.order.partition_point(|&s| self.keys[s as usize] < key);
        match self.order.get(at) {
            Some(&s) if self.keys[s as usize] == key => Ok(s),
            _ => Err(at),
        }
    }

    /// Whether a vector for `key` is stored.
    pub fn contains(&self, key: u64) -> bool {
        self.find(key).is_ok()
    }

    /// Stores the vector of the content with key `key` (normalised and quantised), replacing
    /// any earlier one. `EMBED_FAILED` if it has another number of dimensions than the set,
    /// a non-finite component, or no direction.
    pub fn insert(&mut self, key: u64, mut v: Vec<f32>) -> Result<()> {
        if self.dims == 0 {
            self.dims = v.len();
        }
        if v.len() != self.dims || v.is_empty() {
            return Err(Error::EmbedFailed(format!("a vector has {} dimensions, the others {}", v.len(), self.dims)));
        }
        if !normalize(&mut v) {
            return Err(Error::EmbedFailed("a vector is NaN, infinite or zero".into()));
        }
        let mut q = Vec::with_capacity(self.dims);
        let scale = quantize(&v, &mut q);
        self.put(key, scale, &q);
        Ok(())
    }

    fn put(&mut self, key: u64, scale: f32, q: &[u8]) {
        match self.find(key) {
            Ok(slot) => {
                let s = slot as usize;
                self.scales[s] = scale;
                self.data[s * self.dims..(s + 1) * self.dims].copy_from_slice(q);
            }
            Err(at) => {
                self.order.insert(at, self.keys.len() as u32);
                self.keys.push(key);
                self.scales.push(scale);
                self.data.extend_from_slice(q);
            }
        }
    }

    /// Keeps only the vectors whose slot `keep` marks; returns how many were dropped.
    pub fn retain_slots(&mut self, keep: &[bool]) -> usize {
        let before = self.keys.len();
        let d = self.dims;
        let mut w = 0;
        for r in 0..before {
            if keep.get(r).copied().unwrap_or(false) {
                if w != r {
                    self.keys[w] = self.keys[r];
                    self.scales[w] = self.scales[r];
                    self.data.copy_within(r * d..(r + 1) * d, w * d);
                }
                w += 1;
            }
        }
        self.keys.truncate(w);
        self.scales.truncate(w);
        self.data.truncate(w * d);
        self.reorder();
        before - w
    }

    /// Keeps only the vectors of `facts` (the current ones); returns how many were dropped.
    pub fn retain_facts(&mut self, facts: &[Fact]) -> usize {
        let mut keep = vec![false; self.keys.len()];
        for slot in self.align(facts) {
            if let Some(k) = keep.get_mut(slot as usize) {
                *k = true;
            }
        }
        self.retain_slots(&keep)
    }

    /// Rebuilds `order` (after the arena was rewritten).
    fn reorder(&mut self) {
        self.order.clear();
        self.order.extend(0..self.keys.len() as u32);
        let keys = &self.keys;
        crate::base::sort::sort_by(&mut self.order, |&a, &b| keys[a as usize] < keys[b as usize]);
    }

    /// Adds the vectors of `other` this set lacks (another writer's, after a conflict);
    /// nothing if `other` belongs to another model or has other dimensions.
    pub fn merge_from(&mut self, other: &VectorSet) {
        if other.model != self.model || (self.dims != 0 && other.dims != self.dims) {
            return;
        }
        self.dims = other.dims;
        for (i, &k) in other.keys.iter().enumerate() {
            if !self.contains(k) {
                self.put(k, other.scales[i], &other.data[i * other.dims..(i + 1) * other.dims]);
            }
        }
    }

    /// For each fact, where the vector of its content is ([`NO_VECTOR`] if none): the
    /// alignment [`VectorSet::similarities`] takes.
    pub fn align(&self, facts: &[Fact]) -> Vec<u32> {
        let mut out = Vec::with_capacity(facts.len());
        for f in facts {
            out.push(self.find(content_key(&f.content)).unwrap_or(NO_VECTOR));
        }
        out
    }

    /// The cosine similarity of `query` with the vector of each aligned fact (`None` for
    /// facts without one, and for all when the dimensions differ).
    pub fn similarities(&self, aligned: &[u32], query: &QueryVector) -> Vec<Option<f32>> {
        let mut out = vec![None; aligned.len()];
        if query.data.len() == self.dims && self.dims > 0 {
            cosines(self, aligned, query, &mut out);
        }
        out
    }

    /// The slot's JSON (see the module docs).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96 + self.keys.len() * (24 + (self.dims + 6) * 4 / 3));
        let mut o = ObjectWriter::new(&mut out);
        o.u64("version", FORMAT_VERSION).str("model", &self.model).u64("dimensions", self.dims as u64).str("encoding", "int8");
        let vectors = o.key("vectors");
        vectors.push('{');
        let mut payload = Vec::with_capacity(4 + self.dims);
        for (i, &k) in self.keys.iter().enumerate() {
            if i > 0 {
                vectors.push(',');
            }
            vectors.push('"');
            crate::base::hex::push_hex(vectors, k, 16);
            vectors.push_str("\":\"");
            payload.clear();
            payload.extend_from_slice(&self.scales[i].to_le_bytes());
            payload.extend_from_slice(&self.data[i * self.dims..(i + 1) * self.dims]);
            base64_encode(&payload, vectors);
            vectors.push('"');
        }
        vectors.push('}');
        o.finish();
        out
    }

    /// Reads the slot's JSON. Anything unreadable is `CORRUPT_MEMORY` naming the problem
    /// (the caller treats that as "no vectors": they can always be computed again).
    pub fn from_json(text: &str) -> Result<VectorSet> {
        let bad = |why: &str| Error::corrupt(format!("the stored fact vectors are unreadable: {why}"));
        let v = Value::parse(text).map_err(|e| bad(&e.to_string()))?;
        if v.get("version").and_then(Value::as_u64) != Some(FORMAT_VERSION) || v.get("encoding").and_then(Value::as_str) != Some("int8") {
            return Err(bad("unknown version or encoding"));
        }
        let model = v.get("model").and_then(Value::as_str).ok_or_else(|| bad("no model"))?;
        let dims = v.get("dimensions").and_then(Value::as_u64).filter(|&d| d <= 65_536).ok_or_else(|| bad("no dimensions"))? as usize;
        let mut set = VectorSet::new(model, dims);
        let entries = v.get("vectors").and_then(Value::as_object).ok_or_else(|| bad("no vectors"))?;
        let mut payload = Vec::with_capacity(4 + dims);
        for (k, b64) in entries.iter() {
            let key = crate::base::hex::parse_hex16(k).ok_or_else(|| bad("a key is not 16 hex digits"))?;
            payload.clear();
            let ok = b64.as_str().is_some_and(|s| base64_decode(s, &mut payload)) && payload.len() == 4 + dims;
            if !ok {
                return Err(bad("a vector is not base64 of the stated dimensions"));
            }
            let scale = f32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]);
            if !(scale.is_finite() && scale > 0.0) {
                return Err(bad("a vector has an invalid scale"));
            }
            // (Keys are distinct: the JSON parser keeps one value per key.)
            set.keys.push(key);
            set.scales.push(scale);
            set.data.extend_from_slice(&payload[4..]);
        }
        set.reorder();
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_keys_are_fnv1a() {
        assert_eq!(content_key(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(content_key("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
