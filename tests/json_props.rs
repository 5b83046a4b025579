//! Property tests of the crate's own JSON (`user_memory::json`): writing then parsing gives
//! the same value, the parser never panics, and on valid JSON it agrees with serde_json.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use user_memory::json::{Map, Number, Value};
use user_memory::ToJson;

/// Valid JSON number texts of every shape, including ones serde_json would re-format.
fn number() -> impl Strategy<Value = Number> {
    (any::<bool>(), "(0|[1-9][0-9]{0,25})", prop::option::of("[0-9]{1,12}"), prop::option::of(("[eE]", "[+-]?", "[0-9]{1,3}"))).prop_map(
        |(neg, int, frac, exp)| {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            s.push_str(&int);
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            if let Some((e, sign, d)) = exp {
                s.push_str(&e);
                s.push_str(&sign);
                s.push_str(&d);
            }
            Number::from_text(&s).expect("generated valid number syntax")
        },
    )
}

/// Strings with the characters that need care: controls, quotes, backslashes, U+2028/9,
/// astral characters.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            any::<char>(),
            prop::sample::select(vec!['"', '\\', '/', '\n', '\u{0}', '\u{1f}', '\u{7f}', '\u{2028}', '\u{2029}', '😀', 'é']),
        ],
        0..12,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect::<Map>())),
        ]
    })
}

/// serde_json values (what serde_json itself writes: its own float formatting, escapes).
fn serde_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as S;
    let leaf = prop_oneof![
        Just(S::Null),
        any::<bool>().prop_map(S::Bool),
        any::<i64>().prop_map(S::from),
        any::<u64>().prop_map(S::from),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(S::from),
        text().prop_map(S::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(S::Array),
            prop::collection::vec((text(), inner), 0..6).prop_map(|kv| S::Object(kv.into_iter().collect())),
        ]
    })
}

/// Compares one of ours with a serde_json value: same structure, same strings, and
/// numbers that serde_json reads the same from our text.
fn same(ours: &Value, theirs: &serde_json::Value) -> bool {
    use serde_json::Value as S;
    match (ours, theirs) {
        (Value::Null, S::Null) => true,
        (Value::Bool(a), S::Bool(b)) => a == b,
        // Same text, or serde_json reads our text as the same number (its own reading is
        // not always the nearest double, so texts are compared where it wrote the number).
        (Value::Number(a), S::Number(n)) => {
            let written = n.to_string();
            a.as_str() == written || serde_json::from_str::<serde_json::Value>(a.as_str()).ok().as_ref() == Some(theirs)
        }
        (Value::String(a), S::String(b)) => a == b,
        (Value::Array(a), S::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y)),
        (Value::Object(a), S::Object(b)) => a.len() == b.len() && a.iter().all(|(k, v)| b.get(k.as_str()).is_some_and(|w| same(v, w))),
        _ => false,
    }
}

/// JSON-ish text: valid JSON cut and spliced with fragments that break it in every way.
fn jsonish() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "", ",", ":", "{", "}", "[", "]", "\"", "\\", "\\u", "\\ud800", "\\udc00", "\\uZZZZ", "-", "0", "01", "1.", ".5", "1e", "1e999",
        "-0", "true", "nul", "NaN", " ", "\n", "\u{1}", "é", "//", "/*", ",]", ",}",
    ]);
    (serde_value(), any::<bool>(), prop::collection::vec((any::<prop::sample::Index>(), fragments, 0usize..3), 0..4)).prop_map(
        |(v, pretty, edits)| {
            let mut s = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            for (at, frag, cut) in edits {
                let mut i = at.index(s.len() + 1);
                while !s.is_char_boundary(i) {
                    i -= 1;
                }
                let mut j = (i + cut).min(s.len());
                while !s.is_char_boundary(j) {
                    j += 1;
                }
                s.replace_range(i..j, frag);
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn written_values_parse_back_equal_and_the_text_is_stable(v in value()) {
        let text = v.to_json();
        prop_assert!(!text.chars().any(|c| c < ' ' || c == '\u{2028}' || c == '\u{2029}'), "raw control or separator in {text:?}");
        let back = Value::parse(&text).unwrap();
        prop_assert_eq!(&back, &v);
        prop_assert_eq!(back.to_json(), text);
    }

    #[test]
    fn serde_json_reads_what_we_write(v in value()) {
        let theirs: serde_json::Value = match serde_json::from_str(&v.to_json()) {
            Ok(t) => t,
            // serde_json refuses numbers beyond f64's range; we keep them as written.
            Err(e) => { prop_assert!(e.to_string().contains("number out of range"), "{e}"); return Ok(()); }
        };
        prop_assert!(same(&v, &theirs), "{v:?} vs {theirs:?}");
    }

    #[test]
    fn we_read_what_serde_json_writes(v in serde_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
        let ours = Value::parse(&text).unwrap();
        prop_assert!(same(&ours, &v), "{ours:?} vs {v:?}");
    }

    #[test]
    fn on_damaged_json_we_agree_with_serde_json(s in jsonish()) {
        let theirs = serde_json::from_str::<serde_json::Value>(&s);
        match (Value::parse(&s), theirs) {
            (Ok(ours), Ok(theirs)) => prop_assert!(same(&ours, &theirs), "{s:?}: {ours:?} vs {theirs:?}"),
            (Err(_), Err(_)) => {}
            (Err(e), Ok(_)) => prop_assert!(false, "{s:?}: serde_json accepts it, we say {e}"),
            // Where we are deliberately more lenient: numbers beyond f64's range are kept
            // as written, lone surrogate escapes become U+FFFD.
            (Ok(_), Err(e)) => {
                let m = e.to_string();
                let lower = s.to_ascii_lowercase();
                let surrogate = ["\\ud8", "\\ud9", "\\uda", "\\udb", "\\udc", "\\udd", "\\ude", "\\udf"].iter().any(|p| lower.contains(p));
                prop_assert!(
                    m.contains("number out of range") || (surrogate && (m.contains("surrogate") || m.contains("end of hex escape"))),
                    "{s:?}: we accept it, serde_json says {m}"
                );
            }
        }
    }

    #[test]
    fn the_parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let s = String::from_utf8_lossy(&bytes);
        if let Ok(v) = Value::parse(&s) {
            prop_assert_eq!(Value::parse(&v.to_json()).unwrap(), v);
        }
    }

    #[test]
    fn errors_point_inside_the_text(s in jsonish()) {
        if let Err(e) = Value::parse(&s) {
            let lines: Vec<&str> = s.split('\n').collect();
            prop_assert!(e.line() >= 1 && e.line() <= lines.len(), "{e} for {s:?}");
            prop_assert!(e.column() >= 1 && e.column() <= lines[e.line() - 1].chars().count() + 1, "{e} for {s:?}");
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for open in ["[", "{\"a\":"] {
        let text = open.repeat(100_000);
        assert!(Value::parse(&text).unwrap_err().to_string().starts_with("recursion limit exceeded"));
    }
}

#[test]
fn large_objects_with_repeated_keys_parse_in_reasonable_time() {
    let mut text = String::from("{");
    for i in 0..200_000 {
        text.push_str(&format!("\"k{}\":{i},", i % 1000));
    }
    text.push_str("\"end\":true}");
    let t = std::time::Instant::now();
    let v = Value::parse(&text).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 1001);
    assert_eq!(v.get("k7").and_then(Value::as_u64), Some(199_007));
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}
