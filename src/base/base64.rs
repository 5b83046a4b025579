//! Standard base64 (RFC 4648, with padding), for the bytes the library stores as JSON text:
//! fact vectors, encrypted values, key records.

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends standard base64 (with padding) of `bytes` to `out`.
pub fn base64_encode(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// Appends the bytes of standard base64 `s` (padding optional) to `out`; `false` if it is
/// not base64.
pub fn base64_decode(s: &str, out: &mut Vec<u8>) -> bool {
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return false;
    }
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return false,
            };
            n |= u32::from(v) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length() {
        for n in 0..40usize {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let mut s = String::new();
            base64_encode(&bytes, &mut s);
            assert_eq!(s.len(), n.div_ceil(3) * 4);
            let mut back = Vec::new();
            assert!(base64_decode(&s, &mut back));
            assert_eq!(back, bytes);
        }
        let mut s = String::new();
        base64_encode(b"Man", &mut s);
        assert_eq!(s, "TWFu");
        let mut v = Vec::new();
        assert!(!base64_decode("TW*u", &mut v));
        assert!(!base64_decode("TWFuT", &mut v));
    }
}
