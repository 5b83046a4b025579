//! Lowercasing without the standard library's 11 KB table.
//!
//! `char::to_lowercase` is exact but brings a table of every (upper, lower) pair into the
//! wasm. Here the same mapping is stored as runs (`A`–`Z` +32, `Ā ā Ă ă …` every other +1,
//! …) that `build.rs` derives from the toolchain's own `to_lowercase` at build time, so the
//! result is identical for every character (the tests check all of them).

include!(concat!(env!("OUT_DIR"), "/lowercase.rs"));

/// The lowercase of `c` when it is one character (all but U+0130, see [`push_lowercase`]).
fn lower_char(c: char) -> char {
    let cp = c as u32;
    if cp < 0x80 {
        return c.to_ascii_lowercase();
    }
    let i = LOWER_RUNS.partition_point(|r| r.0 <= cp);
    if i == 0 {
        return c;
    }
    let (first, count, step, delta) = LOWER_RUNS[i - 1];
    let offset = cp - first;
    if offset % u32::from(step) != 0 || offset / u32::from(step) >= u32::from(count) {
        return c;
    }
    char::from_u32(cp.wrapping_add_signed(delta)).unwrap_or(c)
}

/// Appends the lowercase of `c` (as [`char::to_lowercase`]: `İ` becomes `i̇`).
pub(crate) fn push_lowercase(out: &mut String, c: char) {
    if c == '\u{130}' {
        out.push_str("i\u{307}");
    } else {
        out.push(lower_char(c));
    }
}

/// `s` lowercased character by character. Unlike [`str::to_lowercase`] a final `Σ` becomes
/// `σ`, not `ς` (no context rule), which is what matching words needs anyway.
pub(crate) fn lowercase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_lowercase(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_lowercases_exactly_like_the_standard_library() {
        let mut ours = String::new();
        for c in (0..=char::MAX as u32).filter_map(char::from_u32) {
            ours.clear();
            push_lowercase(&mut ours, c);
            let std: String = c.to_lowercase().collect();
            assert_eq!(ours, std, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn strings_lowercase_per_character() {
        assert_eq!(lowercase("Hello ÄÖÜ ΣΑΣ İstanbul Ǆ"), "hello äöü σασ i\u{307}stanbul ǆ");
        assert!(LOWER_RUNS.len() < 300, "{} runs", LOWER_RUNS.len());
    }
}
