//! What the user said about themself, as a model lists it under `userSaid`: the reply's
//! first key, a list of the user's own words that even a 0.5B model fills (it copies the
//! sentence it read), where it answered `"newFacts": []` to almost everything.
//!
//! A model copies whole messages, questions and all ("At work I write Go services for a
//! fintech. How do I find slow queries?"), so each string is cut here into what states
//! something about the user, by sentence and clause ([`stated_parts`]):
//! - a clause that asks or requests (a question mark, a question word or request verb at
//!   its start, "can you …", "吗"), acknowledges ("Thanks", "That's it", "对"), or gives a
//!   one-off instruction ("this time", "这次") is dropped;
//! - a part is kept only from a clause where the user speaks of themself (I, my, we, 我 …);
//! - in a statement, the clauses after it go with it ("我是做前端的，主要用 React，在一家 SaaS
//!   公司"); in a question, only such clauses themselves (the clause before the question is
//!   usually its context: "最近要写一份需求文档，有什么好的模板吗？");
//! - after a request that ends with a colon ("Summarise this page:") the rest is the text
//!   to work on, never the user's.
//!
//! Each part is then a candidate fact that must pass the write gates like any other, the
//! first being that it is mostly the user's own stated words (`apply`).

use crate::base::unicode::lowercase;
use crate::recall::tokenize::is_cjk;

/// Words of the user speaking of themself (whole words, lowercased, apostrophes as `'`;
/// a CJK character is a word).
const FIRST_PERSON: [&str; 40] = [
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "we'll", "our", "ours", "us", // English
    "je", "j'ai", "moi", "mon", "ma", "mes", "nous", "notre", // French
    "ich", "mein", "meine", "wir", "unser", // German
    "yo", "mi", "mis", "eu", "meu", "minha", "io", // Spanish, Portuguese, Italian
    "我", "私", "僕", "俺", // Chinese, Japanese
];

/// Clause openings that acknowledge the assistant rather than state anything.
const ACKNOWLEDGEMENTS: [&str; 17] = [
    "yes", "yeah", "yep", "no", "nope", "ok", "okay", "thanks", "thank", "great", "perfect", "sure", "exactly", "right", "that's", "that",
    "it's",
];
/// The same in Chinese.
const ACKNOWLEDGEMENTS_CJK: [&str; 11] = ["对", "好", "谢谢", "是的", "就是", "正是", "这正是", "这就是", "不对", "没错", "嗯"];

/// Clause openings (one or two words) that ask or request, beyond [`task_shape`]'s.
const ASKING: [&str; 20] = [
    "can you",
    "could you",
    "would you",
    "will you",
    "do you",
    "any tips",
    "any idea",
    "any ideas",
    "is there",
    "are there",
    "should i",
    "where",
    "when",
    "who",
    "help",
    "don't",
    "do not",
    "just",
    "let's",
    "let me",
];

/// Phrases that make an instruction one-off, not a lasting truth.
const ONE_OFF: [&str; 8] = ["this time", "for now", "this once", "for this", "just this", "这次", "这一次", "本次"];

/// Words that join a clause to the one before it, left off the part it starts ("and I have
/// two cats"); English ones with their space.
const JOINERS: [&str; 9] = ["and ", "but ", "so ", "also ", "plus ", "而且", "并且", "但是", "不过"];

/// What a clause is to the user's statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The user speaks of themself: a part starts here.
    Own,
    /// Neither: goes with an [`Kind::Own`] clause before it in a statement.
    Neutral,
    /// A question, request, acknowledgement or one-off: ends a part.
    Drop,
}

/// The parts of `text` (a `userSaid` string) that state something about the user, as
/// slices of it, trimmed of spaces and closing punctuation; empty when it only asks,
/// requests or acknowledges.
#[inline(never)]
pub(crate) fn stated_parts(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for sentence in split(text, is_sentence_end) {
        let question = sentence.ends_with(['?', '？']);
        let mut clauses = Vec::new();
        for clause in split(sentence, |c, _| matches!(c, ',' | '，' | '、' | ':' | '：')) {
            split_joined(clause, &mut clauses);
        }
        let mut kinds = Vec::with_capacity(clauses.len());
        for c in &clauses {
            kinds.push(kind(c));
        }
        if question {
            if let Some(last) = kinds.last_mut() {
                *last = Kind::Drop;
            }
        }
        let mut run: Option<(usize, usize)> = None;
        let mut quoted = false;
        for (clause, &k) in clauses.iter().zip(&kinds) {
            let (from, to) = span(sentence, clause);
            let keep = match k {
                Kind::Own => true,
                Kind::Neutral => run.is_some() && !question,
                Kind::Drop => false,
            };
            // Each clause where the user speaks of themself starts a part of its own ("I'm a
            // nurse, and I live in Lyon": two facts), so a part the reply's facts already hold
            // is told apart from one they do not.
            if k == Kind::Own {
                if let Some((a, b)) = run.take() {
                    push_part(&mut out, &sentence[a..b]);
                }
            }
            if keep {
                run = Some((run.map_or(from, |r| r.0), to));
            } else if let Some((a, b)) = run.take() {
                push_part(&mut out, &sentence[a..b]);
            }
            // "Summarise this page for me:" — what follows is the text to work on.
            if k == Kind::Drop && clause.trim_end().ends_with([':', '：']) && task_shape(clause).is_some() {
                quoted = true;
                break;
            }
        }
        if let Some((a, b)) = run {
            push_part(&mut out, &sentence[a..b]);
        }
        if quoted {
            break;
        }
    }
    out
}

/// Whether `c` (followed by `next`) ends a sentence: `!?;`, a line break, CJK stops, and a
/// full stop before a space or the end (not the dot of "Node.js" or "3.5").
fn is_sentence_end(c: char, next: Option<char>) -> bool {
    match c {
        '!' | '?' | ';' | '\n' | '。' | '！' | '？' | '；' => true,
        '.' => next.map_or(true, char::is_whitespace),
        _ => false,
    }
}

/// `text` cut after each character `at` marks (the mark stays with the piece before it),
/// blank pieces left out.
fn split(text: &str, at: impl Fn(char, Option<char>) -> bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if at(c, chars.peek().map(|&(_, n)| n)) {
            let end = i + c.len_utf8();
            if !text[start..end].trim().is_empty() {
                out.push(&text[start..end]);
            }
            start = end;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// `clause` cut before each " and " / " but " that goes on with the user speaking of
/// themself ("I'm a nurse and I live in Lyon": "I'm a nurse", "and I live in Lyon"), into
/// `out`; the joiner is left off the part later ([`JOINERS`]).
fn split_joined<'a>(clause: &'a str, out: &mut Vec<&'a str>) {
    let lower = clause.to_ascii_lowercase(); // same byte offsets
    let mut start = 0;
    for (at, _) in lower.match_indices(' ') {
        let rest = &lower[at + 1..];
        if let Some(rest) = rest.strip_prefix("and ").or_else(|| rest.strip_prefix("but ")) {
            // Only the next word is read: a clause of many joiners stays linear.
            if words(rest.split_whitespace().next().unwrap_or("")).first().is_some_and(|w| FIRST_PERSON.contains(&w.as_str())) {
                out.push(&clause[start..at]);
                start = at + 1;
            }
        }
    }
    out.push(&clause[start..]);
}

/// Where the sub-slice `part` of `whole` lies in it.
fn span(whole: &str, part: &str) -> (usize, usize) {
    let from = part.as_ptr() as usize - whole.as_ptr() as usize;
    (from, from + part.len())
}

/// `part` trimmed of spaces and closing punctuation, added when something is left.
fn push_part<'a>(out: &mut Vec<&'a str>, part: &'a str) {
    let mut part = part.trim().trim_end_matches(is_closing).trim_end();
    for joiner in JOINERS {
        let n = joiner.len();
        if part.len() > n && part.is_char_boundary(n) && part[..n].eq_ignore_ascii_case(joiner) {
            part = part[n..].trim_start();
            break;
        }
    }
    if !part.is_empty() {
        out.push(part);
    }
}

/// What `clause` is ([`Kind`]).
fn kind(clause: &str) -> Kind {
    let c = clause.trim().trim_end_matches(is_closing).trim();
    let words = words(c);
    let first = words.first().map_or("", String::as_str);
    let second = words.get(1).map_or("", String::as_str);
    let asks = task_shape(c).is_some()
        || c.ends_with(['吗', '呢'])
        || ASKING.iter().any(|a| match a.split_once(' ') {
            Some((x, y)) => x == first && y == second,
            None => *a == first,
        });
    // "No, I use pnpm": the "No" alone is dropped, the clause after it is the user's.
    let acknowledges =
        ACKNOWLEDGEMENTS.contains(&first) && (first != "no" || words.len() == 1) || ACKNOWLEDGEMENTS_CJK.iter().any(|a| c.starts_with(a));
    let lower = lowercase(c);
    if asks || acknowledges || ONE_OFF.iter().any(|p| lower.contains(p)) {
        return Kind::Drop;
    }
    if words.iter().any(|w| FIRST_PERSON.contains(&w.as_str())) {
        Kind::Own
    } else {
        Kind::Neutral
    }
}

/// Whether `c` closes a clause or sentence (trimmed off a part).
fn is_closing(c: char) -> bool {
    matches!(c, ',' | '，' | '、' | ':' | '：' | '.' | '!' | '。' | '！' | ';' | '；')
}

/// Function words left out of [`share_in`].
const FUNCTION_WORDS: [&str; 26] = [
    "a", "an", "the", "and", "or", "but", "not", "in", "on", "at", "of", "to", "for", "with", "from", "is", "am", "are", "was", "as", "be",
    "by", "的", "是", "了", "在",
];

/// The share of `statement`'s words (CJK characters one by one; first-person and function
/// words left out) that `texts` hold, a word matching one that starts with it or that it
/// starts with ("use" / "uses", "live" / "lives"); 0 for a statement of no such word.
pub(crate) fn share_in(statement: &str, texts: &[&str]) -> f64 {
    let mut theirs = Vec::new();
    for t in texts {
        theirs.extend(words(t));
    }
    let (mut mine, mut held) = (0usize, 0usize);
    for w in words(statement) {
        if FIRST_PERSON.contains(&w.as_str()) || FUNCTION_WORDS.contains(&w.as_str()) {
            continue;
        }
        mine += 1;
        if theirs.iter().any(|t| t.starts_with(w.as_str()) || w.starts_with(t.as_str())) {
            held += 1;
        }
    }
    if mine == 0 {
        0.0
    } else {
        held as f64 / mine as f64
    }
}

/// The lowercased words of `text` (letters, digits and apostrophes, `’` as `'`), each CJK
/// character a word of its own.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in lowercase(text).chars() {
        let ch = if ch == '’' { '\'' } else { ch };
        if is_cjk(ch) || !(ch.is_alphanumeric() || ch == '\'') {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if is_cjk(ch) {
                out.push(ch.to_string());
            }
        } else {
            word.push(ch);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Request verbs that open a task, not a fact about the user (`"Translate …"`).
const REQUEST_VERBS: [&str; 17] = [
    "translate",
    "summarise",
    "summarize",
    "explain",
    "fix",
    "rewrite",
    "convert",
    "answer",
    "write",
    "give",
    "suggest",
    "recommend",
    "list",
    "show",
    "tell",
    "find",
    "please",
];
/// Question words that open a question.
const QUESTION_WORDS: [&str; 4] = ["how", "what", "why", "which"];
/// The same, in Chinese: a request or a question at the start.
const CJK_TASK_STARTS: [&str; 9] = ["请", "帮我", "帮忙", "翻译", "总结", "怎么", "如何", "为什么", "什么"];

/// Why `content` is the user's task rather than a fact about them, if it is: a question,
/// or a request (it opens with a request verb or question word, in English or Chinese).
pub(crate) fn task_shape(content: &str) -> Option<&'static str> {
    let c = content.trim();
    if c.ends_with(['?', '？']) || c.ends_with('吗') {
        return Some("a question");
    }
    let first: String = c.chars().take_while(|ch| ch.is_alphabetic() && !is_cjk(*ch)).collect();
    let first = crate::base::unicode::lowercase(&first);
    if QUESTION_WORDS.contains(&first.as_str()) {
        return Some("a question");
    }
    if REQUEST_VERBS.contains(&first.as_str()) || CJK_TASK_STARTS.iter().any(|s| c.starts_with(s)) {
        return Some("a request");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves each message of the project's conversation corpus, copied whole into
    /// `userSaid` as small models do, is cut to the user's statements: the facts kept, the
    /// question, request, acknowledgement, one-off and quoted text dropped.
    #[test]
    fn whole_messages_are_cut_to_what_the_user_states() {
        let cases: [(&str, &[&str]); 27] = [
            ("I'm a nurse and I live in Lyon. Any tips for sleeping after a night shift?", &["I'm a nurse", "I live in Lyon"]),
            (
                "At work I write Go services on top of Postgres for a fintech startup. How do I find slow queries?",
                &["At work I write Go services on top of Postgres for a fintech startup"],
            ),
            ("Thanks, pg_stat_statements is already on.", &[]),
            ("What's a quick pasta recipe for tonight?", &[]),
            ("Answer in French this time: how long should I boil an egg?", &[]),
            (
                "I moved from Berlin to Lisbon last month. Where can I learn Portuguese in the evenings?",
                &["I moved from Berlin to Lisbon last month"],
            ),
            ("I'm vegetarian and allergic to peanuts. Can you suggest a high-protein lunch?", &["I'm vegetarian and allergic to peanuts"]),
            (
                "My golden retriever Biscuit keeps pulling on the leash. How do I stop that?",
                &["My golden retriever Biscuit keeps pulling on the leash"],
            ),
            ("Translate 'good morning, see you at the meeting' into Spanish.", &[]),
            ("For this PR, don't change the public API, just fix the null check in parseConfig.", &[]),
            (
                "I prefer short answers with one code example. I use Neovim with the LazyVim setup; how do I add a Rust LSP?",
                &["I prefer short answers with one code example", "I use Neovim with the LazyVim setup"],
            ),
            ("Summarise this page for me:\n\nWelcome to our store! We sell handmade ceramics and ship within Europe.", &[]),
            ("我是杭州的一名产品经理，最近要写一份需求文档，有什么好的模板吗？", &["我是杭州的一名产品经理"]),
            ("我不吃辣，也不喝咖啡。下午犯困的时候喝什么比较好？", &["我不吃辣，也不喝咖啡"]),
            ("怎么用 Python 读取一个 CSV 文件？", &[]),
            ("我每周三晚上打羽毛球，最近膝盖有点疼，需要注意什么？", &["我每周三晚上打羽毛球"]),
            ("这次用英文回答我：番茄炒蛋怎么做？", &[]),
            (
                "我是做前端的，主要用 React 和 TypeScript，在一家 SaaS 公司。useEffect 里请求数据有什么坑？",
                &["我是做前端的，主要用 React 和 TypeScript，在一家 SaaS 公司"],
            ),
            ("I'm learning Mandarin, 我现在是 HSK 3 级. What should I read next?", &["I'm learning Mandarin", "我现在是 HSK 3 级"]),
            ("I work as a nurse in Porto, and I have two cats.", &["I work as a nurse in Porto", "I have two cats"]),
            ("帮我把这句话翻译成英文：今天天气很好，我们去公园散步吧。", &[]),
            ("Please always reply in Chinese from now on, 我看中文更快。", &["我看中文更快"]),
            ("That's wrong, use make dev instead. We moved to a Makefile last week.", &["We moved to a Makefile last week"]),
            ("Yes, exactly! That's what I needed.", &[]),
            ("对，就是这样，正是我想要的。", &[]),
            ("No, I use pnpm, not npm.", &["I use pnpm, not npm"]),
            ("I deploy with Node.js 22 on Fly.io", &["I deploy with Node.js 22 on Fly.io"]),
        ];
        for (text, want) in cases {
            assert_eq!(stated_parts(text), want, "{text}");
        }
    }

    /// Proves a statement counts as said by a reply's facts only when they hold nearly all
    /// of its words, inflections included, in English and Chinese.
    #[test]
    fn a_statement_is_said_by_facts_holding_its_words() {
        assert_eq!(share_in("I'm a nurse and I live in Lyon", &["Works as a nurse", "Lives in Lyon"]), 1.0);
        assert!(share_in("I'm a nurse and I live in Lyon", &["Lives in Lyon"]) < 0.75);
        assert_eq!(share_in("I use pnpm, not npm", &["Uses pnpm", "npm"]), 1.0);
        assert_eq!(share_in("我是杭州的一名产品经理", &["在杭州做产品经理", "一名"]), 1.0);
        assert!(share_in("我不吃辣，也不喝咖啡", &["不吃辣"]) < 0.75);
        assert_eq!(share_in("I", &["anything"]), 0.0, "no word of its own: not said");
    }

    /// Proves a string with no clause of the user speaking of themself yields nothing, and
    /// that odd input (blank, punctuation only, no terminator) neither panics nor invents.
    #[test]
    fn nothing_is_made_of_text_without_the_user() {
        for text in ["", "   ", "?!.", "，，", "The weather is nice.", "Lives in Porto", "：我"] {
            let parts = stated_parts(text);
            assert!(parts.iter().all(|p| text.contains(p) && !p.is_empty()), "{text}: {parts:?}");
        }
        assert!(stated_parts("The weather is nice.").is_empty());
        assert!(stated_parts("Lives in Porto").is_empty(), "a model's third-person fact is newFacts' job");
    }

    #[test]
    fn questions_and_requests_are_tasks_and_facts_are_not() {
        for t in [
            "What's a quick pasta recipe for tonight?",
            "How to read a CSV file in Python",
            "Translate 'good morning' into Spanish",
            "Answer in French this time",
            "帮我把这句话翻译成英文",
            "怎么用 Python 读取 CSV 文件",
            "深圳哪里适合爬山吗",
        ] {
            assert!(task_shape(t).is_some(), "{t}");
        }
        for f in [
            "Works as a nurse",
            "Writes Go services",
            "Prefers short answers",
            "是产品经理",
            "Has a daughter named Mia",
            "Is learning Japanese",
        ] {
            assert_eq!(task_shape(f), None, "{f}");
        }
    }
}
