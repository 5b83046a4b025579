//! Signal hints: explicit corrections ("That's wrong, use make dev instead.", "不对，改用
//! make dev", "No, I meant…") and confirmations ("Yes, exactly! That's what I needed.",
//! "对，就是这样") in the user's new messages, found by fixed phrases, English and Chinese.
//! Each signal found adds one line to the extraction prompt ([`push_hints`]), so the model
//! stores a correction as a `correction` fact with its `sourceError`, or raises (reinforces)
//! what the user confirmed. No signal, no line: the prompt is then byte-identical.
//!
//! The phrases favour precision: a false hint may make the model store a wrong
//! "correction", a missed one only leaves the usual instructions. So "no", "try" or "对"
//! alone are not signals; some phrases count only at the start of a sentence or clause
//! ("No, I meant", "改用 …" but not "我打算改用 …"); a phrase inside a question ("That's
//! wrong?") or a neutral idiom (对不对, 不对劲, "if that's wrong") is not one. Docs:
//! `docs/pipeline.md`.

use crate::memory::message::{ChatMessage, Speaker};

/// The line added when the user corrects the assistant or memory.
pub const CORRECTION_HINT: &str = "Hint: the user corrects something in the new messages: store what is right as a \
\"correction\" fact (confidence 0.95, sourceError: what was wrong) and remove the memory fact it replaces.";

/// The line added when the user confirms what the assistant did or said.
pub const REINFORCEMENT_HINT: &str = "Hint: the user confirms something in the new messages: store the confirmed \
approach or preference (confidence 0.9), or list the memory fact it confirms in factsToReinforce.";

/// Phrases of an explicit correction, `/`-separated. A leading `^` means "at the start of a
/// sentence or clause"; words are matched whole, CJK characters one by one; commas between
/// the words of a phrase are allowed ("No, I meant" = "no i meant", "不是，我是说" = "不是我是说").
const CORRECTIONS: &str = "\
    that's wrong/that is wrong/that's incorrect/that is incorrect/that's not right/\
    that is not right/that's not correct/that's not true/this is wrong/you're wrong/\
    you are wrong/wrong again/you got it wrong/you got that wrong/you misunderstood/\
    you misunderstand/you've misunderstood/you misread/not what i asked/not what i meant/\
    not what i said/i already told you/i already said/^no i meant/^no i said/^no i use/\
    ^no use/^no it's not/^no it isn't/^actually i meant/^what i meant/^wrong/^try again/\
    ^please try again/\
    不对/你错了/说错了/搞错了/弄错了/理解错了/理解有误/不是这个意思/不是我想要的/^不是我是说/^改用/应该改用/请改用";

/// Phrases of an explicit confirmation (same notation).
const REINFORCEMENTS: &str = "\
    ^yes exactly/^yes perfect/^yes that's it/^yes that's right/^yes that's correct/\
    ^yep exactly/^exactly right/^that's right/^that's correct/^spot on/exactly what i needed/\
    exactly what i wanted/exactly what i meant/exactly what i was looking for/\
    that's what i needed/that's what i wanted/that's what i meant/\
    that's what i was looking for/this is what i wanted/this is what i needed/keep doing that/\
    keep doing this/\
    ^就是这样/对就是这样/完全正确/就是这个意思/正是我想要的/正是我需要的/就是我想要的/就是我要的/继续保持/^说得对/^没错/^对的";

/// Idioms that contain a phrase above without being a signal: their words are hidden
/// before matching (对不对 "right?", 不对劲 "something is off", 不对称 "asymmetric").
const NEUTRAL: &str = "\
    对不对/不对劲/不对称/不对外/不对口/不对应/不对等/if that's wrong/if that is wrong/whether that's wrong";

/// The signals found in the user's messages of a conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signals {
    /// The user corrects the assistant or memory.
    pub correction: bool,
    /// The user confirms what the assistant did or said.
    pub reinforcement: bool,
}

/// The signals in the user messages of `messages` (assistant messages are not read).
pub fn detect(messages: &[ChatMessage]) -> Signals {
    let mut s = Signals::default();
    for m in messages.iter().filter(|m| m.role == Speaker::User) {
        let mut text = normalise(&m.content);
        for idiom in NEUTRAL.split('/') {
            let p = expand(idiom);
            while let Some(at) = find(&text, &p, false) {
                text[at..at + p.len()].fill(b'#');
            }
        }
        s.correction |= CORRECTIONS.split('/').any(|p| find(&text, &expand(p), p.starts_with('^')).is_some());
        s.reinforcement |= REINFORCEMENTS.split('/').any(|p| find(&text, &expand(p), p.starts_with('^')).is_some());
    }
    s
}

/// Appends one line per signal found in the user messages of `new_messages`
/// ([`CORRECTION_HINT`], [`REINFORCEMENT_HINT`]); nothing when there is none.
pub fn push_hints(out: &mut String, new_messages: &[ChatMessage]) {
    let s = detect(new_messages);
    for (on, line) in [(s.correction, CORRECTION_HINT), (s.reinforcement, REINFORCEMENT_HINT)] {
        if on {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// A message as units (lowercase words, single CJK characters), each after one separator:
/// `|` when it starts a sentence or clause, else a space; each sentence ends with " .", and
/// questions are left out. "Actually, no, I meant X." is `|actually|no i meant x .`.
fn normalise(text: &str) -> Vec<u8> {
    let mut out = String::new();
    let mut sentence_from = 0;
    let (mut clause_start, mut in_word) = (true, false);
    for c in crate::base::unicode::lowercase(text).chars() {
        let c = if matches!(c, '\u{2019}' | '\u{2018}' | '`') { '\'' } else { c };
        let cjk = crate::recall::tokenize::is_cjk(c);
        if cjk || c.is_alphanumeric() || (c == '\'' && in_word) {
            if cjk || !in_word {
                out.push(if clause_start { '|' } else { ' ' });
                clause_start = false;
            }
            in_word = !cjk;
            out.push(c);
            continue;
        }
        in_word = false;
        match c {
            '?' | '？' => out.truncate(sentence_from),
            '.' | '!' | ';' | '\n' | '\r' | '。' | '！' | '；' | '…' => {
                out.push_str(" .");
                sentence_from = out.len();
            }
            ',' | '，' | '、' | ':' | '：' | '-' | '–' | '—' | '~' | '～' | '(' | ')' | '（' | '）' => {}
            _ => continue,
        }
        clause_start = true;
    }
    out.into_bytes()
}

/// A phrase as [`normalise`] writes it, with spaces for separators and without the `^`:
/// "^不是 this" is ` 不 是 this`.
fn expand(phrase: &str) -> Vec<u8> {
    let mut out = String::new();
    let mut in_word = false;
    for c in phrase.trim_start_matches('^').chars() {
        let cjk = crate::recall::tokenize::is_cjk(c);
        if cjk || (c != ' ' && !in_word) {
            out.push(' ');
        }
        in_word = !cjk && c != ' ';
        if c != ' ' {
            out.push(c);
        }
    }
    out.into_bytes()
}

/// Where the [`expand`]ed phrase `p` first occurs in a [`normalise`]d `text` as whole
/// units (a space of `p` matches either separator), at a clause start when `anchored`.
fn find(text: &[u8], p: &[u8], anchored: bool) -> Option<usize> {
    (0..text.len()).find(|&at| {
        let unit_ends = matches!(text.get(at + p.len()), None | Some(b' ' | b'|' | b'\''));
        unit_ends
            && (!anchored || text[at] == b'|')
            && p.iter().zip(&text[at..]).filter(|(a, b)| a == b || (**a == b' ' && **b == b'|')).count() == p.len()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> Signals {
        detect(&[ChatMessage::user(text), ChatMessage::assistant("Noted.")])
    }

    const CORRECTION: Signals = Signals { correction: true, reinforcement: false };
    const REINFORCEMENT: Signals = Signals { correction: false, reinforcement: true };
    const NONE: Signals = Signals { correction: false, reinforcement: false };

    #[test]
    fn english_corrections_are_found() {
        for text in [
            "That's wrong, use make dev instead.",
            "No, I meant the staging server.",
            "no i meant staging",
            "That’s not what I asked for.",
            "You misunderstood: I want the Go version.",
            "Actually, no, I use pnpm, not npm.",
            "Wrong. It's Postgres 16.",
            "Hmm, that is incorrect; the port is 5433.",
            "I already told you I'm vegetarian!",
            "THAT'S WRONG",
        ] {
            assert_eq!(said(text), CORRECTION, "{text}");
        }
    }

    #[test]
    fn chinese_corrections_are_found() {
        for text in [
            "不对，改用 make dev",
            "不对",
            "你理解错了，我要的是 Go 版本。",
            "改用 pnpm 吧",
            "不是，我是说周三。",
            "你搞错了，我住在深圳。",
            "我不是这个意思",
        ] {
            assert_eq!(said(text), CORRECTION, "{text}");
        }
    }

    #[test]
    fn reinforcements_are_found_in_both_languages() {
        for text in [
            "Yes, exactly! That's what I needed.",
            "yes exactly",
            "That's exactly what I was looking for, thanks.",
            "Spot on.",
            "That's right, I live in Lyon.",
            "对，就是这样",
            "完全正确！",
            "没错，我现在在深圳。",
            "这正是我想要的。",
            "就是这个意思，继续保持。",
        ] {
            assert_eq!(said(text), REINFORCEMENT, "{text}");
        }
    }

    #[test]
    fn a_message_may_hold_both() {
        assert_eq!(said("That's wrong: use make dev. Yes, exactly, keep doing that."), Signals { correction: true, reinforcement: true });
    }

    #[test]
    fn ordinary_sentences_are_no_signal() {
        for text in [
            // The words, but not a correction or a confirmation of the assistant.
            "I'll try again tomorrow with a smaller batch.",
            "I'd like to redo my kitchen. Any ideas?",
            "Is that wrong?",
            "That's wrong? Why?",
            "Tell me if that's wrong.",
            "What I need is a quick pasta recipe.",
            "No, thanks.",
            "No idea, what do you suggest?",
            "Exactly how many grams of protein is that?",
            "The weather is perfect today.",
            "I meant to ask you about Kafka.",
            "Right now I use Neovim.",
            "对不对？",
            "我最近膝盖有点不对劲。",
            "这个设计不对称，怎么改？",
            "对了，我下周去杭州。",
            "我打算改用 Linux 做开发。",
            "事情就是这样，我也没办法。",
            "你错了吗？",
            "错误处理怎么写？",
            "",
        ] {
            assert_eq!(said(text), NONE, "{text}");
        }
    }

    #[test]
    fn only_user_messages_are_read() {
        let m = [
            ChatMessage::user("What's the capital of Australia?"),
            ChatMessage::assistant("That's wrong of me: it is Canberra. Yes, exactly."),
        ];
        assert_eq!(detect(&m), NONE);
    }

    #[test]
    fn hints_are_one_line_each_and_none_without_a_signal() {
        let mut out = String::new();
        push_hints(&mut out, &[ChatMessage::user("What's a quick pasta recipe?")]);
        assert_eq!(out, "");
        push_hints(&mut out, &[ChatMessage::user("That's wrong, use make dev instead."), ChatMessage::user("Yes, exactly!")]);
        assert_eq!(out, format!("{CORRECTION_HINT}\n{REINFORCEMENT_HINT}\n"));
    }
}
