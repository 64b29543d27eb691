//! Model cassettes: every model call of a case, recorded once against the real model
//! and replayed in CI, keyed by a hash of the canonical request. A replayed run asks
//! nothing of the network and gives the same result every time; a request the cassette
//! does not hold (the prompt was edited) fails the case with what changed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::provider::{ChatRequest, ChatResponse, ErrorKind, Provider, ProviderError};

/// The file format's version.
const VERSION: u32 = 1;
/// Lines of a prompt diff shown, at most.
const MAX_DIFF_LINES: usize = 24;

/// One recorded model call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interaction {
    pub key: String,
    /// The canonical request, kept to explain a miss.
    pub request: Value,
    pub response: ChatResponse,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    interactions: Vec<Interaction>,
}

/// A cassette could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    #[error("cassette {path} is corrupt: {reason}; delete it and re-record with `steward eval --record`")]
    Corrupt { path: String, reason: String },
    #[error("cannot write cassette {path}: {reason}")]
    Write { path: String, reason: String },
}

/// The recorded calls of one case.
#[derive(Debug)]
pub struct Cassette {
    path: PathBuf,
    case: String,
    interactions: Mutex<Vec<Interaction>>,
    /// Calls recorded since loading (written by [`Cassette::save`]).
    changed: Mutex<bool>,
}

impl Cassette {
    /// Reads `path`; a missing file is an empty cassette.
    pub fn load(path: &Path, case: &str) -> Result<Cassette, CassetteError> {
        let interactions = match std::fs::read(path) {
            Err(_) => Vec::new(),
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|e| CassetteError::Corrupt {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                if file.version != VERSION {
                    return Err(CassetteError::Corrupt {
                        path: path.display().to_string(),
                        reason: format!("version {} (this steward reads {VERSION})", file.version),
                    });
                }
                file.interactions
            }
        };
        Ok(Cassette {
            path: path.to_path_buf(),
            case: case.to_string(),
            interactions: Mutex::new(interactions),
            changed: Mutex::new(false),
        })
    }

    /// An empty cassette that will replace `path` (recording afresh).
    pub fn fresh(path: &Path, case: &str) -> Cassette {
        Cassette {
            path: path.to_path_buf(),
            case: case.to_string(),
            interactions: Mutex::new(Vec::new()),
            changed: Mutex::new(true),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Interaction>> {
        self.interactions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, key: &str) -> Option<ChatResponse> {
        self.lock()
            .iter()
            .find(|i| i.key == key)
            .map(|i| i.response.clone())
    }

    fn add(&self, key: String, request: Value, response: ChatResponse) {
        let mut all = self.lock();
        if !all.iter().any(|i| i.key == key) {
            all.push(Interaction {
                key,
                request,
                response,
            });
            *self.changed.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
    }

    /// Writes the cassette if calls were recorded.
    pub fn save(&self) -> Result<(), CassetteError> {
        if !*self.changed.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(());
        }
        let file = File {
            version: VERSION,
            interactions: self.lock().clone(),
        };
        let err = |e: String| CassetteError::Write {
            path: self.path.display().to_string(),
            reason: e,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        }
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| err(e.to_string()))?;
        text.push('\n');
        std::fs::write(&self.path, text).map_err(|e| err(e.to_string()))
    }

    /// Why `request` is not in the cassette: the nearest recorded request and what
    /// differs.
    fn miss(&self, request: &Value) -> String {
        let all = self.lock();
        let head = format!(
            "case {}: no recorded model answer for this request in {}",
            self.case,
            self.path.display()
        );
        let nearest = all
            .iter()
            .max_by_key(|i| similarity(&i.request, request))
            .map(|i| difference(&i.request, request));
        match nearest {
            Some(diff) => format!(
                "{head}.\nThe nearest recorded request differs:\n{diff}\nIf the change is intended, re-record: steward eval --record {}",
                self.case
            ),
            None if !self.path.exists() => format!(
                "{head}: there is no such file. Record it against the real model: steward eval --record {}",
                self.case
            ),
            None => format!(
                "{head} (the cassette is empty). Record it against the real model: steward eval --record {}",
                self.case
            ),
        }
    }
}

/// The request as compared and hashed: provider, model, system prompt, messages, tools,
/// output cap and reasoning settings (when set), with object keys sorted, and run ids
/// (UUID v7, new on every run: a subagent's prompt names its parent run) replaced by
/// `<run-id>`. The reasoning a model returned is left out of the messages: its
/// encrypted content and signatures differ on every recording, and say nothing the
/// rest of the conversation does not.
pub fn canonical(provider: &str, request: &ChatRequest<'_>) -> Value {
    let mut messages = json!(request.messages);
    for m in messages.as_array_mut().into_iter().flatten() {
        if let Some(m) = m.as_object_mut() {
            m.remove("reasoning");
        }
    }
    let mut value = json!({
        "provider": provider,
        "model": request.model,
        "system": request.system,
        "messages": messages,
        "tools": request.tools,
        "max_output_tokens": request.max_output_tokens,
    });
    if request.reasoning.is_set() {
        value["reasoning"] = json!(request.reasoning);
    }
    // Compiled per request: evals are not a hot path, and no regex is kept around.
    let Ok(run_ids) =
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
    else {
        return value;
    };
    let text = value.to_string();
    match run_ids.replace_all(&text, "<run-id>") {
        std::borrow::Cow::Borrowed(_) => value,
        std::borrow::Cow::Owned(t) => serde_json::from_str(&t).unwrap_or(value),
    }
}

/// The cassette key of a canonical request.
pub fn key(canonical: &Value) -> String {
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    hex::encode(&digest[..16])
}

/// How much two requests share: same model, then the number of equal leading messages.
fn similarity(a: &Value, b: &Value) -> (bool, usize, bool) {
    let shared = a["messages"]
        .as_array()
        .zip(b["messages"].as_array())
        .map(|(x, y)| x.iter().zip(y).take_while(|(m, n)| m == n).count())
        .unwrap_or(0);
    (a["model"] == b["model"], shared, a["system"] == b["system"])
}

/// What differs between a recorded request and a new one, as a short report with a
/// line diff of the first text that changed.
pub fn difference(recorded: &Value, new: &Value) -> String {
    for field in ["provider", "model", "max_output_tokens"] {
        if recorded[field] != new[field] {
            return format!("  {field}: recorded {} , now {}", recorded[field], new[field]);
        }
    }
    if recorded["system"] != new["system"] {
        return format!(
            "  the system prompt changed:\n{}",
            line_diff(
                recorded["system"].as_str().unwrap_or_default(),
                new["system"].as_str().unwrap_or_default()
            )
        );
    }
    if recorded["tools"] != new["tools"] {
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        };
        return format!(
            "  the tools offered changed: recorded [{}], now [{}] (or their descriptions or schemas)",
            names(&recorded["tools"]).join(", "),
            names(&new["tools"]).join(", ")
        );
    }
    let empty = Vec::new();
    let old = recorded["messages"].as_array().unwrap_or(&empty);
    let now = new["messages"].as_array().unwrap_or(&empty);
    for (i, (a, b)) in old.iter().zip(now).enumerate() {
        if a != b {
            let text = |m: &Value| -> String {
                m.get("content")
                    .or_else(|| m.get("text"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| m.to_string())
            };
            return format!(
                "  message {} ({}) changed:\n{}",
                i + 1,
                b["role"].as_str().unwrap_or("?"),
                line_diff(&text(a), &text(b))
            );
        }
    }
    format!(
        "  the conversation has {} messages where the recording has {}",
        now.len(),
        old.len()
    )
}

/// `- old` / `+ new` lines (a longest-common-subsequence diff), at most
/// [`MAX_DIFF_LINES`].
pub fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Long texts: compare only the region between the common head and tail.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let (n, m) = (a.len().min(400), b.len().min(400));
    let mut lcs = vec![vec![0u16; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while (i < n || j < m) && out.len() < MAX_DIFF_LINES {
        if i < n && j < m && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Removals before additions, as diff prints them.
            out.push(format!("  - {}", a[i]));
            i += 1;
        } else {
            out.push(format!("  + {}", b[j]));
            j += 1;
        }
    }
    if out.is_empty() {
        out.push("  (whitespace or line endings only)".into());
    }
    format!("  (at line {})\n{}", head + 1, out.join("\n"))
}

/// How model calls are answered.
pub enum Mode {
    /// From the cassette only.
    Replay,
    /// By the real provider, recorded into the cassette.
    Record(Arc<dyn Provider>),
    /// By the real provider, nothing written.
    Live(Arc<dyn Provider>),
}

/// A [`Provider`] answering from (or recording into) a case's cassette.
pub struct CassetteProvider {
    name: &'static str,
    mode: Mode,
    cassette: Arc<Cassette>,
}

impl CassetteProvider {
    pub fn new(name: &'static str, mode: Mode, cassette: Arc<Cassette>) -> Self {
        CassetteProvider { name, mode, cassette }
    }
}

#[async_trait]
impl Provider for CassetteProvider {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let canonical = canonical(self.name, request);
        let key = key(&canonical);
        match &self.mode {
            Mode::Replay => self.cassette.find(&key).ok_or_else(|| {
                // Not retryable and no fallback: the message is the case's failure.
                ProviderError::new(self.name, ErrorKind::BadRequest, self.cassette.miss(&canonical))
            }),
            Mode::Record(real) => {
                let response = real.chat(request).await?;
                self.cassette.add(key, canonical, response.clone());
                Ok(response)
            }
            Mode::Live(real) => real.chat(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_edit_shows_as_a_line_diff() {
        let d = line_diff(
            "You are the helpdesk.\nBe brief.\nCite sources.",
            "You are the helpdesk.\nBe thorough.\nCite sources.",
        );
        assert_eq!(d, "  (at line 2)\n  - Be brief.\n  + Be thorough.");
    }

    #[test]
    fn keys_follow_content_not_key_order() {
        let a = json!({"b": 1, "a": [1, 2]});
        let b: Value = serde_json::from_str(r#"{"a": [1, 2], "b": 1}"#).unwrap();
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&json!({"a": [2, 1], "b": 1})));
    }
}
