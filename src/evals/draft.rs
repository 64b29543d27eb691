//! A draft eval case from a recorded run: its trigger, its tool results as mocks, its
//! calls and ending as observed expectations, empty criteria, and the model's answers
//! in order (for the cassette that makes the draft replay as recorded). Used by
//! `steward eval new --from-run` (which writes the files and records the cassette) and
//! by the MCP server's `draft_eval_case` (which returns the draft and writes nothing).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::provider::{ChatResponse, ToolCall};
use crate::store::{Store, StoreError};

/// A draft case.
#[derive(Debug)]
pub struct Draft {
    pub run_id: String,
    pub agent: String,
    /// Where the case belongs in the config tree (`evals/<agent>/from-run-<id>.yaml`).
    pub rel_path: PathBuf,
    /// The case file's text, a comment header first.
    pub yaml: String,
    /// The run's model answers, in order.
    pub responses: VecDeque<ChatResponse>,
}

/// Why no draft could be made.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    #[error("no run {0}")]
    NoRun(String),
    #[error("run id prefix {0} is ambiguous; give more of it")]
    Ambiguous(String),
    #[error(
        "run {0} came from a private channel: its text was never stored, so it cannot become an eval case"
    )]
    Private(String),
    #[error("run {0} was recorded before steward kept triggers; only newer runs can become cases")]
    NoTrigger(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the case as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// The draft for run `id` (or a unique prefix of it).
pub async fn from_run(store: &dyn Store, id: &str) -> Result<Draft, DraftError> {
    let ids = store.run_ids_with_prefix(id, 2).await?;
    let id = match ids.as_slice() {
        [one] => one.clone(),
        [] => return Err(DraftError::NoRun(id.to_string())),
        _ => return Err(DraftError::Ambiguous(id.to_string())),
    };
    let Some(run) = store.get_run(&id).await? else {
        return Err(DraftError::NoRun(id));
    };
    if run.private {
        return Err(DraftError::Private(id));
    }
    let events = store.run_events(&id).await?;
    let trigger: Value = events
        .iter()
        .find(|e| e.kind == "run_started")
        .and_then(|e| e.data["trigger"].as_str())
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| DraftError::NoTrigger(id.clone()))?;
    let mut tool_results: BTreeMap<String, Vec<Result<Value, String>>> = BTreeMap::new();
    let mut responses = VecDeque::new();
    let mut called = BTreeMap::<String, u32>::new();
    for e in &events {
        let d = &e.data;
        match e.kind.as_str() {
            "tool_result" if d["parent_call_id"].is_null() => {
                let name = d["name"].as_str().unwrap_or_default().to_string();
                *called.entry(name.clone()).or_default() += 1;
                let result = if d["ok"].as_bool() == Some(true) {
                    let text = d["content"].as_str().unwrap_or_default();
                    Ok(serde_json::from_str::<Value>(text)
                        .ok()
                        .filter(|v| v.is_object() || v.is_array())
                        .unwrap_or_else(|| Value::String(text.to_string())))
                } else {
                    Err(d["error"].as_str().unwrap_or("failed").to_string())
                };
                tool_results.entry(name).or_default().push(result);
            }
            "model_response" => {
                let calls = d["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| ToolCall {
                        id: c["id"].as_str().unwrap_or_default().to_string(),
                        name: c["name"].as_str().unwrap_or_default().to_string(),
                        arguments: c["arguments"].as_str().unwrap_or("{}").to_string(),
                    })
                    .collect();
                responses.push_back(ChatResponse {
                    text: d["text"].as_str().map(str::to_string),
                    tool_calls: calls,
                    usage: serde_json::from_value(d["usage"].clone()).unwrap_or_default(),
                    stop_reason: d["stop_reason"].as_str().unwrap_or_default().to_string(),
                    model: d["response_model"].as_str().unwrap_or_default().to_string(),
                    id: String::new(),
                    // Runs record no reasoning; a replay continues without it.
                    reasoning: Vec::new(),
                    spent_for: None,
                });
            }
            _ => {}
        }
    }
    let mocks: serde_json::Map<String, Value> = tool_results
        .iter()
        .map(|(name, results)| (name.clone(), mock_of(results)))
        .collect();
    let short = short_id(&id);
    let rel_path = PathBuf::from("evals")
        .join(&run.agent)
        .join(format!("from-run-{short}.yaml"));
    let case = json!({
        "description": format!("From run {id} ({}). Fill in what a good run does.", run.trigger_summary),
        "trigger": { "event": trigger },
        "mocks": mocks,
        "expect": {
            "calls": called,
            "termination": run.termination.clone().unwrap_or_else(|| "completed".into()),
        },
        "criteria": [],
    });
    let header = format!(
        "# Draft eval case written by `steward eval new --from-run {id}`.\n# Add criteria (plain-language statements a judge scores) and tighten the expectations.\n"
    );
    let yaml = format!("{header}{}", serde_yaml::to_string(&case)?);
    Ok(Draft {
        run_id: id,
        agent: run.agent,
        rel_path,
        yaml,
        responses,
    })
}

/// The last eight characters of a run id: what case files and links name a run by.
pub fn short_id(id: &str) -> &str {
    let start = id.char_indices().rev().nth(7).map_or(0, |(i, _)| i);
    &id[start..]
}

/// A tool's mock from its results in a run: the one value, all of them in order, or the
/// error when every call failed.
fn mock_of(results: &[Result<serde_json::Value, String>]) -> serde_json::Value {
    use serde_json::json;
    if let [Err(e)] | [Err(e), ..] = results
        && results.iter().all(|r| r.is_err())
    {
        return json!({ "error": e });
    }
    let values: Vec<serde_json::Value> = results
        .iter()
        .map(|r| match r {
            Ok(v) => v.clone(),
            Err(e) => serde_json::Value::String(format!("error: {e}")),
        })
        .collect();
    match values.as_slice() {
        [one] => json!({ "result": one }),
        many if many.iter().all(|v| v == &many[0]) => json!({ "result": many[0] }),
        many => json!({ "results": many }),
    }
}
