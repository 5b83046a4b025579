//! When the transport retries within one attempt (docs/design.md#queue-and-failures): 429, 5xx, timeouts and network
//! errors, up to `maxRetries` times, with exponential backoff from 500 ms, honouring
//! `Retry-After` capped at 60 s. Other 4xx are final.

// Only the wasm layer (src/wasm/) calls this; natively the tests do.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use crate::base::error::Error;
use crate::base::time::{millis_from_iso, Millis};

/// First backoff delay.
pub(crate) const BASE_DELAY_MS: u64 = 500;

/// Longest wait between two tries, and the cap on `Retry-After`.
pub(crate) const MAX_DELAY_MS: u64 = 60_000;

/// Whether a failed try should be repeated.
pub(crate) fn is_retryable(err: &Error) -> bool {
    match err {
        Error::LlmHttp { status, .. } => *status == 429 || (500..=599).contains(status),
        Error::LlmTimeout(_) | Error::LlmNetwork(_) => true,
        _ => false,
    }
}

/// Delay before retry number `retry` (0-based): 500 ms, 1 s, 2 s, … capped at 60 s, or the
/// server's `Retry-After` (also capped) when it sent one.
pub(crate) fn delay_ms(retry: u32, retry_after_ms: Option<u64>) -> u64 {
    match retry_after_ms {
        Some(ms) => ms.min(MAX_DELAY_MS),
        None => BASE_DELAY_MS.saturating_mul(1u64 << retry.min(16)).min(MAX_DELAY_MS),
    }
}

/// Parses a `Retry-After` header: delta-seconds (`"3"`, `"1.5"`) or an HTTP date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, relative to `now`). `None` if unreadable.
pub(crate) fn parse_retry_after(value: &str, now: Millis) -> Option<u64> {
    let v = value.trim();
    if let Some(secs) = crate::memory::document::parse_decimal(v) {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).min(MAX_DELAY_MS as f64) as u64);
    }
    http_date_millis(v).map(|at| at.saturating_sub(now))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date_millis(v: &str) -> Option<Millis> {
    let mut parts = v.split_whitespace();
    let _weekday = parts.next()?;
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: u32 = parts.next()?.parse().ok()?;
    let time = parts.next()?;
    if parts.next()? != "GMT" {
        return None;
    }
    millis_from_iso(&format!("{year:04}-{month:02}-{day:02}T{time}Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_429_5xx_timeouts_and_network_errors_only() {
        let http = |status| Error::LlmHttp { status, message: String::new() };
        for s in [429, 500, 502, 503, 504] {
            assert!(is_retryable(&http(s)), "{s}");
        }
        for s in [400, 401, 403, 404, 408, 409, 422] {
            assert!(!is_retryable(&http(s)), "{s}");
        }
        assert!(is_retryable(&Error::LlmTimeout(String::new())));
        assert!(is_retryable(&Error::LlmNetwork(String::new())));
        assert!(!is_retryable(&Error::LlmBadOutput(String::new())));
    }

    #[test]
    fn backoff_doubles_from_500ms_and_is_capped() {
        assert_eq!([0, 1, 2, 3].map(|r| delay_ms(r, None)), [500, 1000, 2000, 4000]);
        assert_eq!(delay_ms(30, None), 60_000);
        assert_eq!(delay_ms(0, Some(3_000)), 3_000);
        assert_eq!(delay_ms(0, Some(3_600_000)), 60_000);
    }

    #[test]
    fn a_retry_after_wait_is_capped_whatever_the_step() {
        for r in 0..5 {
            assert!(delay_ms(r, Some(u64::MAX)) <= MAX_DELAY_MS);
        }
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("2", 0), Some(2_000));
        assert_eq!(parse_retry_after(" 0.25 ", 0), Some(250));
        assert_eq!(parse_retry_after("100000", 0), Some(60_000));
        let now = millis_from_iso("2015-10-21T07:27:50Z").unwrap();
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(10_000));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now), Some(0));
        assert_eq!(parse_retry_after("soon", 0), None);
        assert_eq!(parse_retry_after("-1", 0), None);
    }
}
