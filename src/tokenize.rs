//! Tokenisation for relevance scoring (SPEC §8).
//!
//! * Alphabetic scripts (Latin, Cyrillic, Greek, …): maximal runs of letters and digits,
//!   lower-cased; full-width ASCII (`Ｒｅｄｉｓ`) is folded to ASCII first. Everything else
//!   (spaces, punctuation, symbols, `_`, `-`, `'`) separates words.
//! * Han, kana and Hangul runs: every character as a unigram and every adjacent pair as a
//!   bigram, also when the run is glued to Latin text: `用Redis做缓存` gives `用`, `redis`,
//!   `做`, `缓`, `存`, `做缓`, `缓存`. A pair never spans a non-CJK character.
//!
//! Optional light English normalisation ([`TokenizerOptions`]): a small stopword list and a
//! conservative suffix stripper (plural `-s`/`-es`/`-ies`, `-ing`, `-ed`). Whether they are on
//! by default was decided by measurement (see `docs/relevance.md`).

/// What a token is, so scoring can weight the kinds differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A word of letters and digits from an alphabetic script (lower-cased).
    Word,
    /// A single Han, kana or Hangul character.
    CjkUnigram,
    /// Two adjacent Han, kana or Hangul characters.
    CjkBigram,
}

/// Light English normalisation switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenizerOptions {
    /// Drop a tiny list of English function words and single ASCII letters.
    pub stopwords: bool,
    /// Strip plural and `-ing` / `-ed` suffixes from ASCII words.
    pub stem: bool,
}

/// Whether `c` is a Han ideograph, a kana or a Hangul character.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3005 | 0x3007            // 々 〇
        | 0x3040..=0x30FF          // hiragana, katakana (with ー)
        | 0x31F0..=0x31FF          // katakana phonetic extensions
        | 0x3400..=0x4DBF          // Han extension A
        | 0x4E00..=0x9FFF          // Han
        | 0xF900..=0xFAFF          // Han compatibility
        | 0xFF66..=0xFF9F          // half-width katakana
        | 0x1100..=0x11FF          // Hangul jamo
        | 0x3130..=0x318F          // Hangul compatibility jamo
        | 0xAC00..=0xD7AF          // Hangul syllables
        | 0x20000..=0x3134F        // Han extensions B–H
    )
}

/// Folds full-width ASCII letters and digits (U+FF10–FF5A) to ASCII.
fn fold_width(c: char) -> char {
    match c as u32 {
        0xFF10..=0xFF19 | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A => {
            char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)
        }
        _ => c,
    }
}

/// English function words dropped when [`TokenizerOptions::stopwords`] is on.
const STOPWORDS: &[&str] = &[
    "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "for", "from", "had", "has", "have", "how", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "our", "should", "so", "that", "the", "their",
    "them", "there", "they", "this", "to", "was", "we", "were", "what", "when", "which", "who",
    "will", "with", "would", "you", "your",
];

/// Conservative English suffix stripping for ASCII words longer than four letters.
fn stem(w: &mut String) {
    if w.len() <= 4 || !w.is_ascii() {
        return;
    }
    let b = w.as_bytes();
    let n = b.len();
    if w.ends_with("ies") && n > 5 {
        w.truncate(n - 3);
        w.push('y');
    } else if w.ends_with("sses") || w.ends_with("shes") || w.ends_with("ches") || w.ends_with("xes") {
        w.truncate(n - 2);
    } else if b[n - 1] == b's' && !matches!(b[n - 2], b's' | b'u' | b'i') {
        w.truncate(n - 1);
    } else if w.ends_with("ing") && n >= 6 {
        w.truncate(n - 3);
        undouble(w);
    } else if w.ends_with("ed") && n >= 5 {
        w.truncate(n - 2);
        undouble(w);
    }
}

/// `runn` → `run`, `stopp` → `stop` (not `ll`, `ss`, `zz`: `call`, `pass`).
fn undouble(w: &mut String) {
    let b = w.as_bytes();
    let n = b.len();
    if n >= 3 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z' | b'e' | b'o') {
        w.truncate(n - 1);
    }
}

/// Calls `f` once per token of `text`, in order. Allocation-free apart from one word buffer.
pub fn for_each_token(text: &str, opts: TokenizerOptions, mut f: impl FnMut(&str, TokenKind)) {
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let flush = |word: &mut String, f: &mut dyn FnMut(&str, TokenKind)| {
        if word.is_empty() {
            return;
        }
        let drop = opts.stopwords
            && ((word.len() == 1 && word.as_bytes()[0].is_ascii_alphabetic())
                || STOPWORDS.binary_search(&word.as_str()).is_ok());
        if !drop {
            if opts.stem {
                stem(word);
            }
            f(word, TokenKind::Word);
        }
        word.clear();
    };
    for c in text.chars() {
        let c = fold_width(c);
        if is_cjk(c) {
            flush(&mut word, &mut f);
            let mut buf = [0u8; 8];
            let n = c.encode_utf8(&mut buf[4..]).len();
            f(std::str::from_utf8(&buf[4..4 + n]).unwrap_or(""), TokenKind::CjkUnigram);
            if let Some(p) = prev {
                let mut pair = [0u8; 8];
                let a = p.encode_utf8(&mut pair).len();
                let b = c.encode_utf8(&mut pair[a..]).len();
                f(std::str::from_utf8(&pair[..a + b]).unwrap_or(""), TokenKind::CjkBigram);
            }
            prev = Some(c);
        } else {
            prev = None;
            if c.is_alphanumeric() {
                if c.is_ascii() {
                    word.push(c.to_ascii_lowercase());
                } else {
                    word.extend(c.to_lowercase());
                }
            } else {
                flush(&mut word, &mut f);
            }
        }
    }
    flush(&mut word, &mut f);
}

/// The tokens of `text` as owned strings (convenience for tests and tools).
pub fn tokens(text: &str, opts: TokenizerOptions) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, opts, |t, _| out.push(t.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: TokenizerOptions = TokenizerOptions { stopwords: false, stem: false };

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn words_are_lowercased_unicode_runs() {
        assert_eq!(tokens("Hello, Wörld! node.js C++ 2026", PLAIN), ["hello", "wörld", "node", "js", "c", "2026"]);
        assert_eq!(tokens("ＲｅｄｉｓＤＢ", PLAIN), ["redisdb"]);
        assert_eq!(tokens("Привет мир", PLAIN), ["привет", "мир"]);
    }

    #[test]
    fn cjk_runs_give_unigrams_and_bigrams_even_glued_to_latin() {
        assert_eq!(tokens("用Redis做缓存", PLAIN), ["用", "redis", "做", "缓", "做缓", "存", "缓存"]);
        assert_eq!(tokens("兔子，汤圆", PLAIN), ["兔", "子", "兔子", "汤", "圆", "汤圆"]);
        assert_eq!(tokens("デザイン", PLAIN), ["デ", "ザ", "デザ", "イ", "ザイ", "ン", "イン"]);
        assert_eq!(tokens("한국", PLAIN), ["한", "국", "한국"]);
    }

    #[test]
    fn light_english_normalisation() {
        let o = TokenizerOptions { stopwords: true, stem: true };
        assert_eq!(
            tokens("The user's wishlists and running shoes; climbed peaks, studies", o),
            ["user", "wishlist", "run", "shoe", "climb", "peak", "study"]
        );
        assert_eq!(tokens("class pass bus analysis", o), ["class", "pass", "bus", "analysis"]);
    }
}
