//! Context compaction: when the conversation passes `compact_at` of the window, the
//! older part is summarized with `prompts/compaction.md`, the whole transcript becomes a
//! file the agent can search, and the most recent messages stay verbatim.

use crate::files::{FileSource, NewFile, RunFiles};
use crate::provider::{ErrorKind, Message, ModelChain, ProviderError, ToolDef, Usage};
use crate::store::StoreError;
use crate::tokens::{Encoding, TokenCounter};

use super::conversation::{Conversation, message_tokens};

/// The built-in compaction prompt.
pub const COMPACTION_PROMPT: &str = include_str!("../../prompts/compaction.md");
/// Share of the window the verbatim tail may use.
const TAIL_SHARE: f64 = 0.25;

/// What compaction produced.
#[derive(Debug)]
pub struct Compacted {
    pub messages: Vec<(Message, u64)>,
    pub usage: Usage,
    /// `None` when the summarizing model has no price.
    pub cost_usd: Option<f64>,
    /// The model that wrote the summary (`provider/model`).
    pub model: String,
    pub transcript_file: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Tool outputs left out of the summary request to make it fit.
    pub dropped_outputs: usize,
    pub kept_messages: usize,
    /// Where the request sits in `messages` (see [`Compactor::request`]).
    pub request_at: Option<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("compaction failed: {0}")]
    Provider(ProviderError),
}

/// Everything compaction needs from the run.
pub struct Compactor<'a> {
    pub chain: &'a ModelChain,
    pub counter: &'a TokenCounter,
    pub encoding: Encoding,
    pub files: &'a RunFiles,
    pub window: u64,
    /// How many messages at the start of the conversation are pinned: the required
    /// skills and the original request. They open every compacted conversation
    /// verbatim, once each, and are never summarized.
    pub pinned: usize,
    /// The request's index when it comes after other messages (a run continuing a
    /// thread: the thread so far, then the request). It is never summarized: it follows
    /// the summary of what came before it, verbatim.
    pub request: Option<usize>,
    /// The run's system prompt and tools: the summary request repeats them so the
    /// provider reads the whole conversation from its prompt cache.
    pub system: &'a str,
    pub tools: &'a [ToolDef],
}

/// A summary and what it took.
struct Summary {
    text: String,
    usage: Usage,
    cost_usd: Option<f64>,
    dropped: usize,
    model: String,
}

/// Adds a call's cost to a running total that stays unknown once any part is.
fn add_cost(total: Option<f64>, more: Option<f64>) -> Option<f64> {
    total.zip(more).map(|(a, b)| a + b)
}

/// Renders messages as a readable Markdown transcript.
pub fn render(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&render_one(m));
        out.push_str("\n\n");
    }
    out
}

fn render_one(m: &Message) -> String {
    match m {
        Message::User { content, images } => {
            let imgs = if images.is_empty() {
                String::new()
            } else {
                format!("\n({} image(s))", images.len())
            };
            format!("### user\n{content}{imgs}")
        }
        Message::Assistant { text, tool_calls, .. } => {
            let mut s = String::from("### assistant");
            if let Some(t) = text {
                s.push('\n');
                s.push_str(t);
            }
            for c in tool_calls {
                s.push_str(&format!("\n-> tool call {} `{}` {}", c.id, c.name, c.arguments));
            }
            s
        }
        Message::Tool {
            call_id,
            name,
            content,
            is_error,
        } => {
            let err = if *is_error { " (error)" } else { "" };
            format!("### tool result {call_id} `{name}`{err}\n{content}")
        }
    }
}

impl Compactor<'_> {
    /// Compacts `conv` (compaction number `n`). Fails only on store errors or when the
    /// summary cannot be produced even with every tool output left out.
    pub async fn compact(&self, conv: &Conversation, n: u32) -> Result<Compacted, CompactError> {
        let messages = conv.messages();
        let counts = conv.token_counts();
        let tokens_before = conv.total();
        let transcript = render(messages);
        let file = self
            .files
            .add(
                NewFile {
                    name: format!("transcript-before-compaction-{n}.md"),
                    mime: "text/markdown".into(),
                    content: transcript.into_bytes(),
                },
                FileSource::CompactedContext,
                None,
            )
            .await?;

        let pinned = self.pinned.min(messages.len());
        let cut = self.tail_start(messages, counts, pinned);
        let request = self.request.filter(|r| (pinned..cut).contains(r));
        let head: Vec<Message> = (pinned..cut)
            .filter(|i| Some(*i) != request)
            .map(|i| messages[i].clone())
            .collect();
        let kept = messages.len() - cut;
        let summary = match self.summarize_in_place(conv, kept).await? {
            Ok(done) => done,
            Err((usage, cost)) => {
                let mut done = self.summarize(&head).await?;
                done.usage.add(&usage);
                done.cost_usd = add_cost(done.cost_usd, cost);
                done
            }
        };
        let Summary {
            text: summary,
            usage,
            cost_usd: cost,
            dropped,
            model,
        } = summary;

        let mut out: Vec<(Message, u64)> = Vec::new();
        for (m, t) in messages[..pinned].iter().zip(&counts[..pinned]) {
            out.push((m.clone(), *t));
        }
        let mut push = |m: Message| {
            let t = message_tokens(&m);
            out.push((m, t));
        };
        push(Message::user(format!(
            "[steward: the conversation was compacted (compaction {n}). Summary of everything before the last {} messages:]\n\n{}\n\n[The full transcript before this compaction is file {} ({} tokens); search it with file_regex or read parts with file_read to recover details.]",
            kept,
            summary.trim(),
            file.id,
            file.size_tokens
        )));
        if let Some(r) = request {
            out.push((messages[r].clone(), counts[r]));
        }
        for (m, t) in messages[cut..].iter().zip(&counts[cut..]) {
            out.push((m.clone(), *t));
        }
        let tokens_after = conv.fixed() + out.iter().map(|(_, t)| t).sum::<u64>();
        Ok(Compacted {
            messages: out,
            usage,
            model,
            cost_usd: cost,
            transcript_file: file.id,
            tokens_before,
            tokens_after,
            dropped_outputs: dropped,
            kept_messages: kept,
            request_at: match self.request {
                Some(_) if request.is_some() => Some(pinned + 1),
                Some(r) if r >= cut => Some(pinned + 1 + (r - cut)),
                other => other,
            },
        })
    }

    /// Where the verbatim tail starts: at an assistant message (so tool results stay
    /// with their calls), using at most [`TAIL_SHARE`] of the window. Never inside the
    /// `pinned` messages.
    fn tail_start(&self, messages: &[Message], counts: &[u64], pinned: usize) -> usize {
        let budget = (self.window as f64 * TAIL_SHARE) as u64;
        let mut used = 0;
        let mut cut = messages.len();
        for i in (pinned.max(1)..messages.len()).rev() {
            used += counts[i];
            if used > budget {
                break;
            }
            if matches!(messages[i], Message::Assistant { .. }) {
                cut = i;
            }
        }
        cut
    }

    /// Asks for the summary as the next turn of the run itself: the same system
    /// prompt, tools and messages (byte-identical, so the provider reads them from its
    /// cache) with the instruction appended last. `Err` with what was spent when this
    /// cannot work (the request is too long, the model called a tool instead): the
    /// transcript path takes over.
    async fn summarize_in_place(
        &self,
        conv: &Conversation,
        kept: usize,
    ) -> Result<Result<Summary, (Usage, Option<f64>)>, CompactError> {
        let max_output = (self.window / 8).clamp(256, 4096) as u32;
        let instruction = self.counter.count(self.encoding, COMPACTION_PROMPT).tokens + 64;
        // A conversation that came in larger than the window (a long thread read at
        // the start) cannot be sent as it stands.
        if conv.total() + instruction + u64::from(max_output) > (self.window as f64 * 0.95) as u64 {
            return Ok(Err((Usage::default(), Some(0.0))));
        }
        let mut messages = conv.messages().to_vec();
        messages.push(Message::user(format!(
            "[steward: the context is full and must be compacted now.]\n\n{COMPACTION_PROMPT}\n\nSummarize the conversation above, everything before its last {kept} messages (they stay verbatim after your summary). Answer with the summary only; call no tool."
        )));
        match self
            .chain
            .chat(self.system, &messages, conv.wire(), self.tools, max_output, None)
            .await
        {
            Ok(outcome) => {
                let cost = outcome.cost_usd();
                let r = outcome.response;
                match r.text.filter(|t| !t.trim().is_empty() && r.tool_calls.is_empty()) {
                    Some(text) => Ok(Ok(Summary {
                        text,
                        usage: r.usage,
                        cost_usd: cost,
                        dropped: 0,
                        model: outcome.model.to_string(),
                    })),
                    None => Ok(Err((r.usage, cost))),
                }
            }
            Err(e) if e.kind == ErrorKind::ContextLength => Ok(Err((Usage::default(), Some(0.0)))),
            Err(e) => Err(CompactError::Provider(e)),
        }
    }

    /// Summarizes `head` from a rendered transcript, leaving out the oldest tool
    /// outputs until the request fits the window (and more when the provider still
    /// says it is too long).
    async fn summarize(&self, head: &[Message]) -> Result<Summary, CompactError> {
        let max_output = (self.window / 8).clamp(256, 4096) as u32;
        let fixed = self.counter.count(self.encoding, COMPACTION_PROMPT).tokens + 64;
        // 5% margin for framing and estimation error.
        let budget = ((self.window as f64 * 0.95) as u64).saturating_sub(fixed + u64::from(max_output));
        let mut items: Vec<(String, u64, bool)> = head
            .iter()
            .map(|m| {
                let text = render_one(m);
                let t = self.counter.count(self.encoding, &text).tokens + 2;
                (text, t, matches!(m, Message::Tool { .. }))
            })
            .collect();
        let mut dropped = 0;
        let mut target = budget;
        let mut usage = Usage::default();
        let mut cost = Some(0.0);
        for _attempt in 0..4 {
            dropped += fit(&mut items, target);
            let transcript: String = items
                .iter()
                .map(|(t, _, _)| t.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            let request = vec![Message::user(format!(
                "Summarize this conversation transcript as instructed.\n\n<transcript>\n{transcript}\n</transcript>"
            ))];
            match self
                .chain
                .chat(COMPACTION_PROMPT, &request, &[], &[], max_output, None)
                .await
            {
                Ok(outcome) => {
                    cost = add_cost(cost, outcome.cost_usd());
                    let r = outcome.response;
                    usage.add(&r.usage);
                    return Ok(Summary {
                        text: r.text.unwrap_or_default(),
                        usage,
                        cost_usd: cost,
                        dropped,
                        model: outcome.model.to_string(),
                    });
                }
                Err(e) if e.kind == ErrorKind::ContextLength => target /= 2,
                Err(e) => return Err(CompactError::Provider(e)),
            }
        }
        Err(CompactError::Provider(ProviderError::new(
            "steward",
            ErrorKind::ContextLength,
            "the summary request does not fit even without tool outputs",
        )))
    }
}

/// Replaces the oldest tool outputs, then the oldest other messages, with placeholders
/// until the items fit `budget`. Returns how many were replaced.
fn fit(items: &mut [(String, u64, bool)], budget: u64) -> usize {
    let mut total: u64 = items.iter().map(|(_, t, _)| t).sum();
    let mut replaced = 0;
    for pass_tools in [true, false] {
        for item in items.iter_mut() {
            if total <= budget {
                return replaced;
            }
            let placeholder_tokens = 12;
            if item.2 == pass_tools && item.1 > placeholder_tokens {
                total -= item.1 - placeholder_tokens;
                item.0 = format!(
                    "[{} left out of this summary request: {} tokens; see the transcript file]",
                    if item.2 { "tool output" } else { "message" },
                    item.1
                );
                item.1 = placeholder_tokens;
                replaced += 1;
            }
        }
    }
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_drops_oldest_tool_outputs_first() {
        let mut items = vec![
            ("user".to_string(), 100, false),
            ("tool 1".to_string(), 1000, true),
            ("tool 2".to_string(), 1000, true),
            ("assistant".to_string(), 100, false),
        ];
        assert_eq!(fit(&mut items, 1300), 1);
        assert!(items[1].0.starts_with("[tool output left out"));
        assert_eq!(items[2].0, "tool 2");
        assert_eq!(fit(&mut items, 150), 2);
        assert!(items[0].0.starts_with("[message left out"));
    }
}
