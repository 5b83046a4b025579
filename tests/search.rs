//! `search()`: the ranking of `inject()` for an arbitrary text, returning matches only.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::fact;
use user_memory::config::Config;
use user_memory::document::Document;
use user_memory::inject::{select, InjectOptions, Report};
use user_memory::message::ChatMessage;
use user_memory::relevance::FactIndex;
use user_memory::search::{search, SearchOptions};
use user_memory::tokens::Estimate;

fn doc() -> Document {
    Document {
        facts: vec![
            fact("f_rabbit", "养了一只垂耳兔，叫汤圆", 0.95),
            fact("f_godot", "用 Godot 4 开发独立游戏，脚本写 GDScript", 0.95),
            fact("f_save", "存档系统目前用 JSON 文件，担心玩家改档", 0.75),
            fact("f_city", "住在成都高新区", 1.0),
            fact("f_bread", "Keeps a sourdough starter that gets fed every twelve hours", 0.75),
            fact("f_short", "Prefers short answers with one concrete example", 0.9),
            fact("f_cache", "后端用Redis做缓存，数据库是PostgreSQL", 0.7),
            fact("f_blank", "   ", 1.0),
            fact("f_game2", "Plays board games on Fridays", 0.7),
        ],
        ..Document::empty()
    }
}

fn run(doc: &Document, query: &str, opts: SearchOptions) -> Vec<(String, f64)> {
    let mut index = FactIndex::new();
    index.sync(&doc.facts);
    search(doc, &index, None, query, &opts, &Config::default().inject)
        .into_iter()
        .map(|h| (doc.facts[h.position].id.clone(), h.score))
        .collect()
}

#[test]
fn only_matches_come_back_best_first_however_confident_the_others_are() {
    let d = doc();
    let hits = run(&d, "my rabbit 汤圆 won't eat", SearchOptions::default());
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("f_rabbit"));
    // The city fact (confidence 1.0) shares nothing with the query: not a match.
    assert!(hits.iter().all(|(id, _)| id != "f_city" && id != "f_blank"), "{hits:?}");
    assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "best first: {hits:?}");
    assert!(run(&d, "   \n", SearchOptions::default()).is_empty(), "a blank query matches nothing");
    assert!(run(&d, "quantum chromodynamics", SearchOptions::default()).is_empty(), "nothing in common: no hits");
}

#[test]
fn search_ranks_exactly_as_explain_does_for_the_same_text() {
    let d = doc();
    let mut index = FactIndex::new();
    index.sync(&d.facts);
    let cfg = Config::default().inject;
    let query = "Redis 缓存 and the game's save files in JSON";
    let hits = search(&d, &index, None, query, &SearchOptions { limit: 100, min_score: 0.0 }, &cfg);
    let e = select(&d, &index, None, &[ChatMessage::user(query)], &cfg, &Estimate, Report::All);
    let explained: Vec<_> = e.facts.iter().filter(|f| f.similarity > 0.0 && f.tokens > 0).map(|f| (f.id.clone(), f.score)).collect();
    let searched: Vec<_> = hits.iter().map(|h| (d.facts[h.position].id.clone(), h.score)).collect();
    assert_eq!(searched, explained);
    assert!(searched.len() >= 3, "{searched:?}");
    for h in &hits {
        assert_eq!(h.similarity, h.lexical, "without embeddings the similarity is the lexical one");
        assert!((h.score - (0.6 * h.similarity + 0.4 * d.facts[h.position].confidence)).abs() < 1e-12);
    }
}

#[test]
fn an_expired_fact_is_no_hit_as_it_is_not_injected() {
    // Proves search() applies inject()'s lifetime rule: with the clock past the trip's
    // 30 days it is left out of both; without a clock (or before the end) it is found.
    let mut trip = fact("f_trip", "In Tokyo for a conference this month", 1.0);
    trip.set_expected_valid_days(30.0); // created 2026-01-01
    let d = Document { facts: vec![trip, fact("f_sushi", "Likes sushi in Tokyo", 0.8)], ..Document::empty() };
    let mut index = FactIndex::new();
    index.sync(&d.facts);
    let ids = |now: &str| {
        let weights = InjectOptions { now_ms: user_memory::time::millis_from_iso(now), ..Config::default().inject };
        let hits = search(&d, &index, None, "Tokyo", &SearchOptions::default(), &weights);
        let block = select(&d, &index, None, &[ChatMessage::user("Tokyo")], &weights, &Estimate, Report::Block).block;
        (hits.iter().map(|h| d.facts[h.position].id.clone()).collect::<Vec<_>>(), block.contains("conference"))
    };
    assert_eq!(ids("2026-01-20T00:00:00Z"), (vec!["f_trip".to_string(), "f_sushi".to_string()], true));
    assert_eq!(ids("2026-03-14T00:00:00Z"), (vec!["f_sushi".to_string()], false), "over by March");
    assert_eq!(run(&d, "Tokyo", SearchOptions::default()).len(), 2, "without a clock nothing expires");
}

#[test]
fn limit_and_min_score_cut_the_list() {
    let d = doc();
    let all = run(&d, "games GDScript JSON Redis sourdough", SearchOptions { limit: 100, min_score: 0.0 });
    assert!(all.len() >= 4, "{all:?}");
    assert_eq!(run(&d, "games GDScript JSON Redis sourdough", SearchOptions { limit: 2, min_score: 0.0 }), all[..2].to_vec());
    let cut = all[1].1;
    let above = run(&d, "games GDScript JSON Redis sourdough", SearchOptions { limit: 100, min_score: cut });
    assert!(above.iter().all(|h| h.1 >= cut) && above.len() >= 2 && above.len() < all.len(), "{above:?}");
    // A limit larger than memory is fine.
    assert_eq!(run(&d, "games", SearchOptions { limit: usize::MAX, min_score: 0.0 }).len(), 2);
}

#[test]
fn options_are_validated_and_name_what_is_wrong() {
    let ok = SearchOptions::from_value(&json!({"limit": 3, "minScore": 0.5})).unwrap();
    assert_eq!(ok, SearchOptions { limit: 3, min_score: 0.5 });
    assert_eq!(SearchOptions::from_value(&json!(null)).unwrap(), SearchOptions::default());
    assert_eq!(SearchOptions::default().limit, 10);
    for (bad, name) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 2.5}), "limit"),
        (json!({"limit": "3"}), "limit"),
        (json!({"minScore": -1}), "minScore"),
        (json!({"top": 3}), "top"),
        (json!([3]), "`options` must be an object { limit?, minScore? }"),
    ] {
        let e = SearchOptions::from_value(&bad).unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(e.message().contains(name), "{}", e.message());
    }
}

#[test]
fn the_engine_searches_its_current_memory() {
    futures::executor::block_on(async {
        let rig = common::RigBuilder::new().open().await.unwrap();
        assert!(rig.engine.search("rabbit", &SearchOptions::default()).await.is_empty());
        let f = rig.engine.add_fact(&json!({"content": "Has a rabbit called Tangyuan"})).await.unwrap();
        rig.engine.add_fact(&json!({"content": "Works on Kafka consumers"})).await.unwrap();
        let hits = rig.engine.search("what does my rabbit eat", &SearchOptions::default()).await;
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].1.id, f.id);
        rig.engine.remove_fact(&f.id, false).await.unwrap();
        assert!(rig.engine.search("what does my rabbit eat", &SearchOptions::default()).await.is_empty());
    });
}

#[test]
fn a_question_about_languages_finds_the_language_a_fact_names_but_not_the_other_way() {
    let doc = Document {
        facts: vec![
            fact("f_ts", "Prefers TypeScript", 0.9),
            fact("f_py", "Knows Python from university", 0.9),
            fact("f_tea", "Drinks green tea in the morning", 0.9),
        ],
        ..Document::empty()
    };
    let ids = |q: &str| run(&doc, q, SearchOptions::default()).into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    let mut languages = ids("which language?");
    languages.sort();
    assert_eq!(languages, ["f_py", "f_ts"], "the README's `search \"which language?\"`");
    assert_eq!(ids("typescript"), ["f_ts"], "a query's TypeScript is not any language");
    let mut known = ids("which programming languages does the user know?");
    known.sort();
    assert_eq!(known, ["f_py", "f_ts"], "the tea fact shares nothing with it");
}
