//! Model names as written in configs: `provider/model`.

use std::fmt;

/// Providers steward can talk to.
pub const PROVIDERS: &[&str] = &["openai", "anthropic"];

/// A parsed `provider/model` name such as `openai/gpt-4.1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl ModelRef {
    /// Parses `provider/model`; the model part may itself contain slashes
    /// (`openai/meta-llama/Llama-3.1-8B` for a vLLM server).
    pub fn parse(text: &str) -> Result<ModelRef, ModelRefError> {
        let Some((provider, model)) = text.split_once('/') else {
            return Err(ModelRefError::NoProvider(text.to_string()));
        };
        if !PROVIDERS.contains(&provider) {
            return Err(ModelRefError::UnknownProvider {
                provider: provider.to_string(),
                text: text.to_string(),
            });
        }
        if model.trim().is_empty() || model.chars().any(char::is_whitespace) {
            return Err(ModelRefError::BadModel(text.to_string()));
        }
        Ok(ModelRef {
            provider: provider.to_string(),
            model: model.to_string(),
        })
    }
}

/// Why a model name did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefError {
    #[error(
        "invalid model name '{0}', expected provider/model such as openai/gpt-4.1 or anthropic/claude-sonnet-4-5"
    )]
    NoProvider(String),
    #[error("unknown model provider '{provider}' in '{text}', expected one of {}", PROVIDERS.join(", "))]
    UnknownProvider { provider: String, text: String },
    #[error("invalid model name '{0}': the model part is empty or has spaces")]
    BadModel(String),
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_providers() {
        let m = ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(m.provider, "anthropic");
        assert_eq!(m.model, "claude-sonnet-4-5");
        let m = ModelRef::parse("openai/meta-llama/Llama-3.1-8B").unwrap();
        assert_eq!(m.model, "meta-llama/Llama-3.1-8B");
        assert_eq!(m.to_string(), "openai/meta-llama/Llama-3.1-8B");
    }

    #[test]
    fn rejects_bad_names() {
        assert!(
            ModelRef::parse("gpt-4.1")
                .unwrap_err()
                .to_string()
                .contains("provider/model")
        );
        assert!(
            ModelRef::parse("google/gemini")
                .unwrap_err()
                .to_string()
                .contains("unknown model provider")
        );
        assert!(ModelRef::parse("openai/").is_err());
    }
}
