//! Parsing one SKILL.md leniently.

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml::Value;

use super::{Level, MAX_NAME_LEN, Skill, SkillDiagnostic};

/// Splits `---\nfront matter\n---\nbody`; `None` when there is no front matter.
fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---")?.trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
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
    let Some((front, body)) = split(raw) else {
        report(
            Level::Error,
            "no YAML front matter (expected a first line '---'); skipped".into(),
        );
        return None;
    };
    let map = match serde_yaml::from_str::<Value>(front) {
        Ok(v) => v,
        Err(first) => match serde_yaml::from_str::<Value>(&quote_colon_values(front)) {
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
    let name = match get("name").and_then(text) {
        Some(n) => {
            if n != folder {
                report(
                    Level::Warning,
                    format!("name '{n}' does not match its folder '{folder}'"),
                );
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
    if name.chars().count() > MAX_NAME_LEN {
        report(
            Level::Warning,
            format!("name is longer than {MAX_NAME_LEN} characters"),
        );
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        report(
            Level::Warning,
            format!("name '{name}' should use lowercase letters, digits and hyphens"),
        );
    }
    let metadata: BTreeMap<String, String> = match get("metadata") {
        Some(Value::Mapping(m)) => m.iter().filter_map(|(k, v)| Some((text(k)?, text(v)?))).collect(),
        _ => BTreeMap::new(),
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
        compatibility: get("compatibility").and_then(text),
        metadata,
        allowed_tools,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
        dir: dir.to_path_buf(),
        file: rel.to_path_buf(),
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
