//! Trigger filters: a `when:` Rhai expression over the normalized event, compiled once
//! at load and evaluated at routing under tight limits. An expression, not a script:
//! no statements, no loops, no functions of its own, every variable one of
//! [`VARIABLES`]; its value must be a boolean.

use rhai::{AST, Dynamic, Engine, Scope};

use super::SandboxLimits;

/// The names a filter may read, in the order [`FilterEngine::scope`] takes them.
pub const VARIABLES: [&str; 9] = [
    "text", "user", "channel", "reaction", "labels", "fields", "payload", "source", "kind",
];

/// Operations one evaluation may take: enough for a few comparisons over a payload,
/// little enough that a pathological expression costs well under a millisecond.
pub const MAX_OPERATIONS: u64 = 10_000;

/// What a filter reads: [`VARIABLES`]' values for one event.
#[derive(Debug, Clone, Default)]
pub struct FilterInput {
    pub text: String,
    pub user: String,
    pub channel: String,
    pub reaction: String,
    pub labels: Vec<String>,
    pub fields: serde_json::Value,
    pub payload: serde_json::Value,
    pub source: String,
    pub kind: String,
}

/// A compile error: 1-based line and column within the expression, and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FilterError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// One compiled `when:` expression.
#[derive(Debug, Clone)]
pub struct Filter {
    /// As written, for listings.
    pub source: String,
    ast: AST,
}

/// The engine every filter of a config compiles and runs on (one per config: building
/// an engine costs more than evaluating an expression).
#[derive(Debug)]
pub struct FilterEngine {
    engine: Engine,
}

impl Default for FilterEngine {
    fn default() -> Self {
        let limits = SandboxLimits {
            max_operations: MAX_OPERATIONS,
            max_call_depth: 8,
            max_expr_depth: 32,
            max_string_bytes: 64 * 1024,
            max_array_len: 1_000,
            max_map_len: 1_000,
        };
        let mut engine = super::bare(&limits);
        // Unknown names are compile errors, found by `validate`, not `false` at run time.
        engine.set_strict_variables(true);
        // No closures and no loops: Rhai does not count the operations of a closure a
        // native function calls (see `super::engine`), and an expression without them
        // takes operations bounded by its length.
        engine.set_allow_anonymous_fn(false).set_allow_looping(false);
        FilterEngine { engine }
    }
}

impl FilterEngine {
    /// Compiles `expression`, checking its syntax and that it reads only [`VARIABLES`].
    pub fn compile(&self, expression: &str) -> Result<Filter, FilterError> {
        // Placeholders, not constants: constants would be folded into the expression.
        let mut scope = Scope::new();
        for name in VARIABLES {
            scope.push_dynamic(name, Dynamic::UNIT);
        }
        let ast = self
            .engine
            .compile_expression_with_scope(&scope, expression)
            .map_err(|e| {
                let pos = e.position();
                let message = match e.err_type() {
                    rhai::ParseErrorType::VariableUndefined(name) => format!(
                        "unknown field '{name}' in when:, expected one of {}",
                        VARIABLES.join(", ")
                    ),
                    other => format!("when: {other}"),
                };
                FilterError {
                    line: pos.line().unwrap_or(1),
                    column: pos.position().unwrap_or(1),
                    message,
                }
            })?;
        Ok(Filter {
            source: expression.to_string(),
            ast,
        })
    }

    /// The scope one event's filters read. Built once per event and shared by every
    /// filter asked about it; its values are constants, so no filter changes them.
    pub fn scope(&self, input: FilterInput) -> Scope<'static> {
        let json = |v: serde_json::Value| rhai::serde::to_dynamic(v).unwrap_or(Dynamic::UNIT);
        let mut scope = Scope::new();
        scope.push_constant("text", input.text);
        scope.push_constant("user", input.user);
        scope.push_constant("channel", input.channel);
        scope.push_constant("reaction", input.reaction);
        let labels: rhai::Array = input.labels.into_iter().map(Dynamic::from).collect();
        scope.push_constant("labels", labels);
        scope.push_constant_dynamic("fields", json(input.fields));
        scope.push_constant_dynamic("payload", json(input.payload));
        scope.push_constant("source", input.source);
        scope.push_constant("kind", input.kind);
        scope
    }

    /// Whether `filter` holds for the event in `scope`: `Err` with the reason when it
    /// fails (over its operations, a type error, a value that is not a boolean), which
    /// routing counts as false.
    pub fn holds(&self, filter: &Filter, scope: &mut Scope<'static>) -> Result<bool, String> {
        let value = self
            .engine
            .eval_ast_with_scope::<Dynamic>(scope, &filter.ast)
            .map_err(|e| match *e {
                rhai::EvalAltResult::ErrorTooManyOperations(_) => {
                    format!("over its limit of {MAX_OPERATIONS} operations")
                }
                other => other.to_string(),
            })?;
        value
            .as_bool()
            .map_err(|t| format!("its value is a {t}, not true or false"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input() -> FilterInput {
        FilterInput {
            text: "see https://example.com".into(),
            labels: vec!["infra".into()],
            fields: json!({"priority": {"name": "High"}}),
            source: "jira".into(),
            kind: "jira:issue_created".into(),
            ..FilterInput::default()
        }
    }

    #[test]
    fn filters_read_the_event() {
        let e = FilterEngine::default();
        let mut scope = e.scope(input());
        for (expr, want) in [
            (
                r#"labels.contains("infra") && fields.priority.name == "High""#,
                true,
            ),
            (r#"text.contains("https://")"#, true),
            (r#"source == "slack""#, false),
            (r#"fields.priority.name == "Low" || labels.len() > 1"#, false),
        ] {
            let f = e.compile(expr).unwrap();
            assert_eq!(e.holds(&f, &mut scope), Ok(want), "{expr}");
        }
    }

    #[test]
    fn unknown_names_and_syntax_errors_are_found_at_compile_time() {
        let e = FilterEngine::default();
        let err = e.compile("text == \"a\" && lables.len() > 0").unwrap_err();
        assert_eq!((err.line, err.column), (1, 16));
        assert!(err.message.contains("unknown field 'lables'"), "{}", err.message);
        let err = e.compile("text ==").unwrap_err();
        assert!(err.message.starts_with("when: "), "{}", err.message);
        // A statement is not an expression.
        assert!(e.compile("let x = 1; x == 1").is_err());
    }

    #[test]
    fn failures_are_errors_not_matches() {
        let e = FilterEngine::default();
        let mut scope = e.scope(input());
        let not_bool = e.compile("text").unwrap();
        assert!(
            e.holds(&not_bool, &mut scope)
                .unwrap_err()
                .contains("not true or false")
        );
        let type_error = e.compile(r#"labels[5] == "x""#).unwrap();
        assert!(e.holds(&type_error, &mut scope).is_err());
        // Closures are refused: they would be loops whose operations Rhai does not count.
        let err = e
            .compile("payload.map(|a| labels.filter(|b| b == a).len()).len() > 0")
            .unwrap_err();
        assert!(err.message.starts_with("when: "), "{}", err.message);
        // What it builds is bounded by the sandbox's sizes.
        let big = e.compile(r#""ab".pad(100000, "c").index_of("d") > 0"#).unwrap();
        let err = e.holds(&big, &mut scope).unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }
}
