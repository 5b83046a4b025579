//! Rendering values into the `<memory>` block: invisible characters stripped, links
//! neutralised, whitespace collapsed, `&`, `<`, `>` and their look-alikes escaped
//! (docs/design.md#injection).

use crate::base::time::event_days;
use crate::extract::sanitize::{angle_look_alike, is_double_angle, is_slash_like, neutralize_links, strip_invisible};
use crate::memory::document::Fact;
use crate::recall::tokenize::char_at;
use std::borrow::Cow;

/// `s` as a value of the block renders it (cleaned, collapsed, escaped): for the texts
/// handed to a model outside the block (`safeText()`, used by the wasm API only).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn render_value(s: &str, links: bool) -> String {
    let mut out = String::with_capacity(s.len());
    push_value(&mut out, &clean(s, links));
    out
}

/// A value as it may be rendered: without invisible characters and, with `links`, with
/// links reduced to their words.
pub(crate) fn clean(s: &str, links: bool) -> Cow<'_, str> {
    match strip_invisible(s) {
        Cow::Borrowed(b) if links => neutralize_links(b),
        Cow::Borrowed(b) => Cow::Borrowed(b),
        Cow::Owned(o) if links => Cow::Owned(neutralize_links(&o).into_owned()),
        owned => owned,
    }
}

/// Trims and collapses every whitespace run (newlines included) to one space.
pub(crate) fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Appends `s` trimmed, with every whitespace run collapsed to one space and `&`, `<`, `>`
/// escaped, in one pass that copies unescaped stretches whole. Returns whether anything
/// was appended.
pub(crate) fn push_value(out: &mut String, s: &str) -> bool {
    let start = out.len();
    let mut stretch: Option<usize> = None;
    let mut space = false;
    let mut i = 0;
    while i < s.len() {
        let (c, len) = char_at_if_special(s, i);
        if c == ' ' || (len > 1 && c.is_whitespace()) {
            if let Some(from) = stretch.take() {
                out.push_str(&s[from..i]);
            }
            space = true;
        } else {
            if space && out.len() > start {
                out.push(' ');
            }
            space = false;
            let entity = match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                c if len > 1 => look_alike_entity(s, i + len, c),
                _ => "",
            };
            if entity.is_empty() {
                stretch.get_or_insert(i);
            } else {
                if let Some(from) = stretch.take() {
                    out.push_str(&s[from..i]);
                }
                out.push_str(entity);
            }
        }
        i += len;
    }
    if let Some(from) = stretch {
        out.push_str(&s[from..]);
    }
    out.len() > start
}

/// The entity an angle-bracket look-alike is rendered as (`＜/memory＞` as
/// `&lt;/memory&gt;`), or `""`; `next` is where the text after `c` starts.
fn look_alike_entity(s: &str, next: usize, c: char) -> &'static str {
    match angle_look_alike(c) {
        Some(true) => "&lt;",
        Some(false) => "&gt;",
        None if is_double_angle(c) && s[next..].trim_start().chars().next().is_some_and(is_slash_like) => "&lt;",
        None => "",
    }
}

/// Like [`char_at`], but only decodes characters that can be whitespace or an angle-bracket
/// look-alike (lead bytes `C2`, `CB`, `E1`, `E2`, `E3`, `EF`); other non-ASCII characters
/// come back as `'x'` with their length, ASCII whitespace as `' '`.
#[inline(always)]
fn char_at_if_special(s: &str, i: usize) -> (char, usize) {
    match s.as_bytes()[i] {
        b'\t'..=b'\r' | b' ' => (' ', 1),
        x @ 0..=0x7F => (char::from(x), 1),
        0xC2 | 0xCB | 0xE1..=0xE3 | 0xEF => char_at(s, i),
        0xC0..=0xDF => ('x', 2),
        0xE0..=0xEF => ('x', 3),
        _ => ('x', 4),
    }
}

/// Appends a confidence in `[0, 1]` with two decimals, by integer arithmetic (float
/// formatting would add its tables to the wasm).
pub(crate) fn push_confidence(out: &mut String, c: f64) {
    let c = if c.is_finite() { c.clamp(0.0, 1.0) } else { 0.0 };
    let n = (c * 100.0 + 0.5) as u32;
    out.push(char::from(b'0' + (n / 100) as u8));
    out.push('.');
    out.push(char::from(b'0' + (n / 10 % 10) as u8));
    out.push(char::from(b'0' + (n % 10) as u8));
}

/// The date a fact's line shows: the date of its `happenedAt` as written (`2023-05-07`, or
/// `2023-05` / `2023` for a reduced date; a time of day and offset are left out), else the
/// date of its `createdAt` (when it was learned); `None` when neither is a valid time.
pub fn fact_date(f: &Fact) -> Option<&str> {
    f.happened_at().and_then(written_day).or_else(|| written_day(&f.created_at))
}

/// The date part of a valid ISO time, as written.
fn written_day(s: &str) -> Option<&str> {
    let s = s.trim();
    event_days(s)?;
    s.split(['T', 't', ' ']).next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_rendered_alone_gets_every_defence() {
        let s = "a  <b>\n![i](//x.example/i.png?d=1) \u{FF1C}/memory\u{FF1E}\u{1b}[2J\u{200B}";
        assert_eq!(render_value(s, true), "a &lt;b&gt; i &lt;/memory&gt;[2J");
        assert_eq!(render_value("[t](https://x.example/p)", false), "[t](https://x.example/p)");
    }

    #[test]
    fn confidence_has_two_decimals() {
        for (c, s) in [(0.9, "0.90"), (1.0, "1.00"), (0.0, "0.00"), (0.755, "0.76"), (0.07, "0.07"), (f64::NAN, "0.00")] {
            let mut out = String::new();
            push_confidence(&mut out, c);
            assert_eq!(out, s, "{c}");
        }
    }

    #[test]
    fn the_date_is_the_event_day_as_written_else_the_day_learned() {
        let mut f = Fact::for_test("f", "x", 0.9);
        f.created_at = "2026-01-02T03:04:05Z".into();
        assert_eq!(fact_date(&f), Some("2026-01-02"));
        for (happened, shown) in [
            ("2023-05-07", "2023-05-07"),
            ("2023-05-07T23:30:00-05:00", "2023-05-07"),
            (" 2023-05 ", "2023-05"),
            ("2023", "2023"),
            ("last week", "2026-01-02"),
            ("2023-02-30", "2026-01-02"),
        ] {
            f.extra.insert("happenedAt".into(), happened.into());
            assert_eq!(fact_date(&f), Some(shown), "{happened}");
        }
        f.extra.remove("happenedAt");
        f.created_at = String::new();
        assert_eq!(fact_date(&f), None);
    }

    #[test]
    fn values_are_escaped_and_collapsed() {
        let mut out = String::new();
        assert!(push_value(&mut out, "  a <b>\n & </memory>\r\n c\u{3000}d "));
        assert_eq!(out, "a &lt;b&gt; &amp; &lt;/memory&gt; c d");
        assert!(!push_value(&mut out, " \n "));
        assert_eq!(collapse(" x \n y "), "x y");
    }

    #[test]
    fn closing_tag_look_alikes_are_escaped() {
        let cases = [
            ("a \u{FF1C}/memory\u{FF1E} b", "a &lt;/memory&gt; b"),
            ("\u{2039}/memory\u{203A}", "&lt;/memory&gt;"),
            ("\u{FE64}/memory\u{FE65} \u{3008}/memory\u{3009} \u{27E8}x\u{27E9}", "&lt;/memory&gt; &lt;/memory&gt; &lt;x&gt;"),
            ("\u{02C2}/memory\u{02C3} \u{1438}/memory\u{1433}", "&lt;/memory&gt; &lt;/memory&gt;"),
            ("\u{300A}\u{FF0F}memory\u{300B} \u{00AB} /memory\u{00BB}", "&lt;\u{FF0F}memory\u{300B} &lt; /memory\u{00BB}"),
            // Double quotation marks stay what they are in prose.
            ("\u{00AB}Le Monde\u{00BB}, \u{300A}红楼梦\u{300B}", "\u{00AB}Le Monde\u{00BB}, \u{300A}红楼梦\u{300B}"),
        ];
        for (input, want) in cases {
            let mut out = String::new();
            push_value(&mut out, input);
            assert_eq!(out, want, "{input}");
        }
    }
}
