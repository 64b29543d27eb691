//! What `validate` knows about models and reasoning: which models reason at all, and
//! the `reasoning:` values a provider is known to refuse. Effort stays an open set
//! (providers add levels); this only turns known mistakes into warnings.

use crate::types::{ModelRef, ReasoningSpec};

/// Whether `model` reasons, when known: OpenAI's GPT-5 and later and o-series do,
/// GPT-4 and older do not; Anthropic's Claude 3.7 and 4 onward do, earlier Claude 3
/// models do not. `None` for anything else (a compatible server's model).
pub fn reasons(model: &ModelRef) -> Option<bool> {
    let m = model.model.as_str();
    match model.provider.as_str() {
        "openai" => {
            if m.starts_with("gpt-4") || m.starts_with("gpt-3") {
                Some(false)
            } else if m.starts_with("gpt-5")
                || m.starts_with("gpt-6")
                || m.starts_with("o1")
                || m.starts_with("o3")
                || m.starts_with("o4")
            {
                Some(true)
            } else {
                None
            }
        }
        "anthropic" => {
            if m.starts_with("claude-3-7") {
                Some(true)
            } else if m.starts_with("claude-3") {
                Some(false)
            } else if m.starts_with("claude-") {
                Some(true)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Warnings for an agent's `reasoning:` against each of its models.
pub fn warnings(agent: &str, models: &[ModelRef], spec: &ReasoningSpec) -> Vec<String> {
    if !spec.is_set() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in models {
        if reasons(m) == Some(false) {
            out.push(format!(
                "agent {agent}: {m} does not reason; its reasoning settings are ignored for it"
            ));
            continue;
        }
        match (m.provider.as_str(), spec.effort.as_deref()) {
            ("openai", _) if spec.budget_tokens.is_some() => out.push(format!(
                "agent {agent}: reasoning.budget_tokens is Anthropic's; {m} takes reasoning.effort, and the budget is ignored"
            )),
            ("anthropic", _) if spec.summary.is_some() => out.push(format!(
                "agent {agent}: reasoning.summary is OpenAI's; {m} ignores it"
            )),
            ("anthropic", Some(effort @ "minimal")) => out.push(format!(
                "agent {agent}: Anthropic has no '{effort}' effort (low, medium, high, max); {m} will refuse it"
            )),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModelRef {
        ModelRef::parse(s).unwrap()
    }

    #[test]
    fn known_models_and_their_refusals() {
        assert_eq!(reasons(&m("openai/gpt-4.1")), Some(false));
        assert_eq!(reasons(&m("openai/gpt-5.2")), Some(true));
        assert_eq!(reasons(&m("anthropic/claude-sonnet-4-5")), Some(true));
        assert_eq!(reasons(&m("anthropic/claude-3-5-haiku-latest")), Some(false));
        assert_eq!(reasons(&m("openai/llama3")), None);
        let high = ReasoningSpec {
            effort: Some("high".into()),
            ..ReasoningSpec::NONE
        };
        assert!(warnings("a", &[m("openai/gpt-5.2")], &high).is_empty());
        let w = warnings("a", &[m("openai/gpt-4.1-mini")], &high);
        assert!(w[0].contains("does not reason"), "{w:?}");
        let minimal = ReasoningSpec {
            effort: Some("minimal".into()),
            ..ReasoningSpec::NONE
        };
        let w = warnings("a", &[m("anthropic/claude-sonnet-4-5")], &minimal);
        assert!(w[0].contains("no 'minimal' effort"), "{w:?}");
        assert!(warnings("a", &[m("openai/gpt-4.1")], &ReasoningSpec::NONE).is_empty());
        let summary = ReasoningSpec {
            summary: Some("auto".into()),
            ..ReasoningSpec::NONE
        };
        assert!(warnings("a", &[m("openai/gpt-5.2")], &summary).is_empty());
        let w = warnings("a", &[m("anthropic/claude-sonnet-4-5")], &summary);
        assert!(w[0].contains("summary is OpenAI's"), "{w:?}");
    }
}
