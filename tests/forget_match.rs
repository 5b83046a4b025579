//! The forget-tombstone matcher on the labelled set tests/data/forget-variants.json: every
//! trivial variant of a forgotten fact (an added word, a Cyrillic letter, a fullwidth form,
//! a one-letter slip) matches its tombstone; facts that differ in substance (another
//! drug, a negation, another number) and unrelated facts do not. Prints the rates.
use user_memory::document::normalize_content;
use user_memory::forget::{Tombstone, Tombstones};
use user_memory::json::Value;

fn pairs(data: &Value, key: &str) -> Vec<(String, String)> {
    let list = data.get(key).and_then(Value::as_array).expect(key);
    list.iter()
        .map(|p| {
            (p.get("tombstone").and_then(Value::as_str).unwrap().to_string(), p.get("text").and_then(Value::as_str).unwrap().to_string())
        })
        .collect()
}

fn matches(tombstone: &str, text: &str) -> bool {
    let t = Tombstones { list: vec![Tombstone { id: "fact_1".into(), content: normalize_content(tombstone), at: 1 }] };
    t.find(text).is_some()
}

#[test]
fn trivial_variants_match_and_other_facts_do_not() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/forget-variants.json")).unwrap();
    let data = Value::parse(&text).unwrap();
    let variants = pairs(&data, "variants");
    let different = pairs(&data, "different");
    let missed: Vec<_> = variants.iter().filter(|(t, c)| !matches(t, c)).collect();
    // And, not written for tuning: every variant against every other tombstone.
    let mut tombstones: Vec<&String> = variants.iter().map(|(t, _)| t).collect();
    tombstones.dedup();
    let crossed: Vec<(String, String)> =
        tombstones.iter().flat_map(|t| variants.iter().filter(|(o, _)| o != *t).map(|(_, c)| ((*t).clone(), c.clone()))).collect();
    let different: Vec<_> = different.into_iter().chain(crossed).collect();
    let false_positives: Vec<_> = different.iter().filter(|(t, c)| matches(t, c)).collect();
    println!(
        "variants matched: {}/{}; false positives: {}/{} ({:.1} %)",
        variants.len() - missed.len(),
        variants.len(),
        false_positives.len(),
        different.len(),
        100.0 * false_positives.len() as f64 / different.len() as f64
    );
    assert!(missed.is_empty(), "variants not matched: {missed:#?}");
    assert!(false_positives.is_empty(), "different facts matched: {false_positives:#?}");
}
