//! Who may read a Jira comment: everyone who can see its issue, only a role or group
//! (`visibility`), or only a service desk's agents (an internal note, `jsdPublic:
//! false`). steward answers restricted text under the same restriction, so what a run
//! started by one comment reads of its issue's other comments is limited to those the
//! answer's readers may read too.

use serde_json::{Value, json};

/// A comment's restriction; the default is none (a public comment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Restriction {
    /// A comment `visibility` (`{"type": "role", "value": "Developers"}`).
    pub visibility: Option<Value>,
    /// A service desk internal note.
    pub internal: bool,
}

impl Restriction {
    /// The restriction of `comment` as Jira's API returns one.
    pub fn of_comment(comment: &Value) -> Restriction {
        Restriction {
            visibility: comment["visibility"]
                .is_object()
                .then(|| comment["visibility"].clone()),
            internal: comment["jsdPublic"] == false,
        }
    }

    /// Whether the comment is shown to everyone who can see its issue.
    pub fn is_public(&self) -> bool {
        self.visibility.is_none() && !self.internal
    }

    /// The visibility as Jira takes it in a new comment (its `identifier` dropped).
    pub fn visibility_body(&self) -> Option<Value> {
        self.visibility
            .as_ref()
            .map(|v| json!({"type": v["type"], "value": v["value"]}))
    }

    /// Whether what a comment under `other` says may go into an answer posted under
    /// `self`: every reader of the answer may read it (a public comment, or one under
    /// the same restriction).
    pub fn covers(&self, other: &Restriction) -> bool {
        other.is_public()
            || (self.internal == other.internal && self.visibility_body() == other.visibility_body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_covers_public_comments_and_its_own_restriction_only() {
        let public = Restriction::default();
        let developers = Restriction::of_comment(&json!({"visibility":
            {"type": "role", "value": "Developers", "identifier": "Developers"}}));
        let admins =
            Restriction::of_comment(&json!({"visibility": {"type": "role", "value": "Administrators"}}));
        let internal = Restriction::of_comment(&json!({"jsdPublic": false}));
        assert!(public.is_public() && !developers.is_public() && !internal.is_public());
        // As stored from the webhook (with `identifier`) and as written back (without).
        let answer = Restriction {
            visibility: Some(json!({"type": "role", "value": "Developers"})),
            internal: false,
        };
        assert!(answer.covers(&developers) && answer.covers(&public));
        assert!(!answer.covers(&admins) && !answer.covers(&internal));
        assert!(!public.covers(&developers) && !public.covers(&internal));
        assert!(internal.covers(&internal) && !internal.covers(&developers));
    }
}
