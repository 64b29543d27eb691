//! Prompts that live in Notion (`prompt: notion:<page-id>`): fetched as Markdown, cached
//! for a short time, and served from the last good copy when Notion is unavailable.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::AgentConfig;
use crate::triggers::Sources;

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
    /// agents are returned unchanged.
    pub async fn resolve(
        &self,
        agent: &AgentConfig,
        sources: &Sources,
    ) -> Result<Option<AgentConfig>, String> {
        let Some(reference) = agent.prompt.as_ref().map(|p| p.path.as_str()) else {
            return Ok(None);
        };
        let Some(page) = reference.strip_prefix("notion:").map(str::trim) else {
            return Ok(None);
        };
        let fresh = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries
                .get(page)
                .filter(|(at, _)| at.elapsed() < self.ttl)
                .map(|(_, t)| t.clone())
        };
        let text = match fresh {
            Some(t) => t,
            None => {
                let fetched = match sources.fetch_prompt(reference).await {
                    Some(result) => result.map_err(|e| e.to_string()),
                    None => Err("no source hosts it".to_string()),
                };
                let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                match fetched {
                    Ok(t) if !t.trim().is_empty() => {
                        entries.insert(page.to_string(), (Instant::now(), t.clone()));
                        t
                    }
                    other => {
                        let why = other.err().unwrap_or_else(|| "the page is empty".into());
                        match entries.get(page) {
                            Some((_, last)) => {
                                tracing::warn!(page, error = %why, "using the last good copy of a Notion prompt");
                                last.clone()
                            }
                            None => {
                                return Err(format!("cannot load the prompt from Notion page {page}: {why}"));
                            }
                        }
                    }
                }
            }
        };
        let mut resolved = agent.clone();
        if let Some(p) = resolved.prompt.as_mut() {
            p.text = text;
        }
        Ok(Some(resolved))
    }
}
