//! The write-side checks for what small models write (docs/pipeline.md#small-models): a
//! summary that copies the prompt's wording or is a bare fragment, a section string worth
//! keeping as a fact (the user's own words), a fact copied from the prompt's examples, and
//! a fact that is the user's task rather than something about them. Pure text tests; the
//! token shares use the same sets as the assistant-copy filter.

use crate::extract::prompt::SECTION_HINTS;
use crate::memory::document::SectionId;
use crate::recall::tokenize::is_cjk;

/// A section string (or fragment summary) is kept as a fact when at least this share of
/// its tokens occurs in the user's messages: on real replies of a 0.5B model this kept the
/// user's facts written as sections and dropped what the model made up or copied
/// (docs/local-models.md).
pub const SALVAGE_USER_SHARE: f64 = 0.7;
/// The confidence of a fact kept from a section string (the model did not give one): above
/// the default threshold, below a stated fact's 0.9.
pub const SALVAGE_CONFIDENCE: f64 = 0.8;
/// A summary of fewer words than this is a fragment, not a summary (`"Neovim"`, `"杭州"`):
/// one keyword. A CJK character counts as a third of a word. ("Learning Rust" is a summary.)
pub const MIN_SUMMARY_WORDS: usize = 2;

/// Letters and digits only, lower-cased: `"Last 1-3 months."` → `"last13months"`.
fn squash(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| c.is_alphanumeric()) {
        crate::base::unicode::push_lowercase(&mut out, c);
    }
    out
}

/// Whether `summary` only repeats what the prompt says a section holds (its description,
/// `"last 1-3 months"`, or a section's name), with at most a few characters more.
pub fn copies_section_hint(summary: &str) -> bool {
    let s = squash(summary);
    if s.is_empty() {
        return false;
    }
    SECTION_HINTS.iter().any(|(id, hint)| {
        let (h, k) = (squash(hint), squash(id.key()));
        (s.contains(&h) && s.len() <= h.len() + 12) || s == k
    })
}

/// Words of `text`: whitespace-separated runs, a CJK character counting as a third of a word.
fn words(text: &str) -> f64 {
    text.split_whitespace()
        .map(|w| {
            let cjk = w.chars().filter(|&c| is_cjk(c)).count();
            let rest = w.chars().any(|c| c.is_alphanumeric() && !is_cjk(c));
            cjk as f64 / 3.0 + if rest { 1.0 } else { 0.0 }
        })
        .sum()
}

/// Whether `summary` is too short to be a summary (fewer than [`MIN_SUMMARY_WORDS`]
/// words): a keyword, not a description.
pub fn is_fragment(summary: &str) -> bool {
    words(summary) < MIN_SUMMARY_WORDS as f64
}

/// Words that only say when (a section string like `"last month"` or `"3-12 months ago"`
/// is no fact).
const TIME_WORDS: [&str; 24] = [
    "last",
    "next",
    "this",
    "past",
    "recent",
    "recently",
    "month",
    "months",
    "week",
    "weeks",
    "year",
    "years",
    "day",
    "days",
    "ago",
    "now",
    "today",
    "currently",
    "earlier",
    "later",
    "the",
    "in",
    "few",
    "several",
];
const CJK_TIME_WORDS: [&str; 10] = ["最近", "上个月", "这个月", "今年", "去年", "现在", "个月", "年前", "以前", "前"];

/// Whether `text` says only when: every word a time word or a number.
pub fn is_time_phrase(text: &str) -> bool {
    let mut any = false;
    for w in text.split(|c: char| c.is_whitespace() || (c.is_ascii_punctuation() && c != '\'')) {
        if w.is_empty() || w.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        any = true;
        let lower = crate::base::unicode::lowercase(w);
        let mut rest = lower.as_str();
        // A CJK run: strip time words and digits from its start until nothing is left.
        if rest.chars().any(is_cjk) {
            loop {
                let before = rest.len();
                rest = rest.trim_start_matches(|c: char| c.is_ascii_digit() || "一二三四五六七八九十几两".contains(c));
                for t in CJK_TIME_WORDS {
                    rest = rest.strip_prefix(t).unwrap_or(rest);
                }
                if rest.len() == before {
                    break;
                }
            }
            if !rest.is_empty() {
                return false;
            }
        } else if !TIME_WORDS.contains(&rest) {
            return false;
        }
    }
    any
}

/// Words before a colon that say what follows is the text to work on, not the user's own.
const QUOTING_VERBS: [&str; 12] =
    ["translate", "summarise", "summarize", "rewrite", "proofread", "this page", "翻译", "总结", "改写", "润色", "这句话", "这段"];

/// The parts of a user message that are quoted or pasted rather than said: text between
/// quotes or in a code fence, and what follows a colon after a quoting request
/// ("Translate this: …", "翻译成英文：…", a pasted page).
pub fn quoted_parts(message: &str) -> String {
    let mut out = String::new();
    // After a quoting request's colon: everything that follows.
    let lower = message.to_ascii_lowercase(); // same byte offsets
    if let Some(at) = lower.find([':', '：']) {
        if QUOTING_VERBS.iter().any(|v| lower[..at].contains(v)) {
            let colon = lower[at..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&message[at + colon..]);
            out.push('\n');
        }
    }
    // Quote pairs and code fences.
    const PAIRS: [(char, char); 7] = [('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’'), ('「', '」'), ('『', '』'), ('`', '`')];
    let chars: Vec<(usize, char)> = message.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let Some(&(_, close)) = PAIRS.iter().find(|(open, _)| *open == c) else {
            i += 1;
            continue;
        };
        // An apostrophe inside a word (I'm, don't) opens nothing.
        let inside_word = c == '\'' && i > 0 && chars[i - 1].1.is_alphanumeric();
        let end = (i + 1..chars.len())
            .find(|&j| chars[j].1 == close && !(close == '\'' && chars.get(j + 1).is_some_and(|n| n.1.is_alphanumeric())));
        match end {
            Some(j) if !inside_word && j > i + 1 => {
                let start = at + c.len_utf8();
                out.push_str(&message[start..chars[j].0]);
                out.push('\n');
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// A fact sharing this many tokens with the user's questions and none with what they
/// state restates a question.
pub const QUESTION_TOKENS: usize = 3;

/// The clauses of a user message (split at sentence ends, semicolons, commas and line
/// breaks), each with whether it asks something (ends with a question mark).
pub fn clauses(message: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in message.char_indices() {
        if matches!(c, '.' | '!' | '?' | ';' | ',' | '\n' | '。' | '！' | '？' | '；' | '，') {
            let clause = message[start..i].trim();
            if !clause.is_empty() {
                out.push((clause, matches!(c, '?' | '？')));
            }
            start = i + c.len_utf8();
        }
    }
    let rest = message[start..].trim();
    if !rest.is_empty() {
        out.push((rest, false));
    }
    out
}

/// The section a reply path names (`user.workContext`, `sections[2]` has none).
pub fn section_of(path: &str) -> Option<SectionId> {
    let key = path.rsplit('.').next()?;
    SectionId::ALL.into_iter().find(|s| s.key() == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_section_descriptions_are_caught_and_real_summaries_are_not() {
        for copy in [
            "last 1-3 months",
            "Last 1-3 months.",
            "3-12 months ago",
            "lasting expertise",
            "Role, employer, stack",
            "recentMonths",
            "In the last 1-3 months",
        ] {
            assert!(copies_section_hint(copy), "{copy}");
        }
        for real in [
            "Backend engineer at a fintech startup, writes Go",
            "Moved to Lisbon in the last 1-3 months and learning Portuguese",
            "在杭州做产品经理",
            "",
        ] {
            assert!(!copies_section_hint(real), "{real}");
        }
    }

    #[test]
    fn fragments_are_keywords_and_summaries_are_sentences() {
        for f in ["Neovim", "React", "杭州", "产品经理", "Lyon."] {
            assert!(is_fragment(f), "{f}");
        }
        for s in [
            "Learning Rust",
            "Nurse working night shifts in Lyon.",
            "Uses Neovim with LazyVim",
            "在杭州做产品经理",
            "美团北京的 data scientist",
        ] {
            assert!(!is_fragment(s), "{s}");
        }
    }

    #[test]
    fn time_phrases_say_only_when() {
        for t in ["last month", "3-12 months ago", "Recently", "最近", "上个月", "3个月前", "this year"] {
            assert!(is_time_phrase(t), "{t}");
        }
        for t in ["Moved to Lisbon last month", "lactose intolerant", "住在深圳", "Emma is 6", ""] {
            assert!(!is_time_phrase(t), "{t}");
        }
    }

    #[test]
    fn clauses_split_statements_from_questions() {
        let c = clauses("I'm a nurse and I live in Lyon. Any tips for sleeping after a night shift?");
        assert_eq!(c, [("I'm a nurse and I live in Lyon", false), ("Any tips for sleeping after a night shift", true)]);
        let c = clauses("我是杭州的一名产品经理，最近要写一份需求文档，有什么好的模板吗？");
        assert_eq!(c.iter().filter(|(_, q)| *q).map(|(t, _)| *t).collect::<Vec<_>>(), ["有什么好的模板吗"]);
        assert_eq!(c[0], ("我是杭州的一名产品经理", false));
    }

    #[test]
    fn quoted_and_pasted_text_is_found() {
        let q = quoted_parts("Translate 'good morning, see you at the meeting' into Spanish.");
        assert_eq!(q.trim(), "good morning, see you at the meeting");
        let q = quoted_parts("帮我把这句话翻译成英文：今天天气很好，我们去公园散步吧。");
        assert_eq!(q.trim(), "今天天气很好，我们去公园散步吧。");
        let q = quoted_parts("Summarise this page for me:\n\nWelcome to our store! We sell ceramics.");
        assert!(q.contains("Welcome to our store") && !q.contains("Summarise"), "{q}");
        // Apostrophes inside words quote nothing; a colon without a quoting request neither.
        assert_eq!(quoted_parts("I'm a nurse and I don't sleep well. My setup: Neovim."), "");
    }
}
