//! Lowercase hexadecimal, written and read without `format!`: fact ids, the stored hashes
//! of watermarks and fact vectors, storage keys, JSON `\u` escapes.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends the lowest `digits` hex digits of `value`, lowercase and zero-padded.
pub(crate) fn push_hex(out: &mut String, value: u64, digits: u32) {
    for i in (0..digits).rev() {
        out.push(char::from(DIGITS[((value >> (i * 4)) & 0xf) as usize]));
    }
}

/// Reads exactly 16 lowercase hex digits (what [`push_hex`] writes for a `u64`).
pub(crate) fn parse_hex16(s: &str) -> Option<u64> {
    if s.len() != 16 {
        return None;
    }
    s.bytes().try_fold(0u64, |acc, b| {
        let d = DIGITS.iter().position(|&x| x == b)?;
        Some(acc << 4 | d as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_what_it_does_not_write() {
        let mut s = String::new();
        push_hex(&mut s, 0x0123_4567_89ab_cdef, 16);
        assert_eq!(s, "0123456789abcdef");
        assert_eq!(parse_hex16(&s), Some(0x0123_4567_89ab_cdef));
        let mut short = String::new();
        push_hex(&mut short, 0xab, 8);
        assert_eq!(short, "000000ab");
        assert_eq!(parse_hex16("0123"), None);
        assert_eq!(parse_hex16("0123456789abcdeG"), None);
        assert_eq!(parse_hex16("0123456789ABCDEF"), None);
    }
}
