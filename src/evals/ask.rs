//! Asking a subagent (the improver, the reviewer) for one JSON object: its answer from
//! the first `{` to the last `}`, checked by the caller's parser, and asked for once
//! more with the reason when it does not parse.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::run::{Lineage, Runner};
use crate::triggers::TriggerEvent;

/// Why the subagent gave nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the {0} could not run: {1}")]
    Run(String, String),
    #[error("the {0} did not answer as asked: {1}")]
    Answer(String, String),
}

/// `agent`'s answer to `question` (with `attachment`, a file it reads with the file
/// tools), parsed by `parse`; an answer `parse` refuses is asked for once more with the
/// reason. Returns the value and the model cost of both attempts.
pub async fn ask_json<T>(
    runner: &Runner,
    agent: &Arc<AgentConfig>,
    question: &str,
    attachment: Option<(&str, &str)>,
    parse: impl Fn(Value) -> Result<T, String>,
) -> Result<(T, f64), AskError> {
    let mut cost = 0.0;
    let mut last = String::new();
    for attempt in 0..2 {
        let mut prompt = question.to_string();
        if attempt > 0 {
            prompt.push_str(&format!(
                "\n\nYour previous answer could not be used: {last}. Answer with the JSON object only."
            ));
        }
        let mut trigger = TriggerEvent::from_cli(json!({ "text": prompt }));
        if let Some((name, text)) = attachment {
            trigger.attachments.push(crate::files::NewFile {
                name: name.to_string(),
                mime: "text/markdown".into(),
                content: text.as_bytes().to_vec(),
            });
        }
        let outcome = runner
            .run_in(agent, &trigger, Lineage::root(agent), CancellationToken::new())
            .await
            .map_err(|e| AskError::Run(agent.name.clone(), e.to_string()))?;
        cost += outcome.cost_usd;
        let Some(answer) = outcome.final_text else {
            let why = outcome
                .error
                .unwrap_or_else(|| format!("it ended {}", outcome.termination.as_str()));
            return Err(AskError::Run(agent.name.clone(), why));
        };
        let value = answer
            .find('{')
            .zip(answer.rfind('}'))
            .and_then(|(start, end)| answer.get(start..=end))
            .and_then(|s| serde_json::from_str::<Value>(s).ok());
        match value
            .ok_or_else(|| "it was not a JSON object".to_string())
            .and_then(&parse)
        {
            Ok(v) => return Ok((v, cost)),
            Err(e) => last = e,
        }
    }
    Err(AskError::Answer(agent.name.clone(), last))
}
