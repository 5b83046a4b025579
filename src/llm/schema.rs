//! The JSON schema of the lean delta: what `jsonMode: "schema"` sends (OpenAI's strict
//! `response_format`, Anthropic's forced tool call) and what JS users get as
//! `DELTA_SCHEMA` for their own SDK (`generateObject`, `response_format`).
//!
//! It is written for OpenAI's strict mode, the strictest dialect the endpoints share
//! (llama.cpp's server, vLLM, LM Studio and Ollama read it too): every property is listed in
//! `required` and `additionalProperties` is `false`, so what is optional for the parser is
//! nullable here. "No update" stays cheap: a model writes `null` for an unchanged section
//! group or section, an empty list, or a label it does not give (the accepted default:
//! about the user, durable, descriptive). Everything the schema allows, the parser accepts
//! (`null` reads as absent). The tests check it against the crate's sections and
//! categories.

/// The tool name (Anthropic) and schema name (OpenAI) the delta goes by.
pub const DELTA_SCHEMA_NAME: &str = "memory_delta";

/// The delta's JSON schema, as compact JSON text (2.3 KB).
pub const DELTA_SCHEMA: &str = concat!(
    r##"{"type":"object","properties":{"##,
    r##""newFacts":{"anyOf":[{"type":"array","items":{"type":"object","properties":{"content":{"type":"string"},"category":{"type":"string","enum":["preference","knowledge","context","behavior","goal","correction"]},"confidence":{"type":"number"},"scope":{"$ref":"#/$defs/scope"},"durability":{"$ref":"#/$defs/durability"},"authority":{"$ref":"#/$defs/authority"},"expected_valid_days":{"type":["integer","null"]},"sourceError":{"type":["string","null"]}},"required":["content","category","confidence","scope","durability","authority","expected_valid_days","sourceError"],"additionalProperties":false}},{"type":"null"}]},"##,
    r##""factsToRemove":{"anyOf":[{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":["string","null"]},"scope":{"$ref":"#/$defs/scope"},"replacementFactIndex":{"type":["integer","null"]}},"required":["id","reason","scope","replacementFactIndex"],"additionalProperties":false}]}},{"type":"null"}]},"##,
    r##""factsToReinforce":{"anyOf":[{"type":"array","items":{"type":"string"}},{"type":"null"}]},"##,
    r##""user":{"anyOf":[{"type":"object","properties":{"workContext":{"$ref":"#/$defs/section"},"personalContext":{"$ref":"#/$defs/section"},"topOfMind":{"$ref":"#/$defs/section"}},"required":["workContext","personalContext","topOfMind"],"additionalProperties":false},{"type":"null"}]},"##,
    r##""history":{"anyOf":[{"type":"object","properties":{"recentMonths":{"$ref":"#/$defs/section"},"earlierContext":{"$ref":"#/$defs/section"},"longTermBackground":{"$ref":"#/$defs/section"}},"required":["recentMonths","earlierContext","longTermBackground"],"additionalProperties":false},{"type":"null"}]}},"##,
    r##""required":["newFacts","factsToRemove","factsToReinforce","user","history"],"additionalProperties":false,"##,
    r##""$defs":{"section":{"anyOf":[{"type":"object","properties":{"summary":{"type":"string"},"shouldUpdate":{"type":"boolean"},"scope":{"$ref":"#/$defs/scope"},"durability":{"$ref":"#/$defs/durability"},"authority":{"$ref":"#/$defs/authority"}},"required":["summary","shouldUpdate","scope","durability","authority"],"additionalProperties":false},{"type":"null"}]},"##,
    r##""scope":{"type":["string","null"],"enum":["user","thread","project",null]},"##,
    r##""durability":{"type":["string","null"],"enum":["durable","temporary",null]},"##,
    r##""authority":{"type":["string","null"],"enum":["descriptive","transactional",null]}}}"##
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
    fn the_schema_is_strict_mode_json_with_every_delta_field() {
        let s = schema();
        assert_strict(&s, "$");
        let props = s.get("properties").and_then(Value::as_object).unwrap();
        let keys: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(keys, ["newFacts", "factsToRemove", "factsToReinforce", "user", "history"]);
        let text = DELTA_SCHEMA;
        for field in [
            "content",
            "category",
            "confidence",
            "scope",
            "durability",
            "authority",
            "expected_valid_days",
            "sourceError",
            "replacementFactIndex",
            "reason",
            "summary",
            "shouldUpdate",
        ] {
            assert!(text.contains(&format!("\"{field}\"")), "{field}");
        }
        for id in SectionId::ALL {
            let group = &props.get(id.group()).and_then(|g| g.get("anyOf")).and_then(Value::as_array).unwrap()[0];
            assert!(group.get("properties").and_then(|p| p.get(id.key())).is_some(), "{}.{}", id.group(), id.key());
        }
        let fact = props.get("newFacts").and_then(|f| f.get("anyOf")).and_then(Value::as_array).unwrap()[0].get("items").unwrap();
        let categories: Vec<&str> = fact
            .get("properties")
            .and_then(|p| p.get("category"))
            .and_then(|c| c.get("enum"))
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(categories, KNOWN_CATEGORIES);
        // "No update" is a null: each top-level field and each section (one definition).
        assert_eq!(text.matches(r#"{"type":"null"}"#).count(), 5 + 1);
        // Every reference resolves.
        for r in text.split(r##""$ref":"#/$defs/"##).skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(s.get("$defs").and_then(|d| d.get(name)).is_some(), "{name}");
        }
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
             // every property required, optional ones nullable). Generated from src/llm/schema.rs;\n\
             // `UPDATE_DELTA_SCHEMA=1 cargo test --lib schema` rewrites it.\n\
             export const DELTA_SCHEMA = {schema};\n"
        );
        if std::env::var_os("UPDATE_DELTA_SCHEMA").is_some() {
            std::fs::write(path, &file).unwrap();
        }
        let found = std::fs::read_to_string(path).unwrap_or_default();
        assert!(found == file, "js/delta-schema.js is stale: run UPDATE_DELTA_SCHEMA=1 cargo test --lib schema");
    }
}
