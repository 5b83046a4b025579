//! `Serialize`/`Deserialize` for [`Value`], [`Map`] and [`Document`] (in its DeerFlow
//! `memory.json` form, validated on the way in), with the `serde` feature: for Rust users
//! of the rlib, never in the wasm build.

use super::{Map, Number, ToJson, Value};
use crate::memory::document::Document;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};
use std::fmt;

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_str().strip_prefix('-').and_then(|t| t.parse::<i64>().ok())) {
                (Some(u), _) => s.serialize_u64(u),
                (None, Some(i)) => s.serialize_i64(-i),
                _ => s.serialize_f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(t) => s.serialize_str(t),
            Value::Array(a) => s.collect_seq(a),
            Value::Object(m) => m.serialize(s),
        }
    }
}

impl Serialize for Map {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(Number::checked(&n.to_string())))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        // `Display` of a finite f64 is the shortest text that reads back the same.
        Ok(if x.is_finite() { Value::Number(Number::from_text(&x.to_string()).unwrap_or_else(|| Number::from(0))) } else { Value::Null })
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some((k, v)) = access.next_entry::<String, Value>()? {
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Map {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        match Value::deserialize(d)? {
            Value::Object(m) => Ok(m),
            other => Err(de::Error::custom(format!("expected a JSON object, found {}", other.type_name()))),
        }
    }
}

impl Serialize for Document {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

/// Validates like [`Document::from_value`]; facts without an id get a random one.
impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Document, D::Error> {
        let v = Value::deserialize(d)?;
        Document::from_value(&v, &crate::base::ids::RandomIds).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cross_serde_both_ways() {
        let v = Value::parse(r#"{"a":[1,-2,0.5,null,true,"x"],"b":{"c":18446744073709551615}}"#).unwrap();
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, v.to_json());
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        let m: Map = serde_json::from_str(r#"{"k": 1}"#).unwrap();
        assert_eq!(m.get("k").and_then(Value::as_u64), Some(1));
        assert!(serde_json::from_str::<Map>("[1]").is_err());
        let delta = crate::extract::delta::Delta::default();
        let again: crate::extract::delta::Delta = serde_json::from_str(&serde_json::to_string(&delta).unwrap()).unwrap();
        assert_eq!(again, delta);
        let doc: Document = serde_json::from_str(r#"{"user": {}, "history": {}, "facts": [{"content": "a", "x": 1}]}"#).unwrap();
        assert_eq!(serde_json::to_string(&doc).unwrap(), doc.to_json());
        let e = serde_json::from_str::<Document>(r#"{"user": 1, "history": {}, "facts": []}"#).unwrap_err();
        assert!(e.to_string().contains("`user` must be an object"), "{e}");
    }
}
