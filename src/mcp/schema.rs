//! Checking a task's input against an MCP tool's `inputSchema`, and suggesting a tool name.
//!
//! Invariants:
//!
//! - Validation never touches the network or the file system: the validator is built without
//!   its remote resolvers, so a schema whose `$ref` points outside itself is reported as an
//!   unusable schema, not fetched.
//! - At most one violation is reported, the first the validator finds, as
//!   `<JSON pointer>: <message>`; the pointer is `/` for the input itself.
//! - A value under a key that looks secret (the key words of docs/reference.md#redaction) is never
//!   quoted in a message. Messages still go through the redaction step before any sink.

use serde_json::Value;

/// Checks `input` against `schema` (a tool's `inputSchema`). `Err` holds the first violation
/// with its JSON path, e.g. `/owner: 5 is not of type "string"`, or why the schema itself
/// cannot be used.
pub(crate) fn validate_input(schema: &Value, input: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the tool's inputSchema cannot be used: {}", e.masked()))?;
    let Err(error) = validator.validate(input) else {
        return Ok(());
    };
    let path = error.instance_path().to_string();
    // A key whose values redaction hides: the value is not shown in the message.
    let secret = path.split('/').any(crate::redact::is_secret_key);
    let message = if secret {
        error.masked_with("***").to_string()
    } else {
        error.to_string()
    };
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    Err(format!("{path}: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string"},
                "repo": {"type": "string"},
                "labels": {"type": "array", "items": {"type": "string"}},
                "api_token": {"type": "string", "minLength": 10}
            },
            "required": ["owner", "repo"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_input_passes() {
        assert_eq!(
            validate_input(&schema(), &json!({"owner": "me", "repo": "x"})),
            Ok(())
        );
    }

    #[test]
    fn violation_names_its_json_path() {
        let e = validate_input(&schema(), &json!({"owner": 5, "repo": "x"})).unwrap_err();
        assert_eq!(e, r#"/owner: 5 is not of type "string""#);
        let e = validate_input(
            &schema(),
            &json!({"owner": "me", "repo": "x", "labels": ["a", 2]}),
        )
        .unwrap_err();
        assert!(e.starts_with("/labels/1: 2 is not of type"), "{e}");
    }

    #[test]
    fn missing_and_unknown_keys_are_reported_at_the_root() {
        let e = validate_input(&schema(), &json!({"owner": "me"})).unwrap_err();
        assert!(e.starts_with("/: ") && e.contains("\"repo\""), "{e}");
        let e =
            validate_input(&schema(), &json!({"owner": "me", "repo": "x", "ownr": 1})).unwrap_err();
        assert!(e.starts_with("/: ") && e.contains("ownr"), "{e}");
    }

    #[test]
    fn secret_values_are_not_quoted() {
        let e = validate_input(
            &schema(),
            &json!({"owner": "me", "repo": "x", "api_token": "hunter2"}),
        )
        .unwrap_err();
        assert!(e.starts_with("/api_token: "), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let schema = json!({"$ref": "https://example.invalid/schema.json"});
        let e = validate_input(&schema, &json!({})).unwrap_err();
        assert!(e.contains("inputSchema cannot be used"), "{e}");
    }
}
