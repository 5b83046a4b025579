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
    let t = scan_iso(b)?;
    // Seconds are required, and the zone is UTC (`Z`, `+00:00` or none).
    if t.len < 19 || b[16] != b':' || t.offset_min != 0 || t.days < 0 {
        return None;
    }
    Some(((t.days * 86_400 + t.secs) * 1000 + t.millis) as Millis)
}

/// An instant and the UTC offset it was written with: when a message was sent. The offset
/// (minutes east of UTC) only matters for showing the writer's own date and time of day
/// ("yesterday" is relative to the writer's calendar, not UTC's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stamp {
    /// Epoch milliseconds (UTC).
    pub ms: Millis,
    /// Minutes east of UTC, within ±18 h.
    pub offset_min: i16,
}

/// Latest plausible message time: 9999-12-31 (later numbers are not timestamps).
const MAX_STAMP_MS: Millis = 253_402_300_799_999;

impl Stamp {
    /// A UTC instant.
    pub fn utc(ms: Millis) -> Stamp {
        Stamp { ms, offset_min: 0 }
    }

    /// Reads a message's time as applications write it: an ISO-8601 date-time with `Z`, an
    /// offset (`+02:00`, `+0200`) or none (read as UTC), or a bare date `YYYY-MM-DD`
    /// (midnight UTC). `None` for anything else and for times before 1970.
    pub fn parse(s: &str) -> Option<Stamp> {
        let t = scan_iso(s.trim().as_bytes())?;
        if t.len < 10 || (t.len > 10 && t.len < 16) {
            return None;
        }
        let ms = (t.days * 86_400 + t.secs - i64::from(t.offset_min) * 60) * 1000 + t.millis;
        (ms >= 0).then_some(Stamp { ms: ms as u64, offset_min: t.offset_min })
    }

    /// Reads epoch time as a number: milliseconds (JavaScript's `Date.now()`), or seconds
    /// when below 10^11 (Unix time until the year 5138; 10^11 ms is only 1973). `None` for
    /// a negative, non-finite or absurd value.
    pub fn from_epoch(n: f64) -> Option<Stamp> {
        if !n.is_finite() || n < 0.0 {
            return None;
        }
        let ms = if n < 1e11 { n * 1000.0 } else { n };
        (ms <= MAX_STAMP_MS as f64).then(|| Stamp::utc(ms as u64))
    }

    /// The writer's calendar date and time of day with the weekday and offset, e.g.
    /// `2023-05-08 (Monday) 13:56 UTC+02:00`: "now" in the extraction prompt.
    pub fn describe(&self) -> String {
        const WEEKDAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
        let local = (self.ms as i64 + i64::from(self.offset_min) * 60_000).max(0) as u64;
        let iso = iso_from_millis(local);
        let days = (local / 86_400_000) as usize;
        let mut out = String::with_capacity(40);
        out.push_str(&iso[..10]);
        out.push_str(" (");
        out.push_str(WEEKDAYS[days % 7]);
        out.push_str(") ");
        out.push_str(&iso[11..16]);
        out.push_str(" UTC");
        if self.offset_min != 0 {
            let m = self.offset_min.unsigned_abs();
            out.push(if self.offset_min < 0 { '-' } else { '+' });
            push_num(&mut out, u64::from(m / 60), 2);
            out.push(':');
            push_num(&mut out, u64::from(m % 60), 2);
        }
        out
    }
}

/// Reads an event time, the optional `happenedAt` of a fact: an ISO-8601 calendar date
/// `YYYY-MM-DD`, its reduced forms `YYYY-MM` and `YYYY`, or a date-time
/// `YYYY-MM-DDTHH:MM[:SS[.fff…]]` with an optional `Z` or `±HH:MM` offset. Returns the
/// written date as days since 1970-01-01 (negative before it; the offset is not applied,
/// the date is the one the writer meant), or `None` for anything else, including
/// impossible dates (`2023-02-30`).
pub fn event_days(s: &str) -> Option<i64> {
    scan_iso(s.trim().as_bytes()).map(|t| t.days)
}

/// What [`scan_iso`] read.
struct IsoTime {
    /// Days since 1970-01-01 of the written date.
    days: i64,
    /// Seconds and milliseconds into that day, as written (local time).
    secs: i64,
    millis: i64,
    /// The zone's offset in minutes east of UTC (0 for `Z` or none).
    offset_min: i16,
    /// Length of the date part read (4, 7 or 10) or of the whole date-time (≥ 16).
    len: usize,
}

/// One scanner for every ISO-8601 form this library reads: `YYYY`, `YYYY-MM`,
/// `YYYY-MM-DD`, and `YYYY-MM-DD(T| )HH:MM[:SS[.f…]][Z|±HH:MM|±HHMM]`.
fn scan_iso(b: &[u8]) -> Option<IsoTime> {
    let num = |at: usize, max: u64| b.get(at..at + 2).and_then(digits).filter(|v| *v <= max).map(|v| v as i64);
    let y = digits(b.get(0..4)?)? as i64;
    let (mo, d) = match b.len() {
        4 => (1, 1),
        7 if b[4] == b'-' => (num(5, 12)?, 1),
        n if n >= 10 && b[4] == b'-' && b[7] == b'-' => (num(5, 12)?, num(8, 31)?),
        _ => return None,
    };
    if mo < 1 || d < 1 || d > i64::from(days_in_month(y, mo as u32)) {
        return None;
    }
    let days = days_from_civil(y, mo as u32, d as u32);
    let mut t = IsoTime { days, secs: 0, millis: 0, offset_min: 0, len: b.len().min(10) };
    if b.len() <= 10 {
        return Some(t);
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.get(13) != Some(&b':') {
        return None;
    }
    t.secs = num(11, 23)? * 3600 + num(14, 59)? * 60;
    let mut at = 16;
    if b.get(at) == Some(&b':') {
        t.secs += num(17, 60)?;
        at = 19;
        if b.get(at) == Some(&b'.') {
            let n = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            t.millis = b[at + 1..at + 1 + n.min(3)].iter().fold(0, |v, c| v * 10 + i64::from(c - b'0')) * [100, 10, 1][n.min(3) - 1];
            at += 1 + n;
        }
    }
    t.len = b.len();
    match &b[at..] {
        b"" | b"Z" | b"z" => {}
        [sign @ (b'+' | b'-'), h1, h2, rest @ ..] => {
            let m = match rest {
                [b':', m1, m2] | [m1, m2] => digits(&[*m1, *m2]).filter(|m| *m <= 59)?,
                _ => return None,
            };
            let h = digits(&[*h1, *h2]).filter(|h| *h <= 23)?;
            let off = (h * 60 + m) as i16;
            t.offset_min = if *sign == b'-' { -off } else { off };
        }
        _ => return None,
    }
    Some(t)
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

    #[test]
    fn message_times_keep_their_offset_and_read_epoch_numbers() {
        let s = Stamp::parse("2023-05-08T13:56:00+02:00").unwrap();
        assert_eq!(s, Stamp { ms: millis_from_iso("2023-05-08T11:56:00Z").unwrap(), offset_min: 120 });
        assert_eq!(s.describe(), "2023-05-08 (Monday) 13:56 UTC+02:00");
        let late = Stamp::parse("2023-05-07T23:30-0800").unwrap();
        assert_eq!(late.describe(), "2023-05-07 (Sunday) 23:30 UTC-08:00", "the writer's own date, not UTC's 8 May");
        assert_eq!(Stamp::parse("2023-05-08T11:56:00.250Z").unwrap().ms, millis_from_iso("2023-05-08T11:56:00.250Z").unwrap());
        assert_eq!(Stamp::parse("2023-05-08T11:56").unwrap().describe(), "2023-05-08 (Monday) 11:56 UTC");
        assert_eq!(Stamp::parse("2023-05-08").unwrap().describe(), "2023-05-08 (Monday) 00:00 UTC");
        for bad in ["", "8 May 2023", "2023-05", "1969-12-31T23:00:00Z", "2023-05-08T25:00:00Z", "1:56 pm on 8 May, 2023"] {
            assert_eq!(Stamp::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Stamp::from_epoch(1_683_546_960.0), Stamp::parse("2023-05-08T11:56:00Z"), "seconds");
        assert_eq!(Stamp::from_epoch(1_683_546_960_000.0), Stamp::parse("2023-05-08T11:56:00Z"), "milliseconds");
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            assert_eq!(Stamp::from_epoch(bad), None, "{bad}");
        }
        assert_eq!(Stamp::utc(0).describe(), "1970-01-01 (Thursday) 00:00 UTC");
    }
}
