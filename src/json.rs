//! JSON the way serde_json reads and writes it, for the hot paths.
//!
//! - [`from_str`]: task inputs as values that hold no spare room. `serde_json`'s own `Value`
//!   builds each object by inserting into an empty map, so a one-key input reserves room
//!   for three entries and its hash table: a file of 20,000 tasks carried about 6 MB of
//!   empty entries. Here an object's entries are gathered first and the map is made at its
//!   final size. The parser is serde_json's, so the accepted text, the values and the error
//!   messages are the same as `serde_json::from_str::<Value>`.
//! - [`write_str`]: a string as serde_json writes it, without its byte-by-byte escaping
//!   when there is nothing to escape (audit lines, task ids).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parse `text` as one JSON value (whitespace around it allowed), like
/// `serde_json::from_str::<Value>`.
pub fn from_str(text: &str) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Exact.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Deserializes any JSON value, maps and arrays at their exact size.
#[derive(Clone, Copy)]
struct Exact;

impl<'de> DeserializeSeed<'de> for Exact {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Exact {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        // Most inputs have one key: no list to gather it in.
        let Some(first) = access.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        let first = (first, access.next_value_seed(self)?);
        let Some(second) = access.next_key::<String>()? else {
            let mut map = Map::with_capacity(1);
            map.insert(first.0, first.1);
            return Ok(Value::Object(map));
        };
        let mut entries = vec![first, (second, access.next_value_seed(self)?)];
        while let Some(key) = access.next_key::<String>()? {
            let value = access.next_value_seed(self)?;
            entries.push((key, value));
        }
        let mut map = Map::with_capacity(entries.len());
        // A repeated key keeps its first place and its last value, as in serde_json.
        for (key, value) in entries {
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// `s` as a JSON string, byte for byte what serde_json writes. Most strings written by
/// heartbeat (ids, paths, times, tool output, task inputs) need no escape: they are copied whole, after one pass that
/// the compiler vectorises, instead of serde_json's byte-by-byte table walk.
pub fn write_str(buf: &mut Vec<u8>, s: &str) {
    let needs_escape = s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *buf, s);
    } else {
        buf.reserve(s.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_values_as_serde_json() {
        for text in [
            r#"{}"#,
            r#" {"text": "task 0"} "#,
            r#"{"b": 1, "a": [1, 2.5, -3, 18446744073709551615, null, true, "s"], "c": {}}"#,
            r#"{"nested": {"z": {"y": [[], {}, [{"x": "\u00e9\n"}]]}}}"#,
            r#"{"dup": 1, "other": 2, "dup": 3}"#,
            r#"[1, {"k": "v"}]"#,
            r#""just a string""#,
            r#"1e400"#,
            "null",
        ] {
            let ours = from_str(text).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{text}");
            // Key order too (serde_json keeps insertion order here).
            assert_eq!(
                ours.map(|v| v.to_string()),
                theirs.map(|v| v.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn same_errors_as_serde_json() {
        let deep = "[".repeat(200);
        for text in [
            "",
            "{",
            r#"{"a": 1"#,
            r#"{"a": 1} please"#,
            r#"{"a":,}"#,
            r#"{1: 2}"#,
            "call me",
            r#"{"a": [1, 2 oops]}"#,
            r#"{"a": "unterminated}"#,
            r#"{"a": 01}"#,
            deep.as_str(),
        ] {
            let ours = from_str(text).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
            assert!(ours.is_err(), "{text}");
            assert_eq!(ours, theirs, "{text}");
        }
    }

    fn json_str(s: &str) -> String {
        let mut buf = Vec::new();
        write_str(&mut buf, s);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "plain",
            "a \"quote\"",
            "back\\slash",
            "tab\tnew\nline\r",
            "\u{0}\u{1f}\u{7f}",
            "é € 🎉 \u{2028}",
            "/home/user/HEARTBEAT.md",
        ] {
            assert_eq!(json_str(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(s in "\\PC*|[\\x00-\\x7f]*") {
            proptest::prop_assert_eq!(json_str(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
