//! JSON numbers, kept as their text, and the small decimal reader behind them.

/// A JSON number as it was written (`-0.5`, `1e3`, `12345678901234567890` …).
///
/// Keeping the text rather than an `f64` makes unknown fields round-trip exactly and costs
/// no float printing. Two numbers are equal when their texts are (`1.0` ≠ `1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number(String);

impl Number {
    /// The number's text if it is valid JSON number syntax
    /// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), else `None`.
    pub fn from_text(text: &str) -> Option<Number> {
        (number_len(text.as_bytes(), 0) == Some(text.len())).then(|| Number(text.to_string()))
    }

    /// Text that [`number_len`] accepted whole.
    pub(super) fn checked(text: &str) -> Number {
        Number(text.to_string())
    }

    /// `x` written with at most `decimals` decimals (see [`super::write_fixed`]); `None`
    /// for NaN and infinities, which JSON cannot carry.
    pub fn from_f64(x: f64, decimals: u32) -> Option<Number> {
        if !x.is_finite() {
            return None;
        }
        let mut s = String::new();
        super::write_fixed(&mut s, x, decimals);
        Some(Number(s))
    }

    /// The text, exactly as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as an `f64`, read with [`parse_decimal`]: exact for the usual numbers
    /// (up to 15 significant digits and 22 decimals), within a few units in the last place
    /// otherwise. A huge exponent gives an infinity; `None` only if the exponent does not
    /// even fit an `i32`.
    pub fn as_f64(&self) -> Option<f64> {
        parse_decimal(&self.0)
    }

    /// The value as a `u64` if it is written as an integer (no fraction, no exponent, not
    /// negative) that fits.
    pub fn as_u64(&self) -> Option<u64> {
        let mut n: u64 = 0;
        for c in self.0.bytes() {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        }
        Some(n)
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Number {
        let mut s = String::new();
        super::write_u64(&mut s, n);
        Number(s)
    }
}

/// The length of the JSON number starting at `b[i]`, or `None` if none starts there.
pub(super) fn number_len(b: &[u8], start: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        let from = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > from).then_some(i)
    };
    let mut i = start;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match b.get(i) {
        Some(b'0') => i + 1,
        Some(b'1'..=b'9') => digits(i)?,
        _ => return None,
    };
    if b.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(i)?;
    }
    Some(i - start)
}

/// Parses a plain decimal number such as `"0.9"`, `"-1"`, `".75"` or `"1e-1"` (surrounding
/// whitespace allowed). Written out rather than `str::parse::<f64>` because the standard
/// parser brings ~15 KB of tables into the wasm. Exact (correctly rounded) when the digits
/// fit 53 bits and at most 22 decimals or powers of ten are involved, which covers every
/// confidence, weight and delay; within a few units in the last place beyond.
pub fn parse_decimal(s: &str) -> Option<f64> {
    let b = s.trim().as_bytes();
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let (mut mantissa, mut scale, mut digits) = (0f64, 0i32, 0);
    let mut seen_dot = false;
    while i < b.len() {
        match b[i] {
            c @ b'0'..=b'9' => {
                if mantissa < 1e17 {
                    mantissa = mantissa * 10.0 + f64::from(c - b'0');
                    if seen_dot {
                        scale -= 1;
                    }
                } else if !seen_dot {
                    scale += 1;
                }
                digits += 1;
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let rest = std::str::from_utf8(&b[i + 1..]).ok()?;
        let exp: i32 = rest.parse().ok()?;
        scale = scale.checked_add(exp)?;
        i = b.len();
    }
    if i != b.len() {
        return None;
    }
    // Powers of ten up to 1e22 are exact, so one division or multiplication by one rounds
    // once: `9 / 10` is the nearest double to 0.9, whereas `9 * 0.1` is not always.
    // Beyond ±400 the result is 0 or ∞ anyway; clamping also keeps `-scale` from
    // overflowing (`1e-2147483648` is valid JSON).
    let scale = scale.clamp(-400, 400);
    let v = if scale < 0 { mantissa / 10f64.powi(-scale) } else { mantissa * 10f64.powi(scale) };
    Some(if neg { -v } else { v })
}
