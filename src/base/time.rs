//! Time: the injectable clock and UTC ISO-8601 timestamps.
//!
//! Timestamps are written as `YYYY-MM-DDTHH:MM:SS.mmmZ` (what JavaScript's
//! `Date.prototype.toISOString` prints). Reading accepts any precision of fractional seconds
//! and an optional `Z` or `+00:00`, so DeerFlow's microsecond timestamps sort correctly too.

/// Milliseconds since the Unix epoch, UTC.
pub type Millis = u64;

/// A source of the current time. Injected so tests can drive time by hand.
pub trait Clock {
    /// The current time in epoch milliseconds.
    fn now_ms(&self) -> Millis;

    /// Resolves after `ms` milliseconds without blocking (a `setTimeout` in wasm; a fake
    /// clock may simply advance).
    fn sleep(&self, ms: Millis) -> crate::base::sync::LocalFuture<'static, ()>;
}

/// Formats epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_from_millis(ms: Millis) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(24);
    push_num(&mut out, y as u64, 4);
    out.push('-');
    push_num(&mut out, m as u64, 2);
    out.push('-');
    push_num(&mut out, d as u64, 2);
    out.push('T');
    push_num(&mut out, rem / 3600, 2);
    out.push(':');
    push_num(&mut out, rem % 3600 / 60, 2);
    out.push(':');
    push_num(&mut out, rem % 60, 2);
    out.push('.');
    push_num(&mut out, millis, 3);
    out.push('Z');
    out
}

/// Parses an ISO-8601 UTC timestamp (as written by this library, JavaScript or DeerFlow)
/// into epoch milliseconds. Returns `None` for anything else.
pub fn millis_from_iso(s: &str) -> Option<Millis> {
    let b = s.trim().as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let y = digits(&b[0..4])? as i64;
    let mo = digits(&b[5..7])? as u32;
    let d = digits(&b[8..10])? as u32;
    let h = digits(&b[11..13])?;
    let mi = digits(&b[14..16])?;
    let se = digits(&b[17..19])?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut frac_ms = 0u64;
    if rest.first() == Some(&b'.') {
        rest = &rest[1..];
        let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let mut scale = 100;
        for &c in &rest[..n.min(3)] {
            frac_ms += u64::from(c - b'0') * scale;
            scale /= 10;
        }
        rest = &rest[n..];
    }
    match rest {
        b"" | b"Z" | b"z" | b"+00:00" | b"+0000" => {}
        _ => return None,
    }
    let days = days_from_civil(y, mo, d);
    if days < 0 {
        return None;
    }
    Some((days as u64 * 86_400 + h * 3600 + mi * 60 + se) * 1000 + frac_ms)
}

/// Reads an event time, the optional `happenedAt` of a fact: an ISO-8601 calendar date
/// `YYYY-MM-DD`, its reduced forms `YYYY-MM` and `YYYY`, or a date-time
/// `YYYY-MM-DDTHH:MM[:SS[.fff…]]` with an optional `Z` or `±HH:MM` offset. Returns the
/// written date as days since 1970-01-01 (negative before it; the offset is not applied,
/// the date is the one the writer meant), or `None` for anything else, including
/// impossible dates (`2023-02-30`).
pub fn event_days(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let y = digits(b.get(0..4)?)? as i64;
    let (mo, d, rest) = match b.len() {
        4 => (1, 1, &b[4..]),
        7 if b[4] == b'-' => (digits(&b[5..7])? as u32, 1, &b[7..]),
        n if n >= 10 && b[4] == b'-' && b[7] == b'-' => (digits(&b[5..7])? as u32, digits(&b[8..10])? as u32, &b[10..]),
        _ => return None,
    };
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    if !rest.is_empty() && !valid_time_of_day(rest) {
        return None;
    }
    Some(days_from_civil(y, mo, d))
}

/// `THH:MM[:SS[.fff…]][Z|±HH:MM|±HHMM]` (or a space instead of `T`).
fn valid_time_of_day(b: &[u8]) -> bool {
    let two = |at: usize, max: u64| b.get(at..at + 2).and_then(digits).is_some_and(|v| v <= max);
    if !matches!(b.first(), Some(b'T' | b't' | b' ')) || !two(1, 23) || b.get(3) != Some(&b':') || !two(4, 59) {
        return false;
    }
    let mut rest = &b[6..];
    if rest.first() == Some(&b':') {
        if !rest.get(1..3).and_then(digits).is_some_and(|v| v <= 60) {
            return false;
        }
        rest = &rest[3..];
        if rest.first() == Some(&b'.') {
            let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return false;
            }
            rest = &rest[1 + n..];
        }
    }
    match rest {
        b"" | b"Z" | b"z" => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] | [b'+' | b'-', h1, h2, m1, m2] => {
            digits(&[*h1, *h2]).is_some_and(|h| h <= 23) && digits(&[*m1, *m2]).is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

/// Days in month `m` (1–12) of year `y`, leap years included.
fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(b: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

fn push_num(out: &mut String, mut v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    let len = (buf.len() - i).max(width);
    for &c in &buf[buf.len() - len..] {
        out.push(c as char);
    }
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_javascript_to_iso_string() {
        assert_eq!(iso_from_millis(0), "1970-01-01T00:00:00.000Z");
        // 2026-03-14T10:30:00.123Z, cross-checked with `new Date(1773484200123).toISOString()`.
        assert_eq!(iso_from_millis(1_773_484_200_123), "2026-03-14T10:30:00.123Z");
        assert_eq!(iso_from_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn parses_what_it_formats_and_deerflow_precision() {
        for ms in [0, 1_773_484_200_123, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(millis_from_iso(&iso_from_millis(ms)), Some(ms));
        }
        assert_eq!(millis_from_iso("2026-03-14T10:30:00.123456Z"), Some(1_773_484_200_123));
        assert_eq!(millis_from_iso("2026-03-14T10:30:00Z"), Some(1_773_484_200_000));
        assert_eq!(millis_from_iso("2026-03-14T10:30:00"), Some(1_773_484_200_000));
        assert_eq!(millis_from_iso("2026-03-14T10:30:00+00:00"), Some(1_773_484_200_000));
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "yesterday", "2026-13-01T00:00:00Z", "2026-03-14T10:30:00+02:00", "2026-03-14"] {
            assert_eq!(millis_from_iso(s), None, "{s}");
        }
    }

    #[test]
    fn event_times_are_iso_dates_or_date_times_and_nothing_else() {
        assert_eq!(event_days("1970-01-01"), Some(0));
        assert_eq!(event_days("2023-05-07"), Some(19_484));
        assert_eq!(event_days(" 2023-05-07T18:30:00.250+02:00 "), Some(19_484), "the written date, offset not applied");
        for s in ["2023-05-07T18:30", "2023-05-07T18:30Z", "2023-05-07 18:30:59", "2023-05-07T23:59:60-0530", "2024-02-29"] {
            assert_eq!(
                event_days(s),
                Some(days_from_civil(s[..4].parse().unwrap(), s[5..7].parse().unwrap(), s[8..10].parse().unwrap())),
                "{s}"
            );
        }
        assert_eq!(event_days("2023-05"), event_days("2023-05-01"));
        assert_eq!(event_days("2019"), event_days("2019-01-01"));
        assert!(event_days("1965-03-02").is_some_and(|d| d < 0), "before 1970 too");
        for s in [
            "",
            "yesterday",
            "last week",
            "2023-02-29",
            "2023-02-30",
            "2023-13-01",
            "2023-00-10",
            "2023-05-00",
            "2023-5-7",
            "07/05/2023",
            "2023-05-07T",
            "2023-05-07T25:00",
            "2023-05-07T12:60",
            "2023-05-07T12:00:00.",
            "2023-05-07T12:00+2",
            "2023-05-07T12:00 CEST",
            "20230507",
            "2023-05-07x",
            "１９９９",
            "2023-05-07T12:00:00+24:00",
        ] {
            assert_eq!(event_days(s), None, "{s:?}");
        }
    }
}
