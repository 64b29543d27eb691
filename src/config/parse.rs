//! Reading one YAML config file into its spec type, reporting every unknown key and
//! type error in the file (not just the first), each with its line and column, the
//! nearest valid name for a misspelt key, and no Rust type names.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use serde_yaml::Value;

use super::diagnostic::{Diagnostic, find_key};

/// At most this many problems are reported for one file.
const MAX_PROBLEMS: usize = 32;

/// Parses `text` (the file `file`) as `T`, or returns every problem found in it.
pub fn parse_all<T: DeserializeOwned>(file: &Path, text: &str) -> Result<T, Vec<Diagnostic>> {
    let mut value: Value = super::yaml::value(text).map_err(|e| vec![syntax_error(file, &e)])?;
    if value.is_null() {
        // An empty file is an empty mapping (which then names its missing keys).
        value = Value::Mapping(Default::default());
    }
    let mut diags = Vec::new();
    while diags.len() < MAX_PROBLEMS {
        let err = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(spec) if diags.is_empty() => return Ok(spec),
            Ok(_) => break,
            Err(e) => e,
        };
        let segments: Vec<Segment> = err.path().iter().cloned().collect();
        let message = err.inner().to_string();
        let keys: Vec<&str> = segments
            .iter()
            .filter_map(|s| match s {
                Segment::Map { key } => Some(key.as_str()),
                Segment::Enum { variant } => Some(variant.as_str()),
                _ => None,
            })
            .collect();
        let (mut line, mut column) = locate_path(text, &keys);
        // A bad value is pointed at, not its key.
        if !message.starts_with("unknown")
            && !message.starts_with("missing")
            && let Some(v) = quoted_value(&message)
            && let Some(off) = text
                .lines()
                .nth(line - 1)
                .and_then(|l| l.get(column - 1..))
                .and_then(|rest| rest.find(v))
        {
            column += off;
        } else if let Some(v) = quoted_value(&message).filter(|_| message.starts_with("unknown variant")) {
            // An unknown kind is a key of its own, after its list's key.
            let (l, c) = locate_path(text, &[keys.first().copied().unwrap_or(""), v]);
            (line, column) = (l, c);
        }
        // An unknown or missing key is named in its message: where is its parent. A bad
        // value is the last key's own: where is the whole path (`limits.max_turns`).
        let where_ = if message.starts_with("invalid") && !keys.is_empty() {
            format!(" for '{}'", keys.join("."))
        } else if keys.len() > 1 {
            format!(" in '{}'", keys[..keys.len() - 1].join("."))
        } else {
            String::new()
        };
        diags.push(Diagnostic::new(file, line, column, describe(&message, &where_)));
        // A key that is missing cannot be worked around; anything else is removed and
        // the file read again, to find the next problem.
        if message.starts_with("missing field") || !remove_at(&mut value, &segments) {
            break;
        }
    }
    diags.sort_by_key(|d| (d.line, d.column));
    Err(diags)
}

/// A YAML syntax error. When the parser names where an unclosed construct opened
/// ("while parsing a flow sequence at line 2 column 14"), that is where it points.
fn syntax_error(file: &Path, err: &serde_yaml::Error) -> Diagnostic {
    let text = err.to_string();
    if let Some((problem, opened)) = text.split_once(", while parsing ")
        && let Some((what, at)) = opened.rsplit_once(" at line ")
        && let Some((line, column)) = at.split_once(" column ")
        && let (Ok(line), Ok(column)) = (line.trim().parse(), column.trim().parse())
    {
        let found = problem.replace(" at line ", " (found at line ").replace('`', "'");
        let found = if found.contains("(found at line") {
            format!("{found})")
        } else {
            found
        };
        return Diagnostic::new(
            file,
            line,
            column,
            format!("{what} opened here is not closed: {found}"),
        );
    }
    Diagnostic::from_yaml(file, err)
}

/// Rewrites a serde message for people who write YAML: backticks become quotes, Rust
/// type names become plain words, unknown names get the nearest valid one.
fn describe(message: &str, where_: &str) -> String {
    let message = message.replace('`', "'");
    for (kind, label) in [("unknown field", "key"), ("unknown variant", "kind")] {
        if let Some(rest) = message.strip_prefix(&format!("{kind} '")) {
            let (name, expected) = rest.split_once('\'').unwrap_or((rest, ""));
            let options: Vec<&str> = expected
                .split('\'')
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, s)| s)
                .collect();
            let hint = match nearest(name, &options) {
                Some(best) => format!("; did you mean '{best}'?"),
                None if options.is_empty() => String::new(),
                None => format!("; expected one of: {}", options.join(", ")),
            };
            return format!("unknown {label} '{name}'{where_}{hint}");
        }
    }
    let plain = plain_types(&message);
    if where_.is_empty() {
        plain
    } else {
        format!("{plain}{where_}")
    }
}

/// Replaces Rust type names in serde's "expected ..." wording.
fn plain_types(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, plain) in [
        ("u8", "a whole number"),
        ("u16", "a whole number"),
        ("u32", "a whole number"),
        ("u64", "a whole number"),
        ("usize", "a whole number"),
        ("i32", "a whole number"),
        ("i64", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
        ("a boolean", "true or false"),
    ] {
        out = out.replace(&format!("expected {rust}"), &format!("expected {plain}"));
    }
    // "expected struct LimitsSpec" / "expected enum TriggerSpec" / "expected a sequence"
    if let Some(at) = out.find("expected struct ") {
        out.replace_range(at.., "expected a mapping of keys");
    } else if let Some(at) = out.find("expected enum ") {
        out.replace_range(at.., "expected one of the documented forms");
    }
    out
}

/// " (did you mean 'x'?)" for the option closest to `name`, or nothing when none is
/// close enough to be a typo.
pub fn did_you_mean<'a>(name: &str, options: impl IntoIterator<Item = &'a str>) -> String {
    let options: Vec<&str> = options.into_iter().collect();
    nearest(name, &options).map_or_else(String::new, |best| format!(" (did you mean '{best}'?)"))
}

/// The option closest to `name` by edit distance, when it is close enough to be a typo.
fn nearest<'a>(name: &str, options: &[&'a str]) -> Option<&'a str> {
    options
        .iter()
        .map(|o| (edit_distance(name, o), *o))
        .filter(|(d, o)| *d <= 2.max(o.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, o)| o)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Where the nested `keys` are written: each key is looked for after the previous one.
fn locate_path(text: &str, keys: &[&str]) -> (usize, usize) {
    let mut from_line = 0;
    let mut found = (1, 1);
    for key in keys {
        if let Some((i, at)) = find_key(text, key, from_line) {
            found = (i + 1, at + 1);
            from_line = i;
        }
    }
    found
}

/// Removes the node at `path` from `value`; false when there was nothing to remove. A
/// list item left as an empty mapping (a trigger whose only key was removed) goes too.
fn remove_at(value: &mut Value, path: &[Segment]) -> bool {
    let path: Vec<&Segment> = path
        .iter()
        .filter(|s| !matches!(s, Segment::Enum { .. }))
        .collect();
    remove_in(value, &path)
}

fn remove_in(node: &mut Value, path: &[&Segment]) -> bool {
    match (path, node) {
        ([], _) => false,
        ([Segment::Map { key }], Value::Mapping(m)) => m.remove(key.as_str()).is_some(),
        ([Segment::Seq { index }], Value::Sequence(s)) if *index < s.len() => {
            s.remove(*index);
            true
        }
        ([Segment::Map { key }, rest @ ..], Value::Mapping(m)) => m
            .get_mut(key.as_str())
            .is_some_and(|child| remove_in(child, rest)),
        ([Segment::Seq { index }, rest @ ..], Value::Sequence(s)) => {
            let Some(child) = s.get_mut(*index) else {
                return false;
            };
            let removed = remove_in(child, rest);
            if removed && child.as_mapping().is_some_and(|m| m.is_empty()) {
                s.remove(*index);
            }
            removed
        }
        _ => false,
    }
}

/// The value a serde message quotes (`invalid type: string "lots"`), to point at it.
fn quoted_value(message: &str) -> Option<&str> {
    for q in ['"', '\''] {
        if let Some(start) = message.find(q)
            && let Some(len) = message[start + 1..].find(q)
        {
            return Some(&message[start + 1..start + 1 + len]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spec::AgentSpec;

    fn problems(text: &str) -> Vec<String> {
        parse_all::<AgentSpec>(Path::new("agents/a.yaml"), text)
            .map(|_| Vec::new())
            .unwrap_or_else(|d| d.iter().map(|d| d.to_string()).collect())
    }

    #[test]
    fn every_unknown_key_and_type_error_is_reported_with_a_suggestion() {
        let got = problems(
            "model: openai/gpt-4.1\ntoolz: [http_fetch]\nlimits:\n  max_turns: many\n  max_tool_callz: 3\ndescriptionn: x\n",
        );
        assert_eq!(
            got,
            [
                "agents/a.yaml:2:1: unknown key 'toolz'; did you mean 'tools'?",
                "agents/a.yaml:4:14: invalid type: string \"many\", expected a whole number for 'limits.max_turns'",
                "agents/a.yaml:5:3: unknown key 'max_tool_callz' in 'limits'; did you mean 'max_tool_calls'?",
                "agents/a.yaml:6:1: unknown key 'descriptionn'; did you mean 'description'?",
            ],
        );
        for p in &got {
            assert!(!p.contains("u32") && !p.contains("struct "), "{p}");
        }
    }

    #[test]
    fn unclosed_constructs_point_where_they_opened() {
        let got = problems("model: openai/gpt-4.1\ntools: [http_fetch,\n  current_time\nprompt: p.md\n");
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("agents/a.yaml:2:8: a flow sequence opened here is not closed"),
            "{got:?}"
        );
    }

    #[test]
    fn typos_get_the_nearest_name_only_when_close() {
        assert_eq!(nearest("toolz", &["tools", "model"]), Some("tools"));
        assert_eq!(nearest("frobnicate", &["tools", "model"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
