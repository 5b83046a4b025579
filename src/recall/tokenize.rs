//! Tokenisation for relevance scoring (docs/relevance.md).
//!
//! * Alphabetic scripts (Latin, Cyrillic, Greek, …): maximal runs of letters and digits,
//!   lower-cased; full-width ASCII (`Ｒｅｄｉｓ`) is folded to ASCII first. Everything else
//!   (spaces, punctuation, symbols, `_`, `-`, `'`) separates words.
//! * Han, kana and Hangul runs: every character as a unigram and every adjacent pair as a
//!   bigram, also when the run is glued to Latin text: `用Redis做缓存` gives `用`, `redis`,
//!   `做`, `缓`, `存`, `做缓`, `缓存`. A pair never spans a non-CJK character.
//!
//! [`TokenizerOptions`] adds, each measured to help (`docs/relevance.md`): a small English
//! stopword list, a conservative English suffix stripper (plural `-s`/`-es`/`-ies`, `-ing`,
//! `-ed`), and a small built-in bilingual concept lexicon (`lexicon.txt`, about 240
//! everyday concepts in English, Chinese and Japanese: `back 腰`, `spicy 辣`, `cat 猫` …) so
//! that `"my lower back hurts"` can meet `"久坐导致腰不太好"`. See [`for_each_term`].

use crate::base::hash::FxMap;
use std::sync::OnceLock;

/// What a token is, so scoring can weight the kinds differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A word of letters and digits from an alphabetic script (lower-cased).
    Word,
    /// A single Han, kana or Hangul character.
    CjkUnigram,
    /// Two adjacent Han, kana or Hangul characters.
    CjkBigram,
}

/// A unit of relevance scoring: a token, or a concept of the lexicon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Term<'a> {
    /// A word or a CJK gram.
    Token(&'a str, TokenKind),
    /// A lexicon concept. `word` is true when it stands for an English word, which is then
    /// not also given as a token (synonyms become one term); CJK terms keep their grams.
    Concept {
        /// The concept (line of the lexicon).
        id: u32,
        /// Whether it replaces an English word.
        word: bool,
    },
    /// The broader concept of an English word (TypeScript → language), given after the
    /// word's own term. Only a fact's text is indexed under it, never a query's: "which
    /// language?" finds "Prefers TypeScript", but "typescript" does not find "Knows Python".
    Broader(u32),
}

/// Tokenisation switches; [`TokenizerOptions::default`] is what relevance scoring uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenizerOptions {
    /// Drop a tiny list of English function words and single ASCII letters.
    pub stopwords: bool,
    /// Strip plural and `-ing` / `-ed` suffixes from ASCII words.
    pub stem: bool,
    /// Recognise the concepts of the built-in bilingual lexicon (`for_each_term`).
    pub lexicon: bool,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions { stopwords: true, stem: true, lexicon: true }
    }
}

/// Whether `c` is a Han ideograph, a kana or a Hangul character.
#[inline]
pub(crate) fn is_cjk(c: char) -> bool {
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
        0xFF10..=0xFF19 | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

/// The English function words dropped when [`TokenizerOptions::stopwords`] is on, each
/// packed little-endian into a `u64` (see [`pack`]) and sorted, so a lookup is a binary
/// search over integers.
const STOPWORDS: [u64; 56] = {
    const WORDS: [&str; 56] = [
        "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do", "does", "for", "from",
        "had", "has", "have", "how", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should", "so", "that",
        "the", "their", "them", "there", "they", "this", "to", "was", "we", "were", "what", "when", "which", "who", "will", "with",
        "would", "you", "your",
    ];
    let mut out = [0u64; 56];
    let mut i = 0;
    while i < 56 {
        out[i] = pack(WORDS[i].as_bytes());
        i += 1;
    }
    // Insertion sort (const context).
    let mut i = 1;
    while i < 56 {
        let mut j = i;
        while j > 0 && out[j - 1] > out[j] {
            let t = out[j - 1];
            out[j - 1] = out[j];
            out[j] = t;
            j -= 1;
        }
        i += 1;
    }
    out
};

/// Up to 8 bytes as a little-endian integer (0 for longer words, which are no stopwords).
const fn pack(b: &[u8]) -> u64 {
    if b.len() > 8 {
        return 0;
    }
    let mut x = 0u64;
    let mut i = b.len();
    while i > 0 {
        i -= 1;
        x = (x << 8) | b[i] as u64;
    }
    x
}

/// Whether `w` is one of the [`STOPWORDS`].
fn is_stopword(w: &str) -> bool {
    let key = pack(w.as_bytes());
    let (mut lo, mut hi) = (0, STOPWORDS.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if STOPWORDS[mid] < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    key != 0 && lo < STOPWORDS.len() && STOPWORDS[lo] == key
}

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

/// The character starting at byte `i` of `s` (a char boundary) and its length in bytes.
/// ASCII is answered without decoding; callers loop over bytes and only pay for UTF-8
/// decoding on non-ASCII text.
#[inline(always)]
pub(crate) fn char_at(s: &str, i: usize) -> (char, usize) {
    let b = s.as_bytes();
    let x = u32::from(b[i]);
    if x < 0x80 {
        return (char::from(b[i]), 1);
    }
    decode(b, i)
}

/// Decodes the multi-byte UTF-8 sequence starting at `b[i]` (a valid `str`'s bytes).
fn decode(b: &[u8], i: usize) -> (char, usize) {
    let x = u32::from(b[i]);
    let (len, mut c) = if x < 0xE0 {
        (2, x & 0x1F)
    } else if x < 0xF0 {
        (3, x & 0x0F)
    } else {
        (4, x & 0x07)
    };
    for &y in &b[i + 1..i + len] {
        c = (c << 6) | (u32::from(y) & 0x3F);
    }
    (char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER), len)
}

/// The word being read: a slice of the text while it is plain lower-case ASCII, copied
/// (lower-cased) into `buf` otherwise.
struct Word {
    start: Option<usize>,
    copied: bool,
    buf: String,
    stemmed: String,
}

impl Word {
    /// Emits the word ending at byte `end`, if any.
    fn flush(&mut self, text: &str, end: usize, opts: TokenizerOptions, f: &mut dyn FnMut(&str, TokenKind)) {
        let Some(start) = self.start.take() else { return };
        let w = if self.copied { self.buf.as_str() } else { &text[start..end] };
        let b = w.as_bytes();
        if opts.stopwords && ((b.len() == 1 && b[0].is_ascii_alphabetic()) || is_stopword(w)) {
            return;
        }
        let stemmable = b.len() > 4 && (b.ends_with(b"s") || b.ends_with(b"ing") || b.ends_with(b"ed"));
        if opts.stem && stemmable && w.is_ascii() {
            self.stemmed.clear();
            self.stemmed.push_str(w);
            stem(&mut self.stemmed);
            f(&self.stemmed, TokenKind::Word);
        } else {
            f(w, TokenKind::Word);
        }
    }
}

/// Calls `f` once per token of `text`, in order (the lexicon option is ignored here).
/// Tokens are slices of `text` where possible; one small buffer serves the rest.
pub(crate) fn for_each_token(text: &str, opts: TokenizerOptions, mut f: impl FnMut(&str, TokenKind)) {
    tokenize(text, opts, &mut f);
}

/// [`for_each_token`], compiled once: the callback is a trait object, so the tokenizer is
/// not copied into the wasm once per caller.
fn tokenize(text: &str, opts: TokenizerOptions, f: &mut dyn FnMut(&str, TokenKind)) {
    let mut word = Word { start: None, copied: false, buf: String::new(), stemmed: String::new() };
    // Byte offset of the previous character when it was CJK (for bigrams).
    let mut prev_cjk: Option<usize> = None;
    let mut i = 0;
    while i < text.len() {
        let (raw, len) = char_at(text, i);
        let c = fold_width(raw);
        if is_cjk(c) {
            word.flush(text, i, opts, f);
            f(&text[i..i + len], TokenKind::CjkUnigram);
            if let Some(p) = prev_cjk {
                f(&text[p..i + len], TokenKind::CjkBigram);
            }
            prev_cjk = Some(i);
        } else {
            prev_cjk = None;
            if c.is_alphanumeric() {
                if word.start.is_none() {
                    word.start = Some(i);
                    word.copied = false;
                }
                if !word.copied && (c != raw || !c.is_ascii() || c.is_ascii_uppercase()) {
                    word.buf.clear();
                    word.buf.push_str(&text[word.start.unwrap_or(i)..i]);
                    word.copied = true;
                }
                if word.copied {
                    crate::base::unicode::push_lowercase(&mut word.buf, c);
                }
            } else {
                word.flush(text, i, opts, f);
            }
        }
        i += len;
    }
    word.flush(text, text.len(), opts, f);
}

/// The built-in bilingual concept lexicon: one concept per line, its English words and its
/// Chinese (simplified and traditional) and Japanese terms separated by spaces; after a `>`,
/// the English words the concept is broader than (`language … > typescript python …`).
const LEXICON: &str = include_str!("lexicon.txt");

/// The parsed lexicon: English word (as is and stemmed) → its concept and the concept broader
/// than it (each `id + 1` in 16 bits, 0 for none: one map, so one instantiation in the wasm);
/// first character → `(CJK term, concept)`.
struct Lexicon {
    words: FxMap<Box<str>, u32>,
    cjk: FxMap<char, Vec<(&'static str, u32)>>,
}

/// The word's concept (`shift` 0) or broader concept (`shift` 16) is `id`, unless it has one.
fn link_word(words: &mut FxMap<Box<str>, u32>, word: &str, id: usize, shift: u32) {
    let v = words.entry(word.into()).or_insert(0);
    if (*v >> shift) & 0xFFFF == 0 {
        *v |= (id as u32 + 1) << shift;
    }
}

fn lexicon() -> &'static Lexicon {
    static LEX: OnceLock<Lexicon> = OnceLock::new();
    LEX.get_or_init(|| {
        let mut lex = Lexicon { words: FxMap::default(), cjk: FxMap::default() };
        for (id, line) in LEXICON.lines().enumerate() {
            let (line, narrower) = line.split_once('>').unwrap_or((line, ""));
            for term in narrower.split_whitespace() {
                link_word(&mut lex.words, term, id, 16);
            }
            for term in line.split_whitespace() {
                let first = term.chars().next().unwrap_or(' ');
                if is_cjk(first) {
                    lex.cjk.entry(first).or_default().push((term, id as u32));
                    continue;
                }
                let mut stemmed = term.to_string();
                stem(&mut stemmed);
                link_word(&mut lex.words, &stemmed, id, 0);
                link_word(&mut lex.words, term, id, 0);
            }
        }
        lex
    })
}

/// Calls `f` for every term of `text`: the tokens of [`for_each_token`] and, with
/// [`TokenizerOptions::lexicon`], the lexicon concepts it mentions — an English word of the
/// lexicon (after stopwords and stemming) is given as its concept instead of as a token; a
/// CJK term (found as a substring) is given as its concept after the grams.
pub(crate) fn for_each_term(text: &str, opts: TokenizerOptions, mut f: impl FnMut(Term)) {
    terms(text, opts, &mut f);
}

/// [`for_each_term`], compiled once (see [`tokenize`]).
fn terms(text: &str, opts: TokenizerOptions, f: &mut dyn FnMut(Term)) {
    if !opts.lexicon {
        tokenize(text, opts, &mut |t, kind| f(Term::Token(t, kind)));
        return;
    }
    let lex = lexicon();
    tokenize(text, opts, &mut |t, kind| {
        let v = if kind == TokenKind::Word { lex.words.get(t).copied().unwrap_or(0) } else { 0 };
        match v & 0xFFFF {
            0 => f(Term::Token(t, kind)),
            id => f(Term::Concept { id: id - 1, word: true }),
        }
        if v >> 16 != 0 {
            f(Term::Broader((v >> 16) - 1));
        }
    });
    let mut i = 0;
    while i < text.len() {
        let (c, len) = char_at(text, i);
        if len > 1 && is_cjk(c) {
            for &(term, id) in lex.cjk.get(&c).into_iter().flatten() {
                if text[i..].starts_with(term) {
                    f(Term::Concept { id, word: false });
                }
            }
        }
        i += len;
    }
}

/// The tokens of `text` as owned strings (for tests).
#[cfg(test)]
pub(crate) fn tokens(text: &str, opts: TokenizerOptions) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, opts, |t, _| out.push(t.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: TokenizerOptions = TokenizerOptions { stopwords: false, stem: false, lexicon: false };

    #[test]
    fn stopwords_are_found_and_only_they() {
        for w in ["the", "your", "should", "about", "am"] {
            assert!(is_stopword(w), "{w}");
        }
        for w in ["", "th", "them2", "theirs", "shoulder", "aboutness", "x"] {
            assert!(!is_stopword(w), "{w}");
        }
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
        let o = TokenizerOptions { stopwords: true, stem: true, lexicon: false };
        assert_eq!(
            tokens("The user's wishlists and running shoes; climbed peaks, studies", o),
            ["user", "wishlist", "run", "shoe", "climb", "peak", "study"]
        );
        assert_eq!(tokens("class pass bus analysis", o), ["class", "pass", "bus", "analysis"]);
    }

    #[test]
    fn lexicon_concepts_replace_english_words_and_follow_cjk_grams() {
        let terms = |text: &str| {
            let mut out = Vec::new();
            for_each_term(text, TokenizerOptions::default(), |t| out.push(t.to_string_for_test()));
            out
        };
        let en = terms("My lower back hurts");
        let zh = terms("久坐导致腰不太好");
        let back = en.iter().find(|t| t.starts_with('#') && zh.contains(t));
        assert!(back.is_some(), "{en:?} / {zh:?}");
        assert!(!en.contains(&"back".to_string()), "a lexicon word is replaced by its concept");
        assert!(zh.contains(&"腰".to_string()), "CJK grams stay");
        let spicy = terms("Nothing too spicy");
        assert!(spicy.iter().any(|t| terms("不太能吃辣").contains(t) && t.starts_with('#')));
        assert_eq!(terms("Godot"), ["godot"]);
        let ts = terms("Prefers TypeScript");
        assert!(ts.contains(&"typescript".to_string()), "the word stays: {ts:?}");
        let language = terms("which language?");
        assert!(ts.iter().any(|t| t.starts_with('>') && language.contains(&format!("#{}", &t[1..]))), "{ts:?} / {language:?}");
    }

    #[test]
    fn lexicon_lines_are_well_formed() {
        let (mut seen, mut narrower_seen) = (std::collections::HashSet::new(), std::collections::HashSet::new());
        for line in LEXICON.lines() {
            let (line, narrower) = line.split_once('>').unwrap_or((line, ""));
            assert!(line.split_whitespace().count() >= 2, "a concept needs two terms: {line}");
            for t in line.split_whitespace() {
                assert!(seen.insert(t), "term {t} is in two concepts");
                let first = t.chars().next().unwrap();
                assert!(is_cjk(first) || t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{t}");
            }
            for t in narrower.split_whitespace() {
                assert!(narrower_seen.insert(t), "{t} has two broader concepts");
                assert!(t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{t}: an English word");
                let mut stemmed = t.to_string();
                stem(&mut stemmed);
                assert_eq!(stemmed, t, "{t}: the tokenizer's stemmer changes it, so it would never match");
            }
        }
    }

    impl Term<'_> {
        fn to_string_for_test(self) -> String {
            match self {
                Term::Token(t, _) => t.to_string(),
                Term::Concept { id, .. } => format!("#{id}"),
                Term::Broader(id) => format!(">{id}"),
            }
        }
    }
}
