//! The JSON schema of the delta: what `jsonMode: "schema"` sends (OpenAI's strict
//! `response_format`, Anthropic's forced tool call) and what JS users get as
//! `DELTA_SCHEMA` for their own SDK (`generateObject`, `response_format`).
//!
//! It is written for OpenAI's strict mode, the strictest dialect the endpoints share
//! (llama.cpp's server, vLLM, LM Studio and Ollama read it too): every property is listed in
//! `required` and `additionalProperties` is `false`.
//!
//! It is shaped for small models under grammar-constrained decoding, which take the
//! shortest path the grammar allows: no top-level key is nullable (an all-`null` reply
//! that "changes nothing" about everything was what 0.5B models answered every time). The
//! first key is `userSaid`, a list of plain strings, what the user said about themself in
//! their words: the cheapest thing to fill, and what a 0.5B model does fill (it copies the
//! sentence; `extract::said` cuts off the question) where it answered `"newFacts": []` to
//! every conversation. Then `newFacts`, a list of facts (content, category, confidence, a
//! correction's `sourceError` or `null`, and the event's date `happenedAt` or `null`), and
//! sections come last, as a list of only those that changed
//! (`[{"section": "workContext", "summary": "…"}]`). Labels and `expected_valid_days` are left out: a small model filling them
//! at random gates or expires true facts (the parser still reads them in replies that are
//! not schema-constrained). Everything the schema allows, the parser accepts
//! (docs/local-models.md has the measurements). The tests check it against the crate's
//! sections and categories.

/// The tool name (Anthropic) and schema name (OpenAI) the delta goes by.
pub const DELTA_SCHEMA_NAME: &str = "memory_delta";

/// The delta's JSON schema, as compact JSON text.
pub const DELTA_SCHEMA: &str = concat!(
    r##"{"type":"object","properties":{"##,
    r##""userSaid":{"type":"array","items":{"type":"string"}},"##,
    r##""newFacts":{"type":"array","items":{"type":"object","properties":{"content":{"type":"string"},"category":{"type":"string","enum":["preference","knowledge","context","behavior","goal","correction"]},"confidence":{"type":"number"},"sourceError":{"type":["string","null"]},"happenedAt":{"type":["string","null"]}},"required":["content","category","confidence","sourceError","happenedAt"],"additionalProperties":false}},"##,
    r##""factsToRemove":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"replacementFactIndex":{"type":["integer","null"]}},"required":["id","replacementFactIndex"],"additionalProperties":false}},"##,
    r##""factsToReinforce":{"type":"array","items":{"type":"string"}},"##,
    r##""sections":{"type":"array","items":{"type":"object","properties":{"section":{"type":"string","enum":["workContext","personalContext","topOfMind","recentMonths","earlierContext","longTermBackground"]},"summary":{"type":"string"}},"required":["section","summary"],"additionalProperties":false}}},"##,
    r##""required":["userSaid","newFacts","factsToRemove","factsToReinforce","sections"],"additionalProperties":false}"##
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::parse::KNOWN_CATEGORIES;
    use crate::json::Value;
    use crate::memory::document::SectionId;

    fn schema() -> Value {
        Value::parse(DELTA_SCHEMA).expect("the schema is JSON")
    }

    /// Every object schema in `v` lists all its properties in `required` and forbids others:
    /// what OpenAI's strict mode demands.
    fn assert_strict(v: &Value, path: &str) {
        match v {
            Value::Object(o) => {
                if o.get("type").and_then(Value::as_str) == Some("object") {
                    let props = o.get("properties").and_then(Value::as_object).unwrap_or_else(|| panic!("{path}: properties"));
                    let required: Vec<&str> =
                        o.get("required").and_then(Value::as_array).unwrap().iter().map(|r| r.as_str().unwrap()).collect();
                    let names: Vec<&str> = props.keys().map(String::as_str).collect();
                    assert_eq!(required, names, "{path}: every property is required");
                    assert_eq!(o.get("additionalProperties"), Some(&Value::Bool(false)), "{path}");
                }
                for (k, x) in o {
                    assert_strict(x, &format!("{path}.{k}"));
                }
            }
            Value::Array(a) => a.iter().for_each(|x| assert_strict(x, path)),
            _ => {}
        }
    }

    #[test]
    fn the_schema_is_strict_mode_json_with_the_users_words_first_and_nothing_nullable_at_the_top() {
        let s = schema();
        assert_strict(&s, "$");
        let props = s.get("properties").and_then(Value::as_object).unwrap();
        let keys: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(keys, ["userSaid", "newFacts", "factsToRemove", "factsToReinforce", "sections"], "the user's words first");
        for (k, v) in props.iter() {
            assert_eq!(v.get("type").and_then(Value::as_str), Some("array"), "{k}: a list, never null");
        }
        let item = |k: &str| props.get(k).and_then(|f| f.get("items")).unwrap().clone();
        let enum_of = |v: &Value, field: &str| -> Vec<String> {
            v.get("properties")
                .and_then(|p| p.get(field))
                .and_then(|c| c.get("enum"))
                .and_then(Value::as_array)
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect()
        };
        let fact = item("newFacts");
        let fields: Vec<&str> = fact.get("properties").and_then(Value::as_object).unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["content", "category", "confidence", "sourceError", "happenedAt"], "cheap to fill, content first");
        assert_eq!(enum_of(&fact, "category"), KNOWN_CATEGORIES);
        let sections: Vec<String> = SectionId::ALL.iter().map(|id| id.key().to_string()).collect();
        assert_eq!(enum_of(&item("sections"), "section"), sections);
        let removal = item("factsToRemove");
        let removal: Vec<&str> = removal.get("properties").and_then(Value::as_object).unwrap().keys().map(String::as_str).collect();
        assert_eq!(removal, ["id", "replacementFactIndex"]);
    }

    /// `js/delta-schema.js` is this schema for JS users (`DELTA_SCHEMA` of every entry),
    /// checked in so it needs no wasm to load. `UPDATE_DELTA_SCHEMA=1 cargo test --lib
    /// schema` rewrites it; otherwise a stale copy fails here.
    #[test]
    fn the_js_constant_is_this_schema() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/js/delta-schema.js");
        let schema = DELTA_SCHEMA;
        let file = format!(
            "// The JSON schema of the memory delta the extraction LLM answers with (OpenAI strict mode:\n\
             // every property required; newFacts first, sections as a list). Generated from src/llm/schema.rs;\n\
             // `UPDATE_DELTA_SCHEMA=1 cargo test --lib schema` rewrites it.\n\
             /** @type {{typeof import(\"./index.js\").DELTA_SCHEMA}} */\n\
             export const DELTA_SCHEMA = {schema};\n"
        );
        if std::env::var_os("UPDATE_DELTA_SCHEMA").is_some() {
            std::fs::write(path, &file).unwrap();
        }
        let found = std::fs::read_to_string(path).unwrap_or_default();
        assert!(found == file, "js/delta-schema.js is stale: run UPDATE_DELTA_SCHEMA=1 cargo test --lib schema");
    }
}
