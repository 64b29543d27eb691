//! A source's two sides. Inbound: each source folder has a `receive` function that
//! authenticates and parses a request to its endpoint into an [`Inbound`], so the
//! server's handlers are only HTTP glue. Outbound: [`Source`] replies where an event came
//! from and fetches the files it refers to; [`Sources`] holds one of each, built once per
//! process.

use async_trait::async_trait;
use serde_json::Value;

use reqwest::header::HeaderMap;

use super::auth::AuthError;
use super::event::PayloadError;
use super::{Origin, TriggerEvent};
use crate::files::NewFile;
use crate::http::Egress;
use crate::integrations::jira::JiraClient;
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::integrations::{ApiError, Clients};

/// What an authenticated inbound request asks the server to do.
#[derive(Debug)]
pub enum Inbound {
    /// Answer 200 with this JSON and store nothing (a URL-verification challenge, an
    /// event no agent can want).
    Answer(Value),
    /// Store the event, deduplicated by `dedupe_key`, then acknowledge.
    Event {
        event: Box<TriggerEvent>,
        dedupe_key: String,
    },
    /// A Slack event from a channel shared with another organisation (Slack Connect)
    /// whose author is not of the receiving workspace, or not known to be: `team` is the
    /// author's workspace when the payload names it. Refused unless it turns out to be
    /// the receiving workspace or `SLACK_TEAM_IDS` lists it: steward acts for the people
    /// of its own organisation, whose public channels it reads freely.
    SlackOutsider {
        event: Box<TriggerEvent>,
        dedupe_key: String,
        team: Option<String>,
    },
    /// Authenticated but not for any agent (the bot's own message, another bot's, an
    /// edit or delete, an unsupported type): acknowledged, and recorded as `ignored`
    /// with `reason` (no content kept).
    Ignored {
        source: &'static str,
        kind: String,
        reason: String,
    },
    /// Join a newly created public Slack channel, then acknowledge.
    JoinChannel(String),
    /// Slack said a channel now reaches fewer or other people: made private, or shared
    /// with another organisation. Taken at once (every replica), then acknowledged.
    SlackChannelChanged { channel: String, change: ChannelChange },
    /// A Notion subscription's verification token, received during a setup window: kept
    /// for `steward notion-token --listen` to show, never used to sign anything.
    VerificationToken(String),
}

/// What Slack said of a channel ([`Inbound::SlackChannelChanged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelChange {
    /// `message` of subtype `channel_convert_to_private`.
    MadePrivate,
    /// `channel_shared`: shared with another organisation (Slack Connect).
    SharedOutside,
    /// `channel_unshared` with `is_ext_shared: false`: shared with no other
    /// organisation any more.
    UnsharedOutside,
}

impl ChannelChange {
    /// The Slack event that says it.
    pub fn event_type(self) -> &'static str {
        match self {
            ChannelChange::MadePrivate => "channel_convert_to_private",
            ChannelChange::SharedOutside => "channel_shared",
            ChannelChange::UnsharedOutside => "channel_unshared",
        }
    }
}

/// Why an inbound request is refused.
#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    /// 401.
    #[error("unauthorized: {0}")]
    Unauthorized(#[from] AuthError),
    /// 400.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 404: the endpoint is closed.
    #[error("not found")]
    NotFound,
}

impl From<PayloadError> for InboundError {
    fn from(e: PayloadError) -> Self {
        InboundError::BadRequest(e.to_string())
    }
}

/// A request header as text.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A request body that must be JSON.
pub fn json_body(body: &[u8]) -> Result<Value, InboundError> {
    serde_json::from_slice(body).map_err(|e| InboundError::BadRequest(format!("body is not JSON: {e}")))
}

/// A reply about to be posted.
pub struct Reply<'a> {
    pub text: &'a str,
    /// A link to the prompt that drove the run, shown under the answer.
    pub prompt_link: Option<&'a str>,
    /// The run's page in the inspector, when `STEWARD_PUBLIC_URL` is set.
    pub run_link: Option<&'a str>,
    /// Ask for 👍 / 👎 under the answer (`output.feedback`), for this run id.
    pub feedback: Option<&'a str>,
    /// A "Get help from a person" button (Slack; `escalation:`): the run id and the
    /// button's label.
    pub escalate: Option<(&'a str, &'a str)>,
    /// Stable for the run, so a retried post is recognisable.
    pub idempotency_key: String,
}

/// One message of the conversation a run continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTurn {
    /// The message's id in its source (a Slack `ts`, a comment id).
    pub id: String,
    /// Written by this bot (a reply of an earlier run).
    pub own: bool,
    /// Who wrote it, as a reader sees it (`@Ana Lee`, `app Jenkins`).
    pub author: String,
    /// Its text, entities resolved.
    pub text: String,
}

/// The conversation around the triggering message, the trigger itself left out:
/// `turns` came before it (and the bot's own replies after it), oldest first; `later`
/// holds people's messages written after it, which the run answers with it (they
/// arrived while it waited for its turn); `omitted` counts older messages not read.
#[derive(Debug, Default, Clone)]
pub struct Thread {
    pub turns: Vec<ThreadTurn>,
    pub later: Vec<ThreadTurn>,
    pub omitted: usize,
    /// Files shared in the conversation (the newest few), loaded under the cap.
    pub files: Vec<NewFile>,
    /// Why some of its files were not loaded.
    pub notes: Vec<String>,
    /// The triggering message's text as read now, for events that carry none (a
    /// Notion comment event holds only ids).
    pub request: Option<String>,
}

/// A request for a person to approve a tool call, as a source shows it.
pub struct ApprovalRequest<'a> {
    /// The approval's id: the buttons carry it, with the run id.
    pub approval: &'a str,
    pub run_id: &'a str,
    pub agent: &'a str,
    pub tool: &'a str,
    /// The call's arguments (JSON text), shown readably.
    pub arguments: &'a str,
    /// `false` for tools whose effect cannot be taken back.
    pub reversible: bool,
    /// The Slack user who triggered the run.
    pub requester: Option<&'a str>,
    pub approvers: &'a [String],
    pub timeout: std::time::Duration,
    pub run_link: Option<String>,
    /// Why a person must decide beyond the agent's config (see `Ask::note`).
    pub note: Option<String>,
}

/// A run's progress as shown where it was asked (see [`crate::config::StatusMode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The run started (`:eyes:`; Slack's thinking status and an agent session named
    /// `title`, started by `user`).
    Working { title: String, user: Option<String> },
    /// What it is doing now ("Searching Jira…"), for the thinking status.
    Step(String),
    /// It completed (`:white_check_mark:`).
    Done,
    /// It ended any other way (`:x:`).
    Failed,
}

/// Where a tool call of a streamed answer stands (a task in Slack's timeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Running,
    Done,
    Failed,
}

/// How a streamed reply ended.
#[derive(Debug)]
pub enum Finished {
    /// The stream carried the whole answer; what the service sent back.
    Streamed(Value),
    /// Streaming was refused or broke: `rest`, the part of the answer people have not
    /// seen, is to be posted as a normal reply (all of it when nothing was streamed).
    Post { rest: String },
}

/// A reply that streams where it will land while the run works: the model's text as
/// it comes ([`crate::provider::Deltas`]) and its tool calls as tasks. Best effort: a
/// failure to stream never loses the answer (see [`Finished::Post`]).
#[async_trait]
pub trait Live: crate::provider::Deltas {
    /// A tool call started or ended; `title` says what it does, `output` one line of
    /// what came of it.
    fn task(&self, id: &str, title: &str, state: TaskState, output: Option<&str>);
    /// The run has a plan (its planner subagent answered): shown as the plan's title.
    fn plan(&self, title: &str);
    /// The run answered `reply.text` (the last text it streamed): ends the stream
    /// with the reply's footer and feedback.
    async fn finish(&self, reply: &Reply<'_>) -> Finished;
    /// The run ended without an answer: closes a started stream as it is.
    async fn abandon(&self);
    /// Whether people may already see part of the reply (the stream started, or is
    /// being started).
    fn shown(&self) -> bool;
}

/// Files fetched for a trigger, and one note for each file that could not be.
#[derive(Debug, Default)]
pub struct Fetched {
    pub files: Vec<NewFile>,
    pub notes: Vec<String>,
}

/// One event source's outbound side.
#[async_trait]
pub trait Source: Send + Sync {
    /// Whether events with `origin` come from this source.
    fn owns(&self, origin: &Origin) -> bool;

    /// Where a reply to `origin` goes (recorded before posting), or `None` when the
    /// origin takes no replies.
    fn reply_destination(&self, origin: &Origin) -> Option<Value>;

    /// Posts `reply` where `origin` came from; returns the service's answer.
    async fn post_reply(&self, origin: &Origin, reply: &Reply<'_>) -> Result<Value, ApiError>;

    /// Shows a run's progress on the message that triggered it; `Ok(false)` when this
    /// source has no such marks (only Slack does).
    async fn show_progress(
        &self,
        _origin: &Origin,
        _mode: crate::config::StatusMode,
        _progress: &Progress,
    ) -> Result<bool, ApiError> {
        Ok(false)
    }

    /// `text` (a trigger's) as a reader sees it: the source's ids for people and
    /// places replaced by their names. The default keeps it as it is.
    async fn readable(&self, text: &str) -> String {
        text.to_string()
    }

    /// The conversation `trigger` continues (a Slack thread, a DM), re-read from the
    /// service; `None` when it continues none.
    /// Names the conversation `origin` belongs to after its first answer (a thread of
    /// Slack's agent DM view gets a title). Best effort; the default does nothing.
    async fn name_conversation(&self, _origin: &Origin, _title: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// A reply that streams to `origin` while the run works; `None` where this source
    /// cannot stream (only Slack threads can).
    fn live(&self, _origin: &Origin) -> Option<std::sync::Arc<dyn Live>> {
        None
    }

    /// Whether `trigger` (a comment) addresses the bot: it mentions the bot's account
    /// and is not the bot's own. Follow-ups on Jira and Notion need this; Slack's are
    /// decided by thread and author.
    async fn addresses_bot(&self, _trigger: &TriggerEvent) -> bool {
        false
    }

    /// Whether `trigger` is steward's own doing: a comment it wrote, an issue or page it
    /// changed. Such an event starts nothing, or a rule on comments would answer its own
    /// answer, and that one, without end. Slack's own messages are dropped on arrival.
    /// An error when it cannot tell (the service would not say who steward is there):
    /// the caller then acts on nothing, since acting could answer itself without end.
    async fn is_our_own(&self, _trigger: &TriggerEvent) -> Result<bool, ApiError> {
        Ok(false)
    }

    /// Files shared in it come along, each at most `cap` bytes.
    async fn thread(&self, _trigger: &TriggerEvent, _cap: u64) -> Option<Result<Thread, ApiError>> {
        None
    }

    /// Asks for an approval where people can answer it: for a Slack source, in the
    /// trigger's thread, else by DM to the approvers. Returns where it was posted
    /// (channel, message ts); `None` when this source cannot ask.
    async fn ask_approval(
        &self,
        _origin: &Origin,
        _request: &ApprovalRequest<'_>,
    ) -> Option<Result<(String, String), ApiError>> {
        None
    }

    /// The files `trigger` refers to, each at most `cap` bytes.
    async fn attachments(&self, _trigger: &TriggerEvent, _cap: u64) -> Fetched {
        Fetched::default()
    }

    /// The text of a prompt hosted in this source (`prompt: notion:<page-id>` in an
    /// agent), or `None` when `reference` does not name one of this source's prompts.
    async fn fetch_prompt(&self, _reference: &str) -> Option<Result<String, ApiError>> {
        None
    }
}

/// The sources of one process, with the settings replies share.
pub struct Sources {
    sources: Vec<Box<dyn Source>>,
    /// For prompts hosted in Notion and routing by Notion database.
    pub notion: Option<NotionClient>,
    /// Prefix turning a prompt's repository path into a link
    /// (`STEWARD_PROMPT_BASE_URL`).
    pub prompt_base_url: Option<String>,
    /// Where steward's run inspector is reachable (`STEWARD_PUBLIC_URL`): prompt links
    /// point at its `/prompts` pages when there is no `prompt_base_url`.
    pub public_url: Option<String>,
    /// Largest attachment fetched (`STEWARD_MAX_ATTACHMENT_BYTES`).
    pub attachment_cap: u64,
    /// The Slack channel that gets one line per finished run (`STEWARD_LOG_CHANNEL`),
    /// with the client to post it.
    pub log: Option<(SlackClient, String)>,
    /// The Slack client, for checks on a run's reads and destinations
    /// (`run::custody`).
    pub slack: Option<SlackClient>,
}

/// What [`Sources`] are built from.
#[derive(Clone)]
pub struct SourceSettings {
    pub slack: Option<SlackClient>,
    pub jira: Option<JiraClient>,
    pub notion: Option<NotionClient>,
    /// The checked client file URLs are fetched through.
    pub egress: Egress,
    pub prompt_base_url: Option<String>,
    pub public_url: Option<String>,
    pub attachment_cap: u64,
    pub log_channel: Option<String>,
}

impl Default for SourceSettings {
    /// No service configured: replies go nowhere, attachments are not fetched.
    fn default() -> Self {
        SourceSettings {
            slack: None,
            jira: None,
            notion: None,
            egress: Egress::default(),
            prompt_base_url: None,
            public_url: None,
            log_channel: None,
            attachment_cap: crate::integrations::DEFAULT_ATTACHMENT_CAP,
        }
    }
}

impl SourceSettings {
    /// The service clients of `clients`, other settings at their defaults.
    pub fn from_clients(clients: &Clients) -> Self {
        SourceSettings {
            slack: clients.slack.clone(),
            jira: clients.jira.clone(),
            notion: clients.notion.clone(),
            ..SourceSettings::default()
        }
    }
}

impl Default for Sources {
    fn default() -> Self {
        Sources::new(SourceSettings::default())
    }
}

impl Sources {
    /// One source of each kind over `settings`' clients.
    pub fn new(settings: SourceSettings) -> Sources {
        let SourceSettings {
            slack,
            jira,
            notion,
            egress,
            prompt_base_url,
            public_url,
            attachment_cap,
            log_channel,
        } = settings;
        let log = match (&slack, log_channel) {
            (Some(client), Some(channel)) => Some((client.clone(), channel)),
            (None, Some(channel)) => {
                tracing::warn!(%channel, "STEWARD_LOG_CHANNEL is set but SLACK_BOT_TOKEN is not; run lines will not be posted");
                None
            }
            _ => None,
        };
        Sources {
            slack: slack.clone(),
            sources: vec![
                Box::new(super::slack::SlackSource::new(slack, egress.clone())),
                Box::new(super::jira::JiraSource::new(jira)),
                Box::new(super::notion::NotionSource::new(notion.clone(), egress)),
            ],
            notion,
            prompt_base_url,
            public_url,
            attachment_cap,
            log,
        }
    }

    /// The source `origin` came from, when it is one that takes replies or has files.
    pub fn for_origin(&self, origin: &Origin) -> Option<&dyn Source> {
        self.sources.iter().find(|s| s.owns(origin)).map(|s| s.as_ref())
    }

    /// The text of the hosted prompt `reference` names (`notion:<page-id>`), from the
    /// source that hosts it; `None` when no source does.
    pub async fn fetch_prompt(&self, reference: &str) -> Option<Result<String, ApiError>> {
        for source in &self.sources {
            if let Some(text) = source.fetch_prompt(reference).await {
                return Some(text);
            }
        }
        None
    }

    /// `text` from `origin`'s source as a reader sees it (see [`Source::readable`]).
    pub async fn readable(&self, origin: &Origin, text: &str) -> String {
        match self.for_origin(origin) {
            Some(source) => source.readable(text).await,
            None => text.to_string(),
        }
    }

    /// Whether `trigger` addresses the bot (see [`Source::addresses_bot`]).
    pub async fn addresses_bot(&self, trigger: &TriggerEvent) -> bool {
        match self.for_origin(&trigger.origin) {
            Some(source) => source.addresses_bot(trigger).await,
            None => false,
        }
    }

    /// The conversation `trigger` continues (see [`Source::thread`]).
    pub async fn thread(&self, trigger: &TriggerEvent) -> Option<Result<Thread, ApiError>> {
        self.for_origin(&trigger.origin)?
            .thread(trigger, self.attachment_cap)
            .await
    }

    /// Asks for an approval through the origin's source, else any source that can.
    pub async fn ask_approval(
        &self,
        origin: &Origin,
        request: &ApprovalRequest<'_>,
    ) -> Result<(String, String), ApiError> {
        let own = self.for_origin(origin).into_iter();
        let others = self.sources.iter().map(|s| s.as_ref());
        for source in own.chain(others) {
            if let Some(result) = source.ask_approval(origin, request).await {
                return result;
            }
        }
        Err(ApiError::NotConfigured(
            "Slack (SLACK_BOT_TOKEN) to ask for approvals",
        ))
    }

    /// The trigger's text as a reader sees it (see [`Source::readable`]).
    pub async fn readable_text(&self, trigger: &TriggerEvent) -> Option<String> {
        let text = trigger.text.as_deref()?;
        Some(match self.for_origin(&trigger.origin) {
            Some(source) => source.readable(text).await,
            None => text.to_string(),
        })
    }

    /// The files `trigger` refers to.
    pub async fn attachments(&self, trigger: &TriggerEvent) -> Fetched {
        match self.for_origin(&trigger.origin) {
            Some(source) => source.attachments(trigger, self.attachment_cap).await,
            None => Fetched::default(),
        }
    }
}
