//! A JSON Schema validator for the subset tool schemas use: `type` (one or a list),
//! `properties`, `required`, `additionalProperties: false`, `enum`, `items`,
//! `minimum`/`maximum`, `minLength`/`maxLength` and `minItems`/`maxItems`.
//! Hand-written because full validators pull in a large dependency tree.

use serde_json::Value;

/// Validates `value` against `schema`; returns every violation as `path: problem`.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(schema, value, "", &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn matches_type(expected: &str, v: &Value) -> bool {
    let actual = type_name(v);
    expected == actual
        || (expected == "number" && actual == "integer")
        // 3.0 is an integer in JSON Schema.
        || (expected == "integer" && v.as_f64().is_some_and(|f| f.fract() == 0.0))
}

fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "arguments" } else { path };
    match &schema["type"] {
        Value::String(t) if !matches_type(t, value) => {
            errors.push(format!("{at}: expected {t}, got {}", type_name(value)));
            return;
        }
        Value::Array(ts)
            if !ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| matches_type(t, value)) =>
        {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            errors.push(format!(
                "{at}: expected {}, got {}",
                names.join(" or "),
                type_name(value)
            ));
            return;
        }
        _ => {}
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        errors.push(format!("{at}: must be one of {}", list.join(", ")));
    }
    match value {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            for req in schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !map.contains_key(req) {
                    errors.push(format!("{at}: missing required property '{req}'"));
                }
            }
            for (key, v) in map {
                match props.and_then(|p| p.get(key)) {
                    Some(sub) => check(sub, v, &format!("{path}/{key}"), errors),
                    None if schema["additionalProperties"] == Value::Bool(false) => {
                        let known: Vec<&str> = props
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        errors.push(format!(
                            "{at}: unknown property '{key}', expected one of {}",
                            known.join(", ")
                        ));
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            bound(schema, "minItems", items.len() as f64, at, "items", errors, true);
            bound(schema, "maxItems", items.len() as f64, at, "items", errors, false);
            if schema.get("items").is_some() {
                for (i, item) in items.iter().enumerate() {
                    check(&schema["items"], item, &format!("{path}/{i}"), errors);
                }
            }
        }
        Value::String(s) => {
            let n = s.chars().count() as f64;
            bound(schema, "minLength", n, at, "characters", errors, true);
            bound(schema, "maxLength", n, at, "characters", errors, false);
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            bound(schema, "minimum", f, at, "", errors, true);
            bound(schema, "maximum", f, at, "", errors, false);
        }
        _ => {}
    }
}

fn bound(
    schema: &Value,
    key: &str,
    actual: f64,
    at: &str,
    unit: &str,
    errors: &mut Vec<String>,
    is_min: bool,
) {
    let Some(limit) = schema[key].as_f64() else { return };
    let bad = if is_min { actual < limit } else { actual > limit };
    if bad {
        let word = if is_min { "at least" } else { "at most" };
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        errors.push(format!("{at}: must be {word} {limit}{unit}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "minLength": 1},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "tz": {"type": ["string", "null"]}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_valid_arguments() {
        assert_eq!(
            validate(
                &schema(),
                &json!({"url": "x", "max_bytes": 5, "mode": "a", "tags": ["t"], "tz": null})
            ),
            Ok(())
        );
        assert_eq!(
            validate(&schema(), &json!({"url": "x", "max_bytes": 5.0})),
            Ok(())
        );
    }

    #[test]
    fn reports_every_violation_with_its_path() {
        let errs = validate(
            &schema(),
            &json!({"max_bytes": 500, "mode": "c", "tags": ["a", 1, "c"], "extra": true, "tz": 3}),
        )
        .unwrap_err();
        let text = errs.join("\n");
        assert!(
            text.contains("arguments: missing required property 'url'"),
            "{text}"
        );
        assert!(text.contains("/max_bytes: must be at most 100"), "{text}");
        assert!(text.contains("/mode: must be one of \"a\", \"b\""), "{text}");
        assert!(text.contains("/tags: must be at most 2 items"), "{text}");
        assert!(text.contains("/tags/1: expected string, got integer"), "{text}");
        assert!(text.contains("unknown property 'extra'"), "{text}");
        assert!(
            text.contains("/tz: expected string or null, got integer"),
            "{text}"
        );
    }

    #[test]
    fn rejects_non_objects() {
        let errs = validate(&schema(), &json!([1])).unwrap_err();
        assert_eq!(errs, vec!["arguments: expected object, got array".to_string()]);
    }
}
