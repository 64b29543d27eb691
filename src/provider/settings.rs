//! Which providers are configured, from the environment or set up by hand in tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Provider;
use super::anthropic::{self, Anthropic};
use super::chain::ModelChain;
use super::endpoint::Endpoint;
use super::error::{ErrorKind, ProviderError};
use super::openai::{self, OpenAi};
use super::pricing::Prices;
use super::retry::RetryPolicy;
use crate::config::Settings;
use crate::types::ModelRef;

const OPENAI_DEFAULT_URL: &str = "https://api.openai.com/v1";
const ANTHROPIC_DEFAULT_URL: &str = "https://api.anthropic.com";

/// The configured providers plus the retry policy applied to every call.
#[derive(Clone)]
pub struct ProviderSet {
    providers: BTreeMap<&'static str, Arc<dyn Provider>>,
    /// Why a known provider is unavailable (for example a missing key).
    unavailable: BTreeMap<&'static str, String>,
    pub retry: RetryPolicy,
    /// What calls are billed at (the shipped list unless a config's replaces it).
    prices: Arc<Prices>,
    /// One adaptive limit per provider and model, shared by every chain of the process.
    limiters: Arc<super::Limiters>,
}

impl ProviderSet {
    /// An empty set; add providers with [`ProviderSet::with`].
    pub fn new(retry: RetryPolicy) -> Self {
        ProviderSet {
            providers: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            limiters: Arc::default(),
            retry,
            prices: Arc::new(Prices::shipped()),
        }
    }

    /// Bills calls at `prices` (a config tree's, with its `prices.yaml`).
    pub fn with_prices(mut self, prices: Arc<Prices>) -> Self {
        self.prices = prices;
        self
    }

    /// Reads `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_API_STYLE`,
    /// `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`. A provider is usable with a key, or keyless when its base
    /// URL points somewhere other than the vendor (a local compatible server).
    pub fn from_settings(settings: &Settings, client: reqwest::Client, timeout: Duration) -> Self {
        let var = |v: &Option<String>| v.clone();
        let mut set = ProviderSet::new(RetryPolicy::default());
        let openai = endpoint(
            var(&settings.openai_base_url),
            var(&settings.openai_api_key),
            OPENAI_DEFAULT_URL,
        );
        match openai {
            Some(ep) => {
                let mut openai = OpenAi::new(client.clone(), ep, timeout)
                    .with_cache_fields(!settings.openai_cache_fields_off);
                if let Some(style) = settings.openai_api_style {
                    openai = openai.with_style(style);
                }
                set = set.with(openai::NAME, Arc::new(openai));
            }
            None => {
                set.unavailable
                    .insert(openai::NAME, "OPENAI_API_KEY is not set".into());
            }
        }
        let anth = endpoint(
            var(&settings.anthropic_base_url),
            var(&settings.anthropic_api_key),
            ANTHROPIC_DEFAULT_URL,
        );
        match anth {
            Some(ep) => set = set.with(anthropic::NAME, Arc::new(Anthropic::new(client, ep, timeout))),
            None => {
                set.unavailable
                    .insert(anthropic::NAME, "ANTHROPIC_API_KEY is not set".into());
            }
        }
        set
    }

    /// Adds or replaces the provider serving model names that start with `name/`.
    pub fn with(mut self, name: &'static str, provider: Arc<dyn Provider>) -> Self {
        self.unavailable.remove(name);
        self.providers.insert(name, provider);
        self
    }

    /// The provider called `name`, or why it is unavailable (a missing key).
    pub fn get(&self, name: &str) -> Result<Arc<dyn Provider>, String> {
        match self.providers.get(name) {
            Some(p) => Ok(p.clone()),
            None => Err(self
                .unavailable
                .get(name)
                .cloned()
                .unwrap_or_else(|| format!("no provider '{name}' is configured"))),
        }
    }

    /// The providers configured, by name.
    pub fn configured(&self) -> impl Iterator<Item = (&'static str, &Arc<dyn Provider>)> {
        self.providers.iter().map(|(n, p)| (*n, p))
    }

    /// Builds the chain for a primary model and its fallbacks. Fails only when no model
    /// of the list can be served; unavailable fallbacks are skipped.
    pub fn chain(&self, models: &[ModelRef]) -> Result<ModelChain, ProviderError> {
        let mut entries = Vec::new();
        let mut first_problem = None;
        for m in models {
            match self.providers.get(m.provider.as_str()) {
                Some(p) => entries.push((m.clone(), p.clone())),
                None => {
                    let why = self
                        .unavailable
                        .get(m.provider.as_str())
                        .cloned()
                        .unwrap_or_else(|| format!("no provider '{}' is configured", m.provider));
                    first_problem.get_or_insert_with(|| format!("cannot use model {m}: {why}"));
                }
            }
        }
        if entries.is_empty() {
            let message = first_problem.unwrap_or_else(|| "no model configured".into());
            return Err(ProviderError::new("steward", ErrorKind::NotConfigured, message));
        }
        Ok(ModelChain::new(entries, self.retry.clone(), self.prices.clone())
            .limited_by(self.limiters.clone()))
    }
}

fn endpoint(base: Option<String>, key: Option<String>, default_url: &str) -> Option<Endpoint> {
    match (base, key) {
        (base, Some(key)) => Some(Endpoint {
            base_url: base.unwrap_or_else(|| default_url.to_string()),
            api_key: Some(key),
        }),
        (Some(base), None) if base.trim_end_matches('/') != default_url => Some(Endpoint {
            base_url: base,
            api_key: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyless_only_for_custom_base_urls() {
        assert!(endpoint(None, None, OPENAI_DEFAULT_URL).is_none());
        assert!(endpoint(Some(OPENAI_DEFAULT_URL.into()), None, OPENAI_DEFAULT_URL).is_none());
        let local = endpoint(Some("http://127.0.0.1:11434/v1".into()), None, OPENAI_DEFAULT_URL).unwrap();
        assert_eq!(local.api_key, None);
        let keyed = endpoint(None, Some("sk-1".into()), OPENAI_DEFAULT_URL).unwrap();
        assert_eq!(keyed.base_url, OPENAI_DEFAULT_URL);
        assert!(!format!("{keyed:?}").contains("sk-1"));
    }

    #[test]
    fn missing_key_is_a_clear_error() {
        let set = ProviderSet {
            providers: BTreeMap::new(),
            unavailable: [("openai", "OPENAI_API_KEY is not set".to_string())].into(),
            retry: RetryPolicy::default(),
            prices: Arc::default(),
            limiters: Arc::default(),
        };
        let err = set
            .chain(&[ModelRef::parse("openai/gpt-4.1").unwrap()])
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::NotConfigured);
        assert!(err.message.contains("OPENAI_API_KEY is not set"), "{err}");
    }
}
