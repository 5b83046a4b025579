//! Finding and removing `<tag>…</tag>` blocks in text: the message filter's upload and
//! memory blocks and the parser's reasoning blocks. Tag names match ASCII
//! case-insensitively, across lines, non-greedy; no regex, one pass per tag.

use std::borrow::Cow;

/// How [`remove_blocks`] treats what is not a well-formed block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// An opening tag that is never closed: `Some(true)` removes it and everything after
    /// it, `Some(false)` removes the opening tag alone, `None` keeps it and what follows.
    pub(crate) unclosed_removes_rest: Option<bool>,
    /// A closing tag before any opening one (a chat template that opened the block itself)
    /// removes everything before it.
    pub(crate) orphan_close_removes_before: bool,
    /// The line breaks right after a removed block go with it.
    pub(crate) eat_line_breaks: bool,
}

/// What [`remove_blocks`] did.
pub(crate) struct Removed<'a> {
    /// The text without the blocks (the text itself when there were none).
    pub(crate) text: Cow<'a, str>,
    /// Whether anything was removed.
    pub(crate) any: bool,
    /// Whether an opening tag was never closed.
    pub(crate) unclosed: bool,
}

/// Removes every `<tag …>…</tag>` block of `text` by `rules`.
pub(crate) fn remove_blocks<'a>(text: &'a str, tag: &str, rules: Rules) -> Removed<'a> {
    // Every tag starts with `<`: most messages have none, and skip the lowercase copy and
    // the scans (the message filter runs three passes over each message of every inject()).
    if !text.contains('<') {
        return Removed { text: Cow::Borrowed(text), any: false, unclosed: false };
    }
    let lower = text.to_ascii_lowercase(); // same byte offsets as `text`
    let open = crate::json::field::cat(&["<", tag]);
    let close = crate::json::field::cat(&["</", tag, ">"]);
    let mut pos = 0;
    let mut any = false;
    let mut unclosed = false;
    if rules.orphan_close_removes_before {
        if let Some(c) = lower.find(&close) {
            if find_open_tag(&lower, &open, 0).map_or(true, |o| c < o) {
                pos = c + close.len();
                any = true;
            }
        }
    }
    let mut out = String::with_capacity(text.len() - pos);
    while let Some(start) = find_open_tag(&lower, &open, pos) {
        let Some(rel) = lower[start..].find(&close) else {
            unclosed = true;
            match rules.unclosed_removes_rest {
                Some(true) => {
                    out.push_str(&text[pos..start]);
                    pos = text.len();
                    any = true;
                }
                Some(false) => {
                    out.push_str(&text[pos..start]);
                    pos = lower[start..].find('>').map_or(text.len(), |r| start + r + 1);
                    any = true;
                }
                None => {}
            }
            break;
        };
        out.push_str(&text[pos..start]);
        any = true;
        pos = start + rel + close.len();
        if rules.eat_line_breaks {
            pos += text[pos..].len() - text[pos..].trim_start_matches(['\r', '\n']).len();
        }
    }
    out.push_str(&text[pos..]);
    Removed { text: if any { Cow::Owned(out) } else { Cow::Borrowed(text) }, any, unclosed }
}

/// Position of the next opening tag `open` (`"<name"`) at or after `from`, followed by `>`,
/// `/` or whitespace (so `<memory>` matches but `<memory_state>` and `<memoryx>` do not).
pub(crate) fn find_open_tag(lower: &str, open: &str, from: usize) -> Option<usize> {
    let mut from = from;
    while let Some(rel) = lower.get(from..)?.find(open) {
        let at = from + rel;
        match lower.as_bytes().get(at + open.len()) {
            Some(b'>' | b'/' | b' ' | b'\t' | b'\r' | b'\n') => return Some(at),
            _ => from = at + open.len(),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUT: Rules = Rules { unclosed_removes_rest: Some(true), orphan_close_removes_before: false, eat_line_breaks: true };

    #[test]
    fn blocks_go_by_their_rules() {
        let r = remove_blocks("a<X k=1>b</x>\n\nc<x>d</X>e", "x", CUT);
        assert_eq!((&*r.text, r.any, r.unclosed), ("ace", true, false));
        // Unclosed: cut to the end, keep, or drop the tag alone.
        assert_eq!(remove_blocks("a<x>b", "x", CUT).text, "a");
        let keep = Rules { unclosed_removes_rest: None, ..CUT };
        let r = remove_blocks("a<x>b", "x", keep);
        assert_eq!((&*r.text, r.any, r.unclosed), ("a<x>b", false, true));
        let tag_only = Rules { unclosed_removes_rest: Some(false), orphan_close_removes_before: true, eat_line_breaks: false };
        assert_eq!(remove_blocks("a<x>b", "x", tag_only).text, "ab");
        // A closing tag before any opening one, and line breaks kept.
        assert_eq!(remove_blocks("draft</x>\nanswer<x>y</x>\n!", "x", tag_only).text, "\nanswer\n!");
        // `<xy>` is another tag.
        assert!(!remove_blocks("<xy>b</xy>", "x", CUT).any);
    }
}
