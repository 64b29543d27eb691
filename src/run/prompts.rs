//! Prompts that live in Notion (`prompt: notion:<page-id>`): fetched as Markdown, cached
//! for a short time, and served from the last good copy when Notion is unavailable.
//!
//! The cache has two levels: this process's memory, and the store's settings
//! (`notion_prompt:<page-id>`, with the time it was fetched), which every replica shares.
//! A replica takes a copy another fetched within the TTL instead of asking Notion again,
//! and one that starts while Notion is down answers from the last good copy any replica
//! saved. Prompts are configuration, not private input.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::AgentConfig;
use crate::store::SettingStore;
use crate::triggers::Sources;

/// A prompt as kept in the store.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    fetched_at: DateTime<Utc>,
    text: String,
}

fn setting_key(page: &str) -> String {
    format!("notion_prompt:{page}")
}

/// How long a fetched prompt is used before it is fetched again.
pub const TTL: Duration = Duration::from_secs(60);

/// Cache of Notion prompts by page id.
pub struct PromptCache {
    entries: Mutex<HashMap<String, (Instant, String)>>,
    pub ttl: Duration,
}

impl Default for PromptCache {
    fn default() -> Self {
        PromptCache::with_ttl(TTL)
    }
}

impl PromptCache {
    pub fn with_ttl(ttl: Duration) -> Self {
        PromptCache {
            entries: Mutex::new(HashMap::new()),
            ttl,
        }
    }
}

impl PromptCache {
    /// `agent` with its prompt text filled in when the prompt lives in Notion; other
    /// agents are returned unchanged. `store` holds the copy the replicas share.
    pub async fn resolve<S: SettingStore + ?Sized>(
        &self,
        agent: &AgentConfig,
        sources: &Sources,
        store: &S,
    ) -> Result<Option<AgentConfig>, String> {
        let Some(reference) = agent.prompt.as_ref().map(|p| p.path.as_str()) else {
            return Ok(None);
        };
        let Some(page) = reference.strip_prefix("notion:").map(str::trim) else {
            return Ok(None);
        };
        let local_fresh = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries
                .get(page)
                .filter(|(at, _)| at.elapsed() < self.ttl)
                .map(|(_, t)| t.clone())
        };
        let text = match local_fresh {
            Some(t) => t,
            None => self.shared_or_fetched(page, reference, sources, store).await?,
        };
        let mut resolved = agent.clone();
        if let Some(p) = resolved.prompt.as_mut() {
            p.text = text;
        }
        Ok(Some(resolved))
    }

    /// A copy another replica saved within the TTL; else a fresh fetch (saved for the
    /// others); else, when Notion fails, the last good copy here or in the store.
    async fn shared_or_fetched<S: SettingStore + ?Sized>(
        &self,
        page: &str,
        reference: &str,
        sources: &Sources,
        store: &S,
    ) -> Result<String, String> {
        let key = setting_key(page);
        let saved: Option<Saved> = match store.get_setting(&key).await {
            Ok(v) => v.and_then(|v| serde_json::from_str(&v).ok()),
            Err(e) => {
                tracing::warn!(page, error = %e, "cannot read the shared copy of a Notion prompt");
                None
            }
        };
        let age = |s: &Saved| (Utc::now() - s.fetched_at).to_std().unwrap_or_default();
        if let Some(s) = saved
            .as_ref()
            .filter(|s| age(s) < self.ttl && !s.text.trim().is_empty())
        {
            self.keep(page, s.text.clone(), age(s));
            return Ok(s.text.clone());
        }
        let fetched = match sources.fetch_prompt(reference).await {
            Some(result) => result.map_err(|e| e.to_string()),
            None => Err("no source hosts it".to_string()),
        };
        match fetched {
            Ok(t) if !t.trim().is_empty() => {
                self.keep(page, t.clone(), Duration::ZERO);
                let saved = Saved {
                    fetched_at: Utc::now(),
                    text: t.clone(),
                };
                let value = serde_json::to_string(&saved).unwrap_or_default();
                if let Err(e) = store.set_setting(&key, &value).await {
                    tracing::warn!(page, error = %e, "cannot share a Notion prompt through the store");
                }
                Ok(t)
            }
            other => {
                let why = other.err().unwrap_or_else(|| "the page is empty".into());
                let last = {
                    let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                    entries.get(page).map(|(_, t)| t.clone())
                }
                .or_else(|| saved.map(|s| s.text).filter(|t| !t.trim().is_empty()));
                match last {
                    Some(t) => {
                        tracing::warn!(page, error = %why, "using the last good copy of a Notion prompt");
                        Ok(t)
                    }
                    None => Err(format!("cannot load the prompt from Notion page {page}: {why}")),
                }
            }
        }
    }

    /// Keeps `text` in memory as fetched `age` ago.
    fn keep(&self, page: &str, text: String, age: Duration) {
        let at = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(page.to_string(), (at, text));
    }
}
