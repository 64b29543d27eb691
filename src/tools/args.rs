//! Tool arguments as typed structs. A tool's JSON schema is generated from its argument
//! struct (schemars) and its arguments are parsed into the same struct (serde), so the
//! schema the model sees and the parser cannot drift apart. The registry validates raw
//! arguments against the schema first, so the model gets every violation by path.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolError;

/// The JSON schema of `T` as tool parameters: subschemas inlined (providers and the
/// validator take no `$ref`), no `$schema` or `title`.
pub fn schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Some(map) = schema.as_object_mut() {
        map.remove("title");
        map.remove("$schema");
    }
    schema
}

/// Parses a call's arguments into `T`.
pub fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::Model(format!("invalid arguments: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Find things.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Example {
        /// What to look for.
        #[schemars(length(min = 1))]
        query: String,
        #[schemars(range(min = 1, max = 50))]
        limit: Option<u32>,
    }

    #[test]
    fn schema_and_parser_come_from_one_struct() {
        let schema = schema_of::<Example>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(schema["properties"]["query"]["minLength"], 1);
        assert_eq!(schema["properties"]["query"]["description"], "What to look for.");
        assert_eq!(schema["properties"]["limit"]["maximum"], 50);
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
        // The registry's validator accepts what the parser accepts.
        let good = json!({"query": "x", "limit": 3});
        assert!(crate::tools::schema::validate(&schema, &good).is_ok());
        let parsed: Example = parse(good).unwrap();
        assert_eq!((parsed.query.as_str(), parsed.limit), ("x", Some(3)));
        let bad = json!({"query": "", "limit": 99, "extra": 1});
        assert_eq!(
            crate::tools::schema::validate(&schema, &bad).unwrap_err().len(),
            3
        );
    }
}
