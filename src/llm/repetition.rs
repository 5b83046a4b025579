//! Telling a repetition loop from a long reply: small local models under a JSON grammar
//! often cut off at the token limit while writing the same piece again and again (`"fact_1",
//! "fact_2", …`, one sentence over and over, endless whitespace). A larger budget only
//! buys a longer loop, so such a reply is asked again once with a repetition penalty
//! instead (docs/local-models.md).

/// Only the end of a reply is looked at (a loop runs to the cut).
const TAIL_CHARS: usize = 4000;
/// The longest repeated piece looked for, in characters.
const MAX_PERIOD: usize = 240;
/// A loop repeats its piece at least this many times at the end of the reply…
const MIN_REPEATS: usize = 3;
/// …over at least this many characters.
const MIN_LOOP_CHARS: usize = 60;

/// Whether `text` ends in a repetition loop: its last characters, with every digit read as
/// `0` (so counters and ids that go up still repeat), are one piece of at most
/// [`MAX_PERIOD`] characters repeated at least [`MIN_REPEATS`] times over at least
/// [`MIN_LOOP_CHARS`] characters.
pub fn is_repetition_loop(text: &str) -> bool {
    let tail: Vec<char> = {
        let mut rev: Vec<char> = text.chars().rev().take(TAIL_CHARS).map(|c| if c.is_ascii_digit() { '0' } else { c }).collect();
        rev.reverse();
        rev
    };
    let n = tail.len();
    (1..=MAX_PERIOD.min(n / MIN_REPEATS)).any(|p| {
        // How far back from the end the text stays p-periodic.
        let run = (p..n).rev().take_while(|&i| tail[i] == tail[i - p]).count() + p;
        run >= p * MIN_REPEATS && run >= MIN_LOOP_CHARS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_of_ids_sentences_and_whitespace_are_caught() {
        let ids: String = (1..40).map(|i| format!("\"fact_{i:02}\", ")).collect();
        assert!(is_repetition_loop(&format!(r#"{{"factsToReinforce": [{ids}"#)));
        let sentence = "The user likes to cook pasta. ".repeat(5);
        assert!(is_repetition_loop(&format!(r#"{{"newFacts": [{{"content": "{sentence}"#)));
        assert!(is_repetition_loop(&format!("{{\"newFacts\": [{}", "\n".repeat(200))));
        // Counting up across a digit boundary: 8, 9, 10, 11 still repeats once digits are masked
        // after the boundary.
        let counted: String = (1..60).map(|i| format!("{{\"id\": \"f{i}\"}}, ")).collect();
        assert!(is_repetition_loop(&counted));
    }

    #[test]
    fn long_replies_that_do_not_repeat_are_not_loops() {
        let varied = r#"{"newFacts": [{"content": "Works as a nurse in Lyon", "category": "context", "confidence": 0.9},
            {"content": "Prefers short answers without code", "category": "preference", "confidence": 0.9},
            {"content": "Is learning Japanese for a trip to Kyoto", "category": "goal", "confidence": 0.8}], "user": {"workContext": {"summary": "Nurse on night shif"#;
        assert!(!is_repetition_loop(varied));
        // Short repeats (a closing run, a few spaces) are not enough.
        assert!(!is_repetition_loop(r#"{"newFacts": [{"content": "aaa"}]}]]]]"#));
        assert!(!is_repetition_loop(""));
        assert!(!is_repetition_loop("ab"));
        // Two repeats of a long piece are not three.
        let twice = "I live in Lisbon and work remotely for a Berlin startup. ".repeat(2);
        assert!(!is_repetition_loop(&twice));
    }
}
