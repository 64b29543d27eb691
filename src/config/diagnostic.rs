//! Config errors that point at a file, line and column.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in the config tree, printed as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Path relative to the config root.
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: &Path, line: usize, column: usize, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }

    /// Converts a serde_yaml error, moving its "at line X column Y" suffix into the prefix.
    pub fn from_yaml(file: &Path, err: &serde_yaml::Error) -> Self {
        let (line, column) = err.location().map(|l| (l.line(), l.column())).unwrap_or((1, 1));
        let text = err.to_string();
        let message = match text.rfind(" at line ") {
            Some(at) => text[..at].to_string(),
            None => text,
        };
        Diagnostic::new(file, line, column, message.replace('`', "'"))
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

/// Every problem found while loading a tree; never empty when returned as an error.
#[derive(Debug, Clone, Default, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Finds where `key:` (and, if given, `value` after it) is written in a YAML source, so
/// semantic errors found after parsing can still name a line and column. Returns 1-based
/// positions; falls back to the start of the file.
pub fn locate(source: &str, key: &str, value: Option<&str>) -> (usize, usize) {
    let needle = format!("{key}:");
    let Some((key_line, at)) = find_key(source, key, 0) else {
        return (1, 1);
    };
    let key_col = at + 1;
    let Some(value) = value else {
        return (key_line + 1, key_col);
    };
    for (i, line) in source.lines().enumerate().skip(key_line) {
        let start = if i == key_line {
            key_col - 1 + needle.len()
        } else {
            0
        };
        if let Some(found) = line.get(start..).and_then(|rest| find_token(rest, value)) {
            return (i + 1, start + found + 1);
        }
    }
    (key_line + 1, key_col)
}

/// The first place at or after line `from_line` (0-based) where `key:` is written as a
/// key: `(line, byte column)`, both 0-based.
pub fn find_key(source: &str, key: &str, from_line: usize) -> Option<(usize, usize)> {
    let needle = format!("{key}:");
    source.lines().enumerate().skip(from_line).find_map(|(i, line)| {
        let mut from = 0;
        while let Some(off) = line[from..].find(&needle) {
            let at = from + off;
            let before = line[..at].chars().next_back();
            // A key starts a line, follows "- ", or sits in a flow mapping.
            if before.is_none_or(|c| c == ' ' || c == '{' || c == ',' || c == '-') {
                return Some((i, at));
            }
            from = at + needle.len();
        }
        None
    })
}

/// Finds `value` as a whole token (not as part of a longer name).
fn find_token(haystack: &str, value: &str) -> Option<usize> {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-' || c == '.' || c == '/';
    let mut from = 0;
    while let Some(off) = haystack[from..].find(value) {
        let at = from + off;
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + value.len()..].chars().next();
        if !before.is_some_and(is_name) && !after.is_some_and(is_name) {
            return Some(at);
        }
        from = at + value.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_keys_and_values() {
        let src = "name: a\ntools: [http_fetch, nope]\nprompt: prompts/x.md\n";
        assert_eq!(locate(src, "prompt", None), (3, 1));
        assert_eq!(locate(src, "tools", Some("nope")), (2, 21));
        let src = "tools:\n  - http_fetch\n  - http_fetch_x\n";
        assert_eq!(locate(src, "tools", Some("http_fetch_x")), (3, 5));
        assert_eq!(locate(src, "missing", None), (1, 1));
    }
}
