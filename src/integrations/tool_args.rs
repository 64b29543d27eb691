//! Argument types of the integration tools. Each tool's JSON schema is generated from
//! its struct and its arguments parsed into it (see `crate::tools::args`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A Slack message.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackMessage {
    /// Channel id, e.g. C0123ABC
    #[schemars(length(min = 1))]
    pub channel: String,
    /// Message timestamp, e.g. 1700000000.000100
    #[schemars(length(min = 1))]
    pub ts: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackUserArgs {
    /// User id, e.g. U0123ABC
    #[schemars(length(min = 1))]
    pub user: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackChannelArgs {
    /// Channel id, e.g. C0123ABC
    #[schemars(length(min = 1))]
    pub channel: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackPostArgs {
    /// Channel id, e.g. C0123ABC
    #[schemars(length(min = 1))]
    pub channel: String,
    /// Message text (Slack mrkdwn)
    #[schemars(length(min = 1))]
    pub text: String,
    /// Reply in this thread
    pub thread_ts: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackHistoryArgs {
    /// Channel id, e.g. C0123ABC
    #[schemars(length(min = 1))]
    pub channel: String,
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlackReactionArgs {
    /// Channel id, e.g. C0123ABC
    #[schemars(length(min = 1))]
    pub channel: String,
    /// Message timestamp
    #[schemars(length(min = 1))]
    pub ts: String,
    /// Emoji name without colons
    #[schemars(length(min = 1))]
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JiraIssueArgs {
    /// Issue key, e.g. OPS-7
    #[schemars(length(min = 1))]
    pub key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JiraAttachmentArgs {
    /// Attachment id, as listed by jira_get_issue
    #[schemars(length(min = 1))]
    pub id: String,
    /// Key of the issue the attachment is on, e.g. OPS-7 (checked)
    #[schemars(length(min = 1))]
    pub issue: String,
    /// Name for the virtual file
    pub filename: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JiraCreateArgs {
    /// Project key, e.g. OPS
    #[schemars(length(min = 1))]
    pub project: String,
    #[schemars(length(min = 1, max = 255))]
    pub summary: String,
    /// Markdown
    pub description: Option<String>,
    /// Task unless given
    pub issue_type: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JiraCommentArgs {
    /// Issue key, e.g. OPS-7
    #[schemars(length(min = 1))]
    pub key: String,
    /// Markdown
    #[schemars(length(min = 1))]
    pub body: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JiraSearchArgs {
    #[schemars(length(min = 1))]
    pub jql: String,
    #[schemars(range(min = 1, max = 500))]
    pub max_results: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotionPageArgs {
    #[schemars(length(min = 1))]
    pub page_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotionQueryArgs {
    #[schemars(length(min = 1))]
    pub database_id: String,
    /// A Notion filter object
    pub filter: Option<Map<String, Value>>,
    #[schemars(range(min = 1, max = 500))]
    pub max_results: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotionCommentArgs {
    #[schemars(length(min = 1))]
    pub page_id: String,
    #[schemars(length(min = 1))]
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotionUpdateArgs {
    #[schemars(length(min = 1))]
    pub page_id: String,
    /// Notion property values by property name
    pub properties: Map<String, Value>,
}

/// A pull request by URL, or by owner, repo and number.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PullRequestArgs {
    /// https://github.com/{owner}/{repo}/pull/{number}
    pub url: Option<String>,
    pub owner: Option<String>,
    pub repo: Option<String>,
    #[schemars(range(min = 1))]
    pub number: Option<u64>,
}
