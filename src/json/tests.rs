use super::*;

fn p(text: &str) -> Value {
    Value::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn err(text: &str) -> String {
    Value::parse(text).unwrap_err().to_string()
}

#[test]
fn parses_every_kind_and_writes_it_back_compactly() {
    let text = r#" {"a": [1, -2.50, 3e+2, 0.0], "b": {"c": null, "d": true, "e": false}, "s": "x\"\\\/\n\u00e9\ud83d\ude00"} "#;
    let v = p(text);
    assert_eq!(v.get("a").unwrap().as_array().unwrap().len(), 4);
    assert_eq!(v.get("s").unwrap().as_str(), Some("x\"\\/\né😀"));
    assert_eq!(v.to_json(), r#"{"a":[1,-2.50,3e+2,0.0],"b":{"c":null,"d":true,"e":false},"s":"x\"\\/\né😀"}"#);
}

#[test]
fn numbers_keep_their_text_and_read_as_numbers() {
    let v = p("[1.10, 1e3, 123456789012345678901234567890, -0, 0.9]");
    let a = v.as_array().unwrap();
    assert_eq!(v.to_json(), "[1.10,1e3,123456789012345678901234567890,-0,0.9]");
    assert_eq!(a[0].as_f64(), Some(1.1));
    assert_eq!(a[1].as_f64(), Some(1000.0));
    assert_eq!(a[1].as_u64(), None, "an exponent is not an integer literal");
    assert_eq!(a[2].as_u64(), None, "too large for u64");
    assert_eq!(a[4].as_f64(), Some(0.9));
    assert_eq!(p("18446744073709551615").as_u64(), Some(u64::MAX));
    assert!(p("1e400").as_f64().unwrap().is_infinite());
}

#[test]
fn decimals_are_read_exactly_where_it_matters() {
    for s in ["0.1", "0.2", "0.3", "0.6", "0.7", "0.95", "0.123456789", "1e-7", "2.5e-3", "123.456"] {
        assert_eq!(parse_decimal(s), s.parse::<f64>().ok(), "{s}");
    }
    assert_eq!(parse_decimal(" .75 "), Some(0.75));
    assert_eq!(parse_decimal("+1"), Some(1.0));
    assert_eq!(parse_decimal("1e"), None);
    assert_eq!(parse_decimal("."), None);
}

#[test]
fn extreme_exponents_give_zero_or_infinity_without_overflowing() {
    // `-scale` of i32::MIN overflowed (a panic in debug builds, ∞/NaN after wrapping).
    assert_eq!(parse_decimal("1e-2147483648"), Some(0.0));
    assert_eq!(parse_decimal("0e-2147483648"), Some(0.0));
    assert_eq!(parse_decimal("0.5e-2147483647"), Some(0.0));
    assert_eq!(parse_decimal("1e2147483647"), Some(f64::INFINITY));
    assert_eq!(parse_decimal("-1e2147483647"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_decimal("1e-2147483649"), None, "beyond i32: not a number we read");
}

#[test]
fn duplicate_keys_keep_the_first_position_and_the_last_value() {
    let v = p(r#"{"a": 1, "b": 2, "a": 3, "c": 4, "a": 5}"#);
    assert_eq!(v.to_json(), r#"{"a":5,"b":2,"c":4}"#);
    // Large objects take the sorting path.
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!("\"k{}\": {i},", i % 30));
    }
    text.push_str("\"end\": 0}");
    let m = p(&text);
    let m = m.as_object().unwrap();
    assert_eq!(m.len(), 31);
    assert_eq!(m.keys().next().map(String::as_str), Some("k0"));
    assert_eq!(m.get("k0").and_then(Value::as_u64), Some(30));
    assert_eq!(m.get("k29").and_then(Value::as_u64), Some(29));
}

#[test]
fn errors_say_what_and_where() {
    assert_eq!(err(""), "EOF while parsing a value at line 1 column 1");
    assert_eq!(err("{not json"), "key must be a string at line 1 column 2");
    assert_eq!(err("{\"a\" 1}"), "expected `:` at line 1 column 6");
    assert_eq!(err("{\"a\": 1\n \"b\": 2}"), "expected `,` or `}` at line 2 column 2");
    assert_eq!(err("[1, 2,]"), "trailing comma at line 1 column 7");
    assert_eq!(err("{\"a\": 1,}"), "trailing comma at line 1 column 9");
    assert_eq!(err("[1 2]"), "expected `,` or `]` at line 1 column 4");
    assert_eq!(err("[01]"), "expected `,` or `]` at line 1 column 3");
    assert_eq!(err("-x"), "invalid number at line 1 column 1");
    assert_eq!(err("1."), "invalid number at line 1 column 1");
    assert_eq!(err("NaN"), "expected value at line 1 column 1");
    assert_eq!(err("tru"), "expected value at line 1 column 1");
    assert_eq!(err("\"a\\x\""), "invalid escape at line 1 column 4");
    assert_eq!(err("\"é\u{1}\""), "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 3");
    assert_eq!(err("\"abc"), "EOF while parsing a string at line 1 column 5");
    assert_eq!(err("[1] x"), "trailing characters at line 1 column 5");
    assert_eq!(err(&"[".repeat(200)), "recursion limit exceeded at line 1 column 129");
    assert!(Value::parse(&format!("{}{}", "[".repeat(128), "]".repeat(128))).is_ok());
}

#[test]
fn lone_surrogates_become_the_replacement_character() {
    assert_eq!(p(r#""a\ud800b""#).as_str(), Some("a\u{fffd}b"));
    assert_eq!(p(r#""\udc00\ud83d""#).as_str(), Some("\u{fffd}\u{fffd}"));
    assert_eq!(p(r#""\ud800\u0041""#).as_str(), Some("\u{fffd}A"));
}

#[test]
fn writing_escapes_controls_quotes_and_line_separators() {
    let mut out = String::new();
    write_str(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é\u{2028}\u{2029}😀");
    assert_eq!(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}é\\u2028\\u2029😀\"");
    assert_eq!(p(&out).as_str(), Some("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é\u{2028}\u{2029}😀"));
}

#[test]
fn fixed_precision_floats() {
    let f = |x: f64, d: u32| {
        let mut s = String::new();
        write_fixed(&mut s, x, d);
        s
    };
    assert_eq!(f(0.30000000000000004, 4), "0.3");
    assert_eq!(f(1.0, 4), "1.0");
    assert_eq!(f(0.0, 4), "0.0");
    assert_eq!(f(-0.0, 4), "0.0");
    assert_eq!(f(0.12345, 4), "0.1235");
    assert_eq!(f(0.00004, 4), "0.0");
    assert_eq!(f(-2.5, 2), "-2.5");
    assert_eq!(f(0.7, 6), "0.7");
    assert_eq!(f(123456.789, 2), "123456.79");
    assert_eq!(f(5.0, 0), "5");
    let huge = f(1e300, 6);
    assert!(huge.contains('e') && Value::parse(&huge).is_ok(), "{huge}");
    assert!((parse_decimal(&huge).unwrap() / 1e300 - 1.0).abs() < 1e-9, "{huge}");
    assert_eq!(f(f64::NAN, 4), "null");
    let mut s = String::new();
    write_u64(&mut s, u64::MAX);
    assert_eq!(s, "18446744073709551615");
    for x in [0.0, 0.5, 0.9, 0.95, 0.1234, 1.0] {
        assert_eq!(f(x, 4).parse::<f64>().unwrap(), x);
    }
}

#[test]
fn maps_compare_as_json_objects_and_edit_in_place() {
    let mut a = p(r#"{"x": 1, "y": [true]}"#).as_object().unwrap().clone();
    let b = p(r#"{"y": [true], "x": 1}"#).as_object().unwrap().clone();
    assert_eq!(a, b);
    assert_ne!(a, p(r#"{"x": 1}"#).as_object().unwrap().clone());
    assert_eq!(a.insert("x".into(), Value::from(2u64)), Some(Value::from(1u64)));
    a.insert("z".into(), Value::Null);
    assert_eq!(Value::Object(a.clone()).to_json(), r#"{"x":2,"y":[true],"z":null}"#);
    assert_eq!(a.remove("x"), Some(Value::from(2u64)));
    assert_eq!(a.keys().cloned().collect::<Vec<_>>(), ["y", "z"]);
    assert!(!a.contains_key("x") && a.len() == 2);
}

#[test]
fn object_and_array_writers() {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("a", "x").opt_u64("b", None).fixed("c", 0.25, 6).bool("d", false);
    let mut arr = ArrayWriter::new(o.key("e"));
    arr.str("p").str("q");
    arr.finish();
    let mut extra = Map::new();
    extra.insert("a".into(), Value::Null);
    extra.insert("f".into(), Value::from("g"));
    o.entries(&extra, &["a"]);
    o.finish();
    assert_eq!(out, r#"{"a":"x","b":null,"c":0.25,"d":false,"e":["p","q"],"f":"g"}"#);
    assert_eq!(Number::from_f64(0.5, 4).unwrap().as_str(), "0.5");
    assert!(Number::from_f64(f64::INFINITY, 4).is_none());
    assert_eq!(Number::from_text("01"), None);
    assert_eq!(Number::from_text("-1.5e-3").unwrap().as_str(), "-1.5e-3");
}
