//! Parsing one SKILL.md leniently.

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml::Value;

use super::{Level, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_LEN, Skill, SkillDiagnostic};

/// What the start of a SKILL.md holds.
enum Front<'a> {
    /// Front matter and body.
    Split(&'a str, &'a str),
    /// No first line `---`.
    Missing,
    /// A first line `---` and no closing one.
    Unclosed,
}

/// Splits `---\nfront matter\n---\nbody`.
fn split(text: &str) -> Front<'_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---")
        .map(|r| r.trim_start_matches([' ', '\t']))
    else {
        return Front::Missing;
    };
    let Some(rest) = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n')) else {
        return Front::Missing;
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Front::Split(&rest[..offset], &rest[offset + line.len()..]);
        }
        offset += line.len();
    }
    Front::Unclosed
}

/// Every way `name` breaks the specification's name rules (compared with its folder
/// after NFKC normalization), one message each.
pub fn name_problems(name: &str, folder: &str) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let name: String = name.nfkc().collect();
    let folder: String = folder.nfkc().collect();
    let mut out = Vec::new();
    if name.chars().count() > MAX_NAME_LEN {
        out.push(format!(
            "name '{name}' is {} characters, over the {MAX_NAME_LEN} allowed",
            name.chars().count()
        ));
    }
    if name.chars().any(|c| c.is_uppercase()) {
        out.push(format!("name '{name}' must be lower case"));
    }
    if let Some(bad) = name.chars().find(|c| !(*c == '-' || c.is_alphanumeric())) {
        out.push(format!(
            "name '{name}' may hold only letters, digits and hyphens, not '{bad}'"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push(format!("name '{name}' must not start or end with a hyphen"));
    }
    if name.contains("--") {
        out.push(format!("name '{name}' must not contain two hyphens in a row"));
    }
    if name != folder {
        out.push(format!("name '{name}' does not match its folder '{folder}'"));
    }
    out
}

/// `text` cut to at most `max` characters at a word boundary, with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    let at = cut
        .rfind(char::is_whitespace)
        .filter(|i| *i > max / 2)
        .unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

/// Quotes top-level scalar values that contain `: ` (a common hand-written mistake:
/// `description: Use when: the user asks`).
fn quote_colon_values(front: &str) -> String {
    front
        .lines()
        .map(|line| {
            let Some((key, value)) = line.split_once(':') else {
                return line.to_string();
            };
            let v = value.trim();
            let top_level = !line.starts_with([' ', '\t', '-']);
            let quoted = v.starts_with(['"', '\'', '|', '>', '[', '{']);
            if top_level && !quoted && v.contains(": ") {
                format!("{key}: \"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses a skill; records problems in `diags`. `None` means skipped.
pub fn parse(
    raw: &str,
    folder: &str,
    dir: &Path,
    rel: &Path,
    diags: &mut Vec<SkillDiagnostic>,
) -> Option<Skill> {
    let mut report = |level, message: String| {
        diags.push(SkillDiagnostic {
            file: rel.to_path_buf(),
            level,
            message,
        })
    };
    let (front, body) = match split(raw) {
        Front::Split(front, body) => (front, body),
        Front::Missing => {
            report(
                Level::Error,
                "no YAML front matter (expected a first line '---'); skipped".into(),
            );
            return None;
        }
        Front::Unclosed => {
            report(
                Level::Error,
                "front matter is not closed (no line '---' after it); skipped".into(),
            );
            return None;
        }
    };
    let map = match crate::config::yaml::value(front) {
        Ok(v) => v,
        Err(first) => match crate::config::yaml::value(&quote_colon_values(front)) {
            Ok(v) => {
                report(
                    Level::Warning,
                    "front matter needed quoting of values containing ': '".into(),
                );
                v
            }
            Err(_) => {
                report(
                    Level::Error,
                    format!("cannot parse the front matter: {first}; skipped"),
                );
                return None;
            }
        },
    };
    let Value::Mapping(map) = map else {
        report(Level::Error, "front matter is not a mapping; skipped".into());
        return None;
    };
    let get = |k: &str| map.get(Value::String(k.into()));
    let description = get("description")
        .and_then(text)
        .map(|d| d.trim().to_string())
        .unwrap_or_default();
    if description.is_empty() {
        report(Level::Error, "missing or empty 'description'; skipped".into());
        return None;
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        report(
            Level::Warning,
            format!(
                "description is {} characters, over the {MAX_DESCRIPTION_CHARS} allowed; the catalog shows it shortened",
                description.chars().count()
            ),
        );
    }
    let name = match get("name").and_then(text) {
        Some(n) => {
            for problem in name_problems(&n, folder) {
                report(Level::Warning, problem);
            }
            n
        }
        None => {
            report(
                Level::Warning,
                format!("missing 'name'; using the folder name '{folder}'"),
            );
            folder.to_string()
        }
    };
    let compatibility = get("compatibility").and_then(text);
    if let Some(c) = &compatibility
        && c.chars().count() > MAX_COMPATIBILITY_CHARS
    {
        report(
            Level::Warning,
            format!(
                "compatibility is {} characters, over the {MAX_COMPATIBILITY_CHARS} allowed",
                c.chars().count()
            ),
        );
    }
    let metadata: BTreeMap<String, String> = match get("metadata") {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, v)| {
                let key = text(k)?;
                match v {
                    Value::String(s) => Some((key, s.clone())),
                    other => {
                        report(
                            Level::Warning,
                            format!(
                                "metadata '{key}' is not a string (the specification maps strings to strings); read as text"
                            ),
                        );
                        text(other).map(|t| (key, t))
                    }
                }
            })
            .collect(),
        Some(_) => {
            report(Level::Warning, "metadata is not a mapping; ignored".into());
            BTreeMap::new()
        }
        None => BTreeMap::new(),
    };
    let allowed_tools = match get("allowed-tools") {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Sequence(items)) => items.iter().filter_map(text).collect(),
        _ => Vec::new(),
    };
    Some(Skill {
        name,
        description,
        license: get("license").and_then(text),
        compatibility,
        metadata,
        allowed_tools,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
        dir: dir.to_path_buf(),
        file: rel.to_path_buf(),
        files: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(raw: &str, folder: &str) -> (Option<Skill>, Vec<String>) {
        let mut d = Vec::new();
        let s = parse(
            raw,
            folder,
            Path::new("/x"),
            Path::new("prompts/skills/x/SKILL.md"),
            &mut d,
        );
        (s, d.iter().map(|d| d.message.clone()).collect())
    }

    #[test]
    fn parses_the_full_format() {
        let raw = "---\nname: pdf\ndescription: Extract text.\nlicense: MIT\nmetadata:\n  author: example-org\n  version: \"1.0\"\nallowed-tools: file_read extract_file\n---\n# PDF\nBody.\n";
        let (s, d) = run(raw, "pdf");
        let s = s.unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(s.metadata["version"], "1.0");
        assert_eq!(s.allowed_tools, ["file_read", "extract_file"]);
        assert_eq!(s.body, "# PDF\nBody.\n");
        assert_eq!(s.license.as_deref(), Some("MIT"));
    }

    #[test]
    fn lenient_about_colons_names_and_strict_about_descriptions() {
        let (s, d) = run(
            "---\nname: x\ndescription: Use when: the user asks\n---\nbody",
            "x",
        );
        assert_eq!(s.unwrap().description, "Use when: the user asks");
        assert_eq!(d, ["front matter needed quoting of values containing ': '"]);
        let (s, d) = run("---\nname: other\ndescription: d\n---\n", "x");
        assert_eq!(s.unwrap().name, "other");
        assert_eq!(d, ["name 'other' does not match its folder 'x'"]);
        let (s, d) = run("---\nname: x\n---\nbody", "x");
        assert!(s.is_none());
        assert_eq!(d, ["missing or empty 'description'; skipped"]);
        let (s, d) = run("---\nname: [x\ndescription: d\n---\n", "x");
        assert!(s.is_none());
        assert!(d[0].starts_with("cannot parse the front matter"), "{d:?}");
        let (s, _) = run("no front matter", "x");
        assert!(s.is_none());
    }
}
