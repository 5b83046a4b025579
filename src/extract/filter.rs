//! Message filtering: what of a conversation is worth remembering.
//!
//! Only user messages and final assistant answers survive. Upload notices
//! (`<uploaded_files>…</uploaded_files>`, `<current_uploads>…</current_uploads>`) are cut out
//! of user messages, and a turn that was nothing but an upload notice (or a `file` part) is
//! dropped together with the answer to it; so is a turn that is only an acknowledgement
//! ("ok", "thanks!", "好的", "👍"): there is nothing in it to remember, and a conversation of
//! nothing else is not queued at all. The library's own `<memory>…</memory>` block is cut
//! out of every message, so injected memory never feeds back into extraction. Invisible
//! and bidi-control characters are stripped (see `src/extract/sanitize.rs`).

use crate::extract::tags::{remove_blocks, Rules};
use crate::memory::message::{ChatMessage, InputMessage, Role};
use std::borrow::Cow;

/// Tags of the upload notices DeerFlow-style front ends put into user messages.
const UPLOAD_TAGS: [&str; 2] = ["uploaded_files", "current_uploads"];
/// Tag of the block this library injects.
const MEMORY_TAG: &str = "memory";

/// Keeps user messages and final assistant answers.
///
/// * user messages lose every `<uploaded_files>` / `<current_uploads>` block and every
///   `<memory>` block; a user message that held only upload blocks or `file` parts, or
///   only an acknowledgement ([`is_acknowledgement`]), is dropped *with the next final answer*
///   (tool-calling assistant messages in between do not cancel that);
/// * assistant messages are kept only without tool calls, minus any `<memory>` block;
/// * tool, system and unknown messages are dropped;
/// * content is trimmed and messages left empty are dropped.
pub fn filter_messages(messages: &[InputMessage]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    let mut skip_next_answer = false;
    for m in messages {
        match m.role {
            Role::User => {
                // An upload block is cut to the end even when unclosed (a truncated file
                // list); a `<memory>` block only when closed, as the library writes it (a
                // user may well write "<memory>" in a question about HTML).
                let mut text = crate::extract::sanitize::strip_invisible(&m.content);
                let mut had_upload = m.has_upload;
                for tag in UPLOAD_TAGS {
                    let r = remove_blocks(&text, tag, UPLOAD_RULES);
                    if r.any {
                        (text, had_upload) = (Cow::Owned(r.text.into_owned()), true);
                    }
                }
                let text = remove_blocks(&text, MEMORY_TAG, MEMORY_RULES).text;
                let text = text.trim();
                if text.is_empty() {
                    // An upload-only turn: its answer is about the upload, not the user.
                    skip_next_answer = had_upload;
                    continue;
                }
                if is_acknowledgement(text) {
                    // "ok", "thanks": its answer is a pleasantry too.
                    skip_next_answer = true;
                    continue;
                }
                skip_next_answer = false;
                out.push(ChatMessage::user(text).said_at(m.at));
            }
            Role::Assistant if !m.has_tool_calls => {
                if skip_next_answer {
                    skip_next_answer = false;
                    continue;
                }
                let clean = crate::extract::sanitize::strip_invisible(&m.content);
                let text = remove_blocks(&clean, MEMORY_TAG, MEMORY_RULES).text;
                let text = text.trim();
                if !text.is_empty() {
                    out.push(ChatMessage::assistant(text).said_at(m.at));
                }
            }
            _ => {}
        }
    }
    out
}

/// Words that are an acknowledgement on their own, in languages written with spaces
/// (one string, split when used: a table of `&str` would cost 8 bytes of wasm per entry).
const ACK_WORDS: &str = "ok okay okey okie k kk thanks thank thx ty tysm cool great nice perfect awesome excellent good \
    got gotcha sure alright right fine noted understood sense lol haha hah hmm wow cheers yay np danke merci gracias grazie \
    obrigado obrigada vale genau d'accord super top";

/// Words that may stand beside those ("thank you so much", "got it", "makes sense").
const ACK_FILLERS: &str = "you so much a lot very it all makes sounds bien that's thats";

/// Acknowledgements in Chinese, Japanese and Korean (a message may chain several: 好的谢谢).
const ACK_CJK: &str =
    "好的 好滴 好吧 好 嗯嗯 嗯 哦哦 哦 噢 谢谢你 谢谢 謝謝 多谢 感谢 收到 明白了 明白 知道了 懂了 行 可以 没问题 太好了 棒 \
    了解 了解です はい ありがとうございます ありがとう わかりました なるほど どうも いいね 承知しました 네 넵 감사합니다 고마워 \
    알겠습니다 알겠어 좋아요 오케이";

fn listed(list: &str, w: &str) -> bool {
    list.split_ascii_whitespace().any(|x| x == w)
}

/// Whether a user message is only an acknowledgement ("ok", "thanks!", "Thank you so much",
/// "好的谢谢", "👍", "!!"): every word is an acknowledgement or a filler beside one
/// ("you", "so", "it" …); emoji and punctuation are ignored. "yes" and "no" are not
/// acknowledgements (they answer questions). A message of 40 or more characters never is one.
pub fn is_acknowledgement(text: &str) -> bool {
    if text.chars().count() >= 40 {
        return false;
    }
    let lower = crate::base::unicode::lowercase(text);
    let mut words = lower.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).peekable();
    let mut core = words.peek().is_none();
    let all = words.all(|w| {
        if w.chars().any(crate::recall::tokenize::is_cjk) {
            let ack = cjk_acks(w);
            core |= ack;
            ack
        } else {
            let w = w.trim_matches('\'');
            let ack = listed(ACK_WORDS, w);
            core |= ack;
            ack || listed(ACK_FILLERS, w)
        }
    });
    all && core
}

/// Whether `w` is a chain of [`ACK_CJK`] items.
fn cjk_acks(w: &str) -> bool {
    if w.is_empty() {
        return true;
    }
    ACK_CJK.split_ascii_whitespace().any(|a| w.strip_prefix(a).is_some_and(cjk_acks))
}

/// Whether a filtered conversation is worth queueing: at least one user and one assistant
/// message.
pub fn worth_queueing(messages: &[ChatMessage]) -> bool {
    use crate::memory::message::Speaker;
    messages.iter().any(|m| m.role == Speaker::User) && messages.iter().any(|m| m.role == Speaker::Assistant)
}

/// Why `observe()` queued nothing: a stable `reason` and a sentence for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotQueued {
    /// `"paused"`, `"empty"`, `"no-user-message"` or `"no-answer"`.
    pub reason: &'static str,
    /// What was received and what the filter kept, e.g. "no final assistant answer survived
    /// filtering (3 messages: 1 user, 1 assistant tool step, 1 tool)".
    pub message: String,
}

impl NotQueued {
    /// Learning is paused (`enabled: false`).
    pub fn paused() -> NotQueued {
        NotQueued { reason: "paused", message: "learning is paused (`enabled: false`)".into() }
    }

    /// Every user message of the conversation was extracted already (the thread's watermark).
    pub fn already_extracted() -> NotQueued {
        NotQueued { reason: "already-extracted", message: "every user message of it was extracted already".into() }
    }
}

/// Why `input`, filtered to `kept`, is not worth queueing (`None` when it is).
pub fn not_queued(input: &[InputMessage], kept: &[ChatMessage]) -> Option<NotQueued> {
    use crate::memory::message::Speaker;
    if worth_queueing(kept) {
        return None;
    }
    if input.is_empty() {
        return Some(NotQueued { reason: "empty", message: "the conversation has no messages".into() });
    }
    // What arrived, by kind, in one pass: user, assistant, assistant tool step, tool, system, unknown.
    let mut counts = [0usize; 6];
    for m in input {
        counts[match m.role {
            Role::User => 0,
            Role::Assistant if !m.has_tool_calls => 1,
            Role::Assistant => 2,
            Role::Tool => 3,
            Role::System => 4,
            Role::Other => 5,
        }] += 1;
    }
    const KINDS: [&str; 6] =
        ["user", "assistant", "assistant tool step", "tool", "system", "without a known `role` or `type` (user/assistant, human/ai)"];
    let mut seen = input.len().to_string() + if input.len() == 1 { " message" } else { " messages" };
    let mut sep = ": ";
    for (n, what) in counts.iter().zip(KINDS) {
        if *n > 0 {
            seen.push_str(sep);
            seen.push_str(&n.to_string());
            seen.push(' ');
            seen.push_str(what);
            sep = ", ";
        }
    }
    let (reason, missing, why) = if !kept.iter().any(|m| m.role == Speaker::User) {
        ("no-user-message", "no user message with text", "")
    } else {
        (
            "no-answer",
            "no final assistant answer",
            "; an assistant message with tool calls is an intermediate step, and the answer to an upload-only turn is dropped",
        )
    };
    Some(NotQueued { reason, message: format!("{missing} survived filtering ({seen}){why}") })
}

/// The last `n` turns (a turn = one user message and the assistant answers after it).
///
/// Assistant messages before the first user message belong to no turn: they are included
/// only when `n` covers every turn. `n = 0` gives an empty slice.
pub fn recent_turns(messages: &[ChatMessage], n: usize) -> &[ChatMessage] {
    use crate::memory::message::Speaker;
    if n == 0 {
        return &messages[messages.len()..];
    }
    let mut seen = 0;
    for (i, m) in messages.iter().enumerate().rev() {
        if m.role == Speaker::User {
            seen += 1;
            if seen == n {
                // Were there more turns before this one? Then cut here.
                if messages[..i].iter().any(|m| m.role == Speaker::User) {
                    return &messages[i..];
                }
                return messages;
            }
        }
    }
    messages
}

/// Cuts `text` to at most `max_chars` characters (not bytes), keeping its beginning and end
/// and marking the cut, e.g. `"first part\n…[1234 characters cut]…\nlast part"`.
///
/// Text that fits is returned unchanged. When `max_chars` is too small to hold the marker,
/// the first `max_chars` characters are returned.
pub fn truncate_for_prompt(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    // The marker's length depends on the number it shows: shrink `keep` until it fits
    // (the number only grows as `keep` shrinks, so this settles in a step or two).
    let mut keep = max_chars;
    loop {
        let marker_chars = format!("\n…[{} characters cut]…\n", total - keep).chars().count();
        let fits = max_chars.saturating_sub(marker_chars);
        if fits >= keep {
            break;
        }
        keep = fits;
    }
    if keep < 2 {
        return text.chars().take(max_chars).collect();
    }
    let marker = format!("\n…[{} characters cut]…\n", total - keep);
    let head = keep - keep / 2;
    let tail = keep / 2;
    let head_end = byte_offset(text, head);
    let tail_start = byte_offset(text, total - tail);
    let mut out = String::with_capacity(head_end + marker.len() + (text.len() - tail_start));
    out.push_str(&text[..head_end]);
    out.push_str(&marker);
    out.push_str(&text[tail_start..]);
    out
}

/// Byte offset of the `n`th character (or the end).
fn byte_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Upload blocks are removed with the line breaks after them; an unclosed one is cut to the
/// end (a truncated file list).
const UPLOAD_RULES: Rules = Rules { unclosed_removes_rest: Some(true), orphan_close_removes_before: false, eat_line_breaks: true };

/// A `<memory>` block only when closed, as the library writes it.
const MEMORY_RULES: Rules = Rules { unclosed_removes_rest: None, ..UPLOAD_RULES };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::message::Speaker;

    fn user(s: &str) -> InputMessage {
        InputMessage::new(Role::User, s)
    }
    fn ai(s: &str) -> InputMessage {
        InputMessage::new(Role::Assistant, s)
    }
    fn ai_tools(s: &str) -> InputMessage {
        InputMessage { has_tool_calls: true, ..InputMessage::new(Role::Assistant, s) }
    }

    #[test]
    fn keeps_user_messages_and_final_answers_only() {
        let out = filter_messages(&[
            InputMessage::new(Role::System, "You are helpful"),
            user("  I write Go at Acme  "),
            ai_tools("let me search"),
            InputMessage::new(Role::Tool, "search results"),
            ai("Nice, Go is great."),
            InputMessage::new(Role::Other, "??"),
        ]);
        assert_eq!(out, vec![ChatMessage::user("I write Go at Acme"), ChatMessage::assistant("Nice, Go is great.")]);
    }

    #[test]
    fn upload_blocks_are_removed_case_insensitively_across_lines() {
        let out = filter_messages(&[user(
            "<Uploaded_Files>\n- /mnt/user-data/uploads/a.csv\n</UPLOADED_FILES>\n\nSummarise this please\n<uploaded_files>x</uploaded_files>",
        )]);
        assert_eq!(out, vec![ChatMessage::user("Summarise this please")]);
    }

    #[test]
    fn an_unclosed_memory_tag_is_text_not_a_block() {
        let text = "Should the <memory> element be a sibling? I work at Acme as a frontend dev.";
        assert_eq!(filter_messages(&[user(text)]), vec![ChatMessage::user(text)]);
        // A closed block is still removed, and an unclosed tag after it kept.
        let out = filter_messages(&[user("<memory>\nFacts:\n- x\n</memory>\nIs <memory> a tag?")]);
        assert_eq!(out, vec![ChatMessage::user("Is <memory> a tag?")]);
    }

    #[test]
    fn unclosed_upload_tag_removes_to_the_end() {
        let out = filter_messages(&[user("Look at this <uploaded_files>\n/mnt/user-data/uploads/a.pdf")]);
        assert_eq!(out, vec![ChatMessage::user("Look at this")]);
    }

    #[test]
    fn upload_only_turn_drops_its_answer_even_after_tool_calls() {
        let out = filter_messages(&[
            user("<uploaded_files>/mnt/user-data/uploads/a.pdf</uploaded_files>"),
            ai_tools("reading the file"),
            InputMessage::new(Role::Tool, "file content"),
            ai("The PDF is a tax form."),
            ai("Anything else?"),
            user("I live in Berlin"),
            ai("Noted."),
        ]);
        assert_eq!(
            out,
            vec![ChatMessage::assistant("Anything else?"), ChatMessage::user("I live in Berlin"), ChatMessage::assistant("Noted.")]
        );
    }

    #[test]
    fn a_real_user_message_cancels_the_skip() {
        let out = filter_messages(&[user("<uploaded_files>a</uploaded_files>"), user("I prefer tabs"), ai("OK")]);
        assert_eq!(out, vec![ChatMessage::user("I prefer tabs"), ChatMessage::assistant("OK")]);
    }

    #[test]
    fn empty_user_message_without_upload_keeps_the_answer() {
        let out = filter_messages(&[user("   "), ai("Here is the image description.")]);
        assert_eq!(out, vec![ChatMessage::assistant("Here is the image description.")]);
    }

    #[test]
    fn memory_block_is_removed_from_user_and_assistant_messages() {
        let out = filter_messages(&[
            user("<memory>\nFacts:\n- [knowledge | 0.90] Go\n</memory>\nWhat should I learn next?"),
            ai("Given <MEMORY>x</Memory> you know Go: try Rust."),
            ai("<memory>only memory</memory>"),
        ]);
        assert_eq!(out, vec![ChatMessage::user("What should I learn next?"), ChatMessage::assistant("Given  you know Go: try Rust.")]);
    }

    #[test]
    fn similar_tag_names_are_not_removed() {
        let out = filter_messages(&[user("keep <memory_state>x</memory_state> and <memoryx>")]);
        assert_eq!(out[0].content, "keep <memory_state>x</memory_state> and <memoryx>");
    }

    #[test]
    fn a_file_only_turn_drops_its_answer_like_an_upload_notice() {
        let file_only = InputMessage { has_upload: true, ..user("") };
        let with_text = InputMessage { has_upload: true, ..user("Summarise it") };
        let out = filter_messages(&[file_only, ai("The CSV has 3 columns."), with_text, ai("Revenue grew.")]);
        assert_eq!(out, vec![ChatMessage::user("Summarise it"), ChatMessage::assistant("Revenue grew.")]);
    }

    #[test]
    fn not_queued_says_which_speaker_is_missing_and_what_arrived() {
        let why = |input: &[InputMessage]| not_queued(input, &filter_messages(input));
        assert_eq!(why(&[user("hi"), ai("hello")]), None);
        assert_eq!(why(&[]).unwrap().reason, "empty");
        let n = why(&[user("I live in Porto")]).unwrap();
        assert_eq!((n.reason, n.message.as_str()), ("no-answer", "no final assistant answer survived filtering (1 message: 1 user); an assistant message with tool calls is an intermediate step, and the answer to an upload-only turn is dropped"));
        let n = why(&[InputMessage::new(Role::Other, "I live in Porto"), ai("Nice")]).unwrap();
        assert_eq!(n.reason, "no-user-message");
        assert_eq!(n.message, "no user message with text survived filtering (2 messages: 1 assistant, 1 without a known `role` or `type` (user/assistant, human/ai))");
        let n = why(&[user("Search flights"), ai_tools("searching"), InputMessage::new(Role::Tool, "{}")]).unwrap();
        assert_eq!(
            n.message.split(';').next().unwrap(),
            "no final assistant answer survived filtering (3 messages: 1 user, 1 assistant tool step, 1 tool)"
        );
    }

    #[test]
    fn worth_queueing_needs_both_speakers() {
        assert!(!worth_queueing(&[]));
        assert!(!worth_queueing(&[ChatMessage::user("a"), ChatMessage::user("b")]));
        assert!(!worth_queueing(&[ChatMessage::assistant("a")]));
        assert!(worth_queueing(&[ChatMessage::assistant("a"), ChatMessage::user("b")]));
    }

    #[test]
    fn recent_turns_counts_user_messages_from_the_end() {
        let msgs = [
            ChatMessage::assistant("hello"),
            ChatMessage::user("u1"),
            ChatMessage::assistant("a1"),
            ChatMessage::user("u2"),
            ChatMessage::assistant("a2a"),
            ChatMessage::assistant("a2b"),
            ChatMessage::user("u3"),
        ];
        assert!(recent_turns(&msgs, 0).is_empty());
        assert_eq!(recent_turns(&msgs, 1), &msgs[6..]);
        assert_eq!(recent_turns(&msgs, 2), &msgs[3..]);
        assert_eq!(recent_turns(&msgs, 3), &msgs[..], "leading greeting included once n covers all turns");
        assert_eq!(recent_turns(&msgs, 9), &msgs[..]);
        let only_ai = [ChatMessage::assistant("x")];
        assert_eq!(recent_turns(&only_ai, 1), &only_ai[..]);
        assert!(recent_turns(&[], 3).is_empty());
        assert_eq!(recent_turns(&msgs, 1)[0].role, Speaker::User);
    }

    #[test]
    fn truncate_keeps_short_text_and_cuts_long_text_by_chars() {
        assert_eq!(truncate_for_prompt("short", 1000), "short");
        let long: String = "a".repeat(600) + &"中".repeat(600) + "END";
        let cut = truncate_for_prompt(&long, 1000);
        assert!(cut.chars().count() <= 1000, "{}", cut.chars().count());
        assert!(cut.starts_with("aaaa") && cut.ends_with("中END"));
        let kept = cut.chars().count() - cut.split('\n').nth(1).unwrap().chars().count() - 2;
        assert!(cut.contains(&format!("…[{} characters cut]…", 1203 - kept)), "{cut}");
    }

    #[test]
    fn truncate_never_splits_a_char_and_handles_tiny_limits() {
        let s = "日本語のテキスト".repeat(10);
        for max in 0..s.chars().count() {
            let cut = truncate_for_prompt(&s, max);
            assert!(cut.chars().count() <= max);
        }
        assert_eq!(truncate_for_prompt("abcdef", 3), "abc");
    }
}
