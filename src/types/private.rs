//! Text that may quote a person: shown in records and logs for ordinary runs, reduced to
//! its length for private ones. Redaction goes by type: a [`Private`] can only be made
//! through a run's [`Privacy`], and it serializes, displays and debug-prints redacted
//! when the run is private, wherever it ends up (run events, run rows, log lines).

use std::fmt;

use serde::{Serialize, Serializer};

/// Whether a run's content may be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privacy {
    /// Content is recorded as is.
    Recorded,
    /// Content is replaced by `[private: N chars]` (direct messages, private channels).
    Private,
}

impl Privacy {
    pub fn from_private(private: bool) -> Privacy {
        if private {
            Privacy::Private
        } else {
            Privacy::Recorded
        }
    }

    pub fn is_private(self) -> bool {
        self == Privacy::Private
    }

    /// Wraps `text` under this policy.
    pub fn wrap(self, text: impl Into<String>) -> Private {
        let text = text.into();
        match self {
            Privacy::Recorded => Private(Inner::Shown(text)),
            Privacy::Private => Private(Inner::Hidden(text.chars().count())),
        }
    }

    /// Wraps an optional text.
    pub fn wrap_opt(self, text: Option<&str>) -> Option<Private> {
        text.map(|t| self.wrap(t))
    }
}

/// Content under a run's privacy policy. A hidden value keeps only its length: the
/// text itself is dropped at construction, so no later path can leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Private(Inner);

#[derive(Clone, PartialEq, Eq)]
enum Inner {
    Shown(String),
    Hidden(usize),
}

impl fmt::Display for Private {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Shown(text) => f.write_str(text),
            Inner::Hidden(chars) => write!(f, "[private: {chars} chars]"),
        }
    }
}

impl fmt::Debug for Private {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Shown(text) => fmt::Debug::fmt(text, f),
            Inner::Hidden(chars) => write!(f, "[private: {chars} chars]"),
        }
    }
}

impl Serialize for Private {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Inner::Shown(text) => s.serialize_str(text),
            Inner::Hidden(_) => s.collect_str(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_text_is_redacted_everywhere() {
        let p = Privacy::Private.wrap("secret plans");
        assert_eq!(p.to_string(), "[private: 12 chars]");
        assert_eq!(format!("{p:?}"), "[private: 12 chars]");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"[private: 12 chars]\"");
        let shown = Privacy::Recorded.wrap("hello");
        assert_eq!(serde_json::to_string(&shown).unwrap(), "\"hello\"");
        assert_eq!(format!("{shown}"), "hello");
        assert_eq!(Privacy::Private.wrap("日本語").to_string(), "[private: 3 chars]");
    }
}
