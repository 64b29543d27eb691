//! `event_outcome`: "why didn't you answer <message link>?", answered from the event log.
//! Given a Slack message link, it lists what steward recorded of that message's
//! deliveries: their outcome and why (the agents' reasons, the runs started), never
//! message text. Only for the person who asked, and only about messages they could see:
//! a direct message they wrote, a private channel they are a member of
//! (`conversations.members`), or a public channel.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::integrations::slack::SlackClient;
use crate::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// The tool's name.
pub const NAME: &str = "event_outcome";

/// Deliveries listed for one message at most (retries and duplicates included).
const MAX_RECORDS: u32 = 10;

pub struct EventOutcomeTool {
    spec: ToolSpec,
    slack: Option<SlackClient>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The Slack message's link ("Copy link"), e.g.
    /// https://acme.slack.com/archives/C0123ABC/p1700000000000100
    permalink: String,
}

impl EventOutcomeTool {
    pub fn new(slack: Option<SlackClient>) -> Self {
        EventOutcomeTool {
            spec: ToolSpec {
                name: NAME.into(),
                description: "What steward did with a Slack message, from its event log: whether an agent started, and if not, why (no agent's trigger matched and which condition failed, a filter said no, a limit, a duplicate). Pass the message's link. Use it when someone asks why steward did not answer a message. Only messages the asker could see.".into(),
                parameters: crate::tools::args::schema_of::<Args>(),
                effect: Effect::ReadOnly,
            },
            slack,
        }
    }
}

/// The channel and message `ts` a Slack message link names: `/archives/C…/p<16 digits>`
/// (the `ts` without its dot), with or without `?thread_ts=`.
pub fn parse_permalink(link: &str) -> Option<(String, String)> {
    let url = url::Url::parse(link.trim().trim_matches(['<', '>'])).ok()?;
    let mut parts = url.path_segments()?;
    if parts.next()? != "archives" {
        return None;
    }
    let channel = parts.next()?.to_string();
    let p = parts.next()?.strip_prefix('p')?;
    let valid_channel = channel.len() >= 3 && channel.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid_channel || p.len() != 16 || !p.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((channel, format!("{}.{}", &p[..10], &p[10..])))
}

impl EventOutcomeTool {
    /// `Err` with the reason when `asker` may not ask about `channel`.
    async fn may_see(&self, channel: &str, asker: &str, author: Option<&str>) -> Result<(), ToolError> {
        if channel.starts_with('D') {
            // A direct message: only the person who wrote it (the bot's side is steward).
            return if author == Some(asker) {
                Ok(())
            } else {
                Err(ToolError::Model(
                    "that message is in someone else's direct conversation with steward".into(),
                ))
            };
        }
        let Some(slack) = &self.slack else {
            return Err(ToolError::Model(
                "Slack is not configured (set SLACK_BOT_TOKEN)".into(),
            ));
        };
        if !slack.is_private_channel(channel).await {
            return Ok(());
        }
        match slack.is_member(channel, asker).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ToolError::Model(format!(
                "<#{channel}> is a private channel <@{asker}> is not a member of"
            ))),
            Err(e) => Err(ToolError::Model(format!(
                "cannot check that <@{asker}> may see <#{channel}> ({e})"
            ))),
        }
    }
}

#[async_trait]
impl Tool for EventOutcomeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let args: Args = crate::tools::args::parse(args)?;
        let Some((channel, ts)) = parse_permalink(&args.permalink) else {
            return Err(ToolError::Model(format!(
                "'{}' is not a Slack message link (https://<workspace>.slack.com/archives/<channel>/p<digits>)",
                args.permalink
            )));
        };
        let Some(asker) = ctx.search.asker.as_deref() else {
            return Err(ToolError::Model(
                "only a person asking in Slack can look up what happened to a message".into(),
            ));
        };
        let Some(events) = &ctx.search.events else {
            return Err(ToolError::Model(
                "the event log is not available to this run".into(),
            ));
        };
        let found = events
            .0
            .events_about_message(&channel, &ts, MAX_RECORDS)
            .await
            .map_err(|e| ToolError::Model(format!("cannot read the event log: {e}")))?;
        let author = found.iter().find_map(|(_, author)| author.clone());
        self.may_see(&channel, asker, author.as_deref()).await?;
        if found.is_empty() {
            return Ok(ToolOutput::json(json!({
                "found": false,
                "note": "No delivery of that message is recorded. Slack may not have sent it (is steward in the channel, and does the app subscribe to its messages?), it was not addressed to steward (a message without a mention reaches only agents with a slack_message trigger), or it is older than the event log keeps (STEWARD_EVENT_RETENTION, 14 days by default).",
            })));
        }
        let deliveries: Vec<Value> = found
            .into_iter()
            .map(|(e, _)| {
                json!({
                    "event_id": e.id,
                    "received_at": crate::store::timestamp(e.received_at),
                    "kind": e.kind,
                    "outcome": e.outcome_name(),
                    "why": e.why(),
                    "detail": e.detail,
                    "duplicate_of": e.duplicate_of,
                })
            })
            .collect();
        Ok(ToolOutput::json(json!({"found": true, "deliveries": deliveries})))
    }

    /// The same lookup: it only reads.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_links_name_a_channel_and_ts() {
        assert_eq!(
            parse_permalink("https://acme.slack.com/archives/C0123ABC/p1700000000000100"),
            Some(("C0123ABC".into(), "1700000000.000100".into()))
        );
        assert_eq!(
            parse_permalink(
                "<https://acme.slack.com/archives/C0123ABC/p1700000000000200?thread_ts=1700000000.000100&cid=C0123ABC>"
            ),
            Some(("C0123ABC".into(), "1700000000.000200".into()))
        );
        for bad in [
            "https://acme.slack.com/archives/C0123ABC",
            "https://acme.slack.com/team/U0123",
            "https://acme.slack.com/archives/C0%25/p1700000000000100",
            "https://acme.slack.com/archives/C0123ABC/p17000000000001",
            "not a link",
        ] {
            assert_eq!(parse_permalink(bad), None, "{bad}");
        }
    }
}
