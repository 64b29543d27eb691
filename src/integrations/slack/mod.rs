//! Slack Web API client: JSON POSTs with the bot token. Slack reports errors as HTTP 200
//! with `ok: false`, and rate limits as 429 with `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use slack_morphism::api::{SlackApiConversationsInfoResponse, SlackApiUsersInfoResponse};

use super::ApiError;
use crate::config::Settings;
use crate::http::Egress;

pub mod entities;
pub mod message;
pub mod mrkdwn;

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

const SERVICE: &str = "slack";
/// How long a channel's "public" answer from `conversations.info` is trusted.
pub const PUBLIC_FOR: Duration = Duration::from_secs(600);

/// How long a channel's "not shared with another organisation" answer is trusted.
pub const UNSHARED_FOR: Duration = Duration::from_secs(60);

/// How long a conversation's member list is trusted.
pub const MEMBERS_FOR: Duration = Duration::from_secs(120);

/// Retries of a 429 before giving up.
const MAX_RATE_LIMIT_RETRIES: u32 = 3;

/// A conversation's member ids, with when Slack listed them.
type Members = (Arc<std::collections::HashSet<String>>, std::time::Instant);

/// A Web API client for one workspace.
#[derive(Clone)]
pub struct SlackClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
    /// Names of users and channels, shared by the clones of this client.
    directory: Arc<entities::Directory>,
    /// Upper bound on one `Retry-After` wait.
    pub max_wait: Duration,
    /// Whether the workspace has Slack's Real-time Search (`assistant.search.info`),
    /// asked once.
    search_enabled: Arc<tokio::sync::OnceCell<bool>>,
    /// The token's own user and bot ids (`auth.test`), asked once.
    own: Arc<tokio::sync::OnceCell<OwnIds>>,
    /// Members of conversations, by id, with when Slack listed them.
    members: Arc<std::sync::Mutex<std::collections::HashMap<String, Members>>>,
    /// What `conversations.info` said of a channel, by id.
    channels: Arc<std::sync::Mutex<std::collections::HashMap<String, ChannelFacts>>>,
    /// Channels Slack said were made private while this process ran: private whatever
    /// `conversations.info` says after (its answer may lag the event).
    made_private: Marked,
    /// Channels Slack said were shared with another organisation while this process
    /// ran: shared whatever `conversations.info` says after.
    made_shared: Marked,
    /// Methods (`chat.postMessage`: per channel) Slack answered 429, with when they may be
    /// called again: every such call waits for it, not only the one that was refused
    /// (a burst of runs would otherwise spend their retries against the same limit).
    paused: Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>>,
}

/// Channel ids an event said something of, shared by the clones of a client.
#[derive(Clone, Default)]
struct Marked(Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl Marked {
    fn mark(&self, id: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string());
    }

    fn unmark(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    fn has(&self, id: &str) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains(id)
    }
}

/// Who a token is (`auth.test`).
#[derive(Debug, Clone, Default)]
pub struct OwnIds {
    user: Option<String>,
    bot: Option<String>,
}

impl OwnIds {
    /// Whether message `m` was posted by this user or bot.
    pub fn posted(&self, m: &Value) -> bool {
        let is = |field: &str, mine: &Option<String>| mine.is_some() && m[field].as_str() == mine.as_deref();
        is("user", &self.user) || is("bot_id", &self.bot)
    }
}

/// What steward keeps of a `conversations.info` answer.
#[derive(Debug, Clone)]
struct ChannelFacts {
    /// A DM, a group DM or a private channel.
    private: bool,
    /// Shared with another organisation (Slack Connect), or not said to be unshared.
    shared_outside: bool,
    /// Slack said it is shared with another organisation (`is_ext_shared: true`).
    said_shared: bool,
    /// The workspaces it is in (`shared_team_ids`), when Slack lists them.
    workspaces: Option<Arc<[String]>>,
    at: std::time::Instant,
}

impl std::fmt::Debug for SlackClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl SlackClient {
    pub fn new(http: reqwest::Client, base_url: &str, token: &str) -> Self {
        SlackClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            directory: Arc::default(),
            max_wait: Duration::from_secs(30),
            search_enabled: Arc::default(),
            own: Arc::default(),
            channels: Arc::default(),
            members: Arc::default(),
            made_private: Marked::default(),
            made_shared: Marked::default(),
            paused: Arc::default(),
        }
    }

    /// This client with another token (a user token for Slack search), sharing the
    /// name directory.
    pub fn with_token(&self, token: &str) -> SlackClient {
        SlackClient {
            token: token.to_string(),
            search_enabled: Arc::default(),
            own: Arc::default(),
            ..self.clone()
        }
    }

    /// Whether message `m` (as `conversations.replies` gives it) was posted with this
    /// client's token: by its user or its bot. `false` when `auth.test` cannot say.
    pub async fn posted_by_me(&self, m: &Value) -> bool {
        self.me().await.is_some_and(|me| me.posted(m))
    }

    /// Who this client's token is (`auth.test`, asked once; an error is not kept).
    pub async fn me(&self) -> Option<&OwnIds> {
        self.own
            .get_or_try_init(|| async {
                let me = self.call("auth.test", &serde_json::json!({})).await?;
                let id = |k: &str| me[k].as_str().filter(|s| !s.is_empty()).map(str::to_string);
                Ok::<_, ApiError>(OwnIds {
                    user: id("user_id"),
                    bot: id("bot_id"),
                })
            })
            .await
            .ok()
    }

    /// Whether the workspace has Real-time Search (`assistant.search.info`, asked once
    /// per client; an error is not cached).
    pub async fn search_enabled(&self) -> Result<bool, ApiError> {
        self.search_enabled
            .get_or_try_init(|| async {
                let info = self.call("assistant.search.info", &serde_json::json!({})).await?;
                Ok(info["is_ai_search_enabled"].as_bool().unwrap_or(false))
            })
            .await
            .copied()
    }

    /// `assistant.search.context`: `body` holds the query, filters and, for a bot
    /// token, the person's `action_token` (the body is never logged).
    pub async fn search_context(&self, body: &Value) -> Result<Value, ApiError> {
        self.call("assistant.search.context", body).await
    }

    /// Whether channel `id` is private (a DM, a group DM or a private channel; private
    /// channels can have C ids), from `conversations.info`. A private answer is kept
    /// for the process's life; a public one for [`PUBLIC_FOR`], since a channel can be
    /// made private (shorter would ask once a minute for every busy channel, past
    /// Slack's rate limit for `conversations.info` in a large workspace). When Slack
    /// cannot say, it counts as private (and is asked again).
    pub async fn is_private_channel(&self, id: &str) -> bool {
        if id.starts_with('D') || id.starts_with('G') || self.made_private.has(id) {
            return true;
        }
        match self.cached_channel(id) {
            Some(known) if known.private || known.at.elapsed() < PUBLIC_FOR => known.private,
            _ => self.channel_facts(id).await.is_none_or(|c| c.private),
        }
    }

    /// The workspaces channel `id` is in (`conversations.info`'s `shared_team_ids`), on
    /// an Enterprise Grid org where a public channel is public to those workspaces
    /// only; `None` when Slack does not list them (one workspace) or cannot say.
    pub async fn channel_workspaces(&self, id: &str) -> Option<Arc<[String]>> {
        match self.cached_channel(id) {
            Some(known) if known.at.elapsed() < PUBLIC_FOR => known.workspaces,
            _ => self.channel_facts(id).await.and_then(|c| c.workspaces),
        }
    }

    /// Whether channel `id` is shared with another organisation (Slack Connect), from
    /// `conversations.info`'s `is_ext_shared`. "Shared" is kept for [`PUBLIC_FOR`];
    /// "not shared" for [`UNSHARED_FOR`] only, since a channel shared a moment ago
    /// must not let outsiders through for long. When Slack cannot say, it counts as
    /// shared.
    pub async fn is_shared_outside(&self, id: &str) -> bool {
        if self.made_shared.has(id) {
            return true;
        }
        match self.cached_channel(id) {
            Some(known) if known.shared_outside && known.at.elapsed() < PUBLIC_FOR => true,
            Some(known) if !known.shared_outside && known.at.elapsed() < UNSHARED_FOR => false,
            _ => self.channel_facts(id).await.is_none_or(|c| c.shared_outside),
        }
    }

    /// Whether Slack says channel `id` is shared with another organisation. Unlike
    /// [`Self::is_shared_outside`] (who may act here: closed when Slack cannot say),
    /// a channel Slack cannot say about counts as not shared: this decides whether a
    /// run's ordinary answer goes by DM, which a slow or rate-limited Slack must not
    /// turn on for every run.
    pub async fn said_shared_outside(&self, id: &str) -> bool {
        if self.made_shared.has(id) {
            return true;
        }
        match self.cached_channel(id) {
            Some(known) if known.at.elapsed() < UNSHARED_FOR => known.said_shared,
            _ => self.channel_facts(id).await.is_some_and(|c| c.said_shared),
        }
    }

    /// Takes channel `id` as private from now on, without asking Slack: Slack said it
    /// was made private (`channel_convert_to_private`), here or to another replica.
    /// Like a private answer from `conversations.info`, it holds for the process's life.
    pub fn made_private(&self, id: &str) {
        // Its name was a public one's: it no longer goes into text.
        self.directory.forget(id);
        self.change_cached(id, |facts| facts.private = true);
        self.made_private.mark(id);
    }

    /// Takes channel `id` as shared with another organisation, without asking Slack:
    /// Slack said so (`channel_shared`). Like "made private", it holds for the
    /// process's life, whatever `conversations.info` says after (its answer may lag the
    /// event), until Slack says it is shared with no other organisation any more.
    pub fn made_shared_outside(&self, id: &str) {
        self.change_cached(id, |facts| {
            facts.shared_outside = true;
            facts.said_shared = true;
        });
        self.made_shared.mark(id);
    }

    /// Takes channel `id` as shared with no other organisation any more: Slack said so
    /// (`channel_unshared` with `is_ext_shared: false`). What was known of it is asked
    /// again when due; a private answer stays.
    pub fn made_unshared_outside(&self, id: &str) {
        self.made_shared.unmark(id);
        self.change_cached(id, |facts| {
            facts.shared_outside = false;
            facts.said_shared = false;
        });
    }

    /// Applies `change` to what is cached of channel `id`, if anything is. Its `at`
    /// stays: the facts the change leaves alone still expire when due.
    fn change_cached(&self, id: &str, change: impl FnOnce(&mut ChannelFacts)) {
        if let Some(facts) = self
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(id)
        {
            change(facts);
        }
    }

    fn cached_channel(&self, id: &str) -> Option<ChannelFacts> {
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Asks `conversations.info` and keeps the answer; `None` when Slack cannot say
    /// (nothing kept, so it is asked again).
    async fn channel_facts(&self, id: &str) -> Option<ChannelFacts> {
        let v = self
            .get("conversations.info", &[("channel", id.to_string())])
            .await
            .ok()?;
        let c = &v["channel"];
        let mut facts = ChannelFacts {
            private: c["is_private"].as_bool() != Some(false) || c["is_im"] == true || c["is_mpim"] == true,
            shared_outside: c["is_ext_shared"].as_bool() != Some(false),
            said_shared: c["is_ext_shared"].as_bool() == Some(true),
            workspaces: c["shared_team_ids"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .filter(|ids| !ids.is_empty())
                .map(Arc::from),
            at: std::time::Instant::now(),
        };
        facts.private |= self.made_private.has(id);
        let shared = self.made_shared.has(id);
        facts.shared_outside |= shared;
        facts.said_shared |= shared;
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        // A private answer is kept for the process's life, whatever comes after.
        facts.private |= channels.get(id).is_some_and(|old| old.private);
        channels.insert(id.to_string(), facts.clone());
        Some(facts)
    }

    /// Whether `user` is a member of conversation `channel` (`conversations.members`,
    /// every page), kept for [`MEMBERS_FOR`]. An error is returned, not guessed.
    pub async fn is_member(&self, channel: &str, user: &str) -> Result<bool, ApiError> {
        if let Some((known, at)) = self
            .members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(channel)
            && at.elapsed() < MEMBERS_FOR
        {
            return Ok(known.contains(user));
        }
        let mut all = std::collections::HashSet::new();
        let mut cursor = String::new();
        for _ in 0..100 {
            let mut params = vec![("channel", channel.to_string()), ("limit", "1000".to_string())];
            if !cursor.is_empty() {
                params.push(("cursor", cursor.clone()));
            }
            let page = self.get("conversations.members", &params).await?;
            all.extend(
                page["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.as_str().map(str::to_string)),
            );
            cursor = page["response_metadata"]["next_cursor"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if cursor.is_empty() {
                break;
            }
        }
        let member = all.contains(user);
        self.members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(channel.to_string(), (Arc::new(all), std::time::Instant::now()));
        Ok(member)
    }

    /// From `SLACK_BOT_TOKEN` and `SLACK_API_URL` (default `https://slack.com/api`).
    pub fn from_settings(http: reqwest::Client, s: &Settings) -> Option<Self> {
        let token = s.slack_bot_token.as_deref()?;
        let base = s.slack_api_url.as_deref().unwrap_or(DEFAULT_API_URL);
        Some(SlackClient::new(http, base, token))
    }

    /// Calls `method` with a JSON body; returns the response object when `ok: true`.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        self.exchange(method, body["channel"].as_str(), || {
            self.http.post(format!("{}/{method}", self.base_url)).json(body)
        })
        .await
    }

    /// Calls `method` with a slack-morphism request type as its JSON body.
    pub async fn send<R: serde::Serialize>(&self, method: &str, request: &R) -> Result<Value, ApiError> {
        let body = serde_json::to_value(request).map_err(|e| ApiError::Transport {
            service: SERVICE,
            method: method.into(),
            message: format!("cannot encode the request: {e}"),
        })?;
        self.call(method, &body).await
    }

    /// Calls a read method with query parameters (GET), e.g. `conversations.history`.
    pub async fn get(&self, method: &str, params: &[(&str, String)]) -> Result<Value, ApiError> {
        let channel = params
            .iter()
            .find(|(k, _)| *k == "channel")
            .map(|(_, v)| v.as_str());
        self.exchange(method, channel, || {
            self.http.get(format!("{}/{method}", self.base_url)).query(params)
        })
        .await
    }

    /// [`Self::get`], read into slack-morphism's response type `T`; an answer in another
    /// shape is an [`ApiError::Api`] saying so.
    pub async fn get_typed<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: &[(&str, String)],
    ) -> Result<T, ApiError> {
        let value = self.get(method, params).await?;
        T::deserialize(&value).map_err(|e| ApiError::Api {
            service: SERVICE,
            method: method.into(),
            message: format!("unexpected answer: {e}"),
        })
    }

    /// What one 429 holds back: a method, and for `chat.postMessage` (which Slack
    /// limits per channel) only posts to the same channel. Slack limits each token on
    /// its own: the clients made for other tokens ([`Self::with_token`]) share the map
    /// under their token's tag.
    fn limit_key(&self, method: &str, channel: Option<&str>) -> String {
        use std::hash::{Hash, Hasher};
        let mut tag = std::collections::hash_map::DefaultHasher::new();
        self.token.hash(&mut tag);
        let tag = tag.finish();
        match channel {
            Some(c) if method == "chat.postMessage" => format!("{tag:x} {method} {c}"),
            _ => format!("{tag:x} {method}"),
        }
    }

    /// How long calls under `key` must still wait after Slack's last 429 for them.
    fn paused_for(&self, key: &str) -> Duration {
        let mut paused = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        let now = tokio::time::Instant::now();
        match paused.get(key) {
            Some(until) if *until > now => *until - now,
            Some(_) => {
                paused.remove(key);
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }

    /// Holds calls under `key` for `wait` (Slack's `Retry-After`), never shortening a
    /// longer hold.
    fn pause(&self, key: &str, wait: Duration) {
        let until = tokio::time::Instant::now() + wait;
        let mut paused = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        let at = paused.entry(key.to_string()).or_insert(until);
        if *at < until {
            *at = until;
        }
    }

    /// Sends (and on 429 re-sends after `Retry-After`) the request `build` makes;
    /// Slack's `ok: false` becomes an [`ApiError::Api`].
    async fn exchange(
        &self,
        method: &str,
        channel: Option<&str>,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Value, ApiError> {
        let key = self.limit_key(method, channel);
        let mut attempt = 0;
        loop {
            // Another call's 429 holds this one too (at most `max_wait`, then it tries).
            let paused = self.paused_for(&key).min(self.max_wait);
            if !paused.is_zero() {
                tokio::time::sleep(paused).await;
            }
            let request = build().bearer_auth(&self.token).timeout(Duration::from_secs(30));
            let (status, headers, value) = super::send_json(SERVICE, method, request).await?;
            if status.as_u16() == 429 {
                let wait = crate::http::retry_after_secs(&headers, 1);
                self.pause(&key, Duration::from_secs(wait));
                if attempt >= MAX_RATE_LIMIT_RETRIES || Duration::from_secs(wait) > self.max_wait {
                    return Err(ApiError::RateLimited {
                        service: SERVICE,
                        method: method.into(),
                        retry_after_secs: wait,
                    });
                }
                attempt += 1;
                continue;
            }
            if value["ok"].as_bool() == Some(true) {
                return Ok(value);
            }
            let message = value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(ApiError::Api {
                service: SERVICE,
                method: method.into(),
                message,
            });
        }
    }

    /// Whether `url` is on a host that may see the bot token: Slack's file host over
    /// https, or the host of the configured API URL (a fake Slack in tests, a proxy).
    pub fn is_file_host(&self, url: &reqwest::Url) -> bool {
        // The API's own origin (scheme, host and port alike): the token never goes
        // over plain HTTP or to another port of that host.
        let origin = |u: &reqwest::Url| {
            (
                u.scheme().to_string(),
                u.host_str().map(str::to_ascii_lowercase),
                u.port_or_known_default(),
            )
        };
        let api = reqwest::Url::parse(&self.base_url).ok().map(|u| origin(&u));
        let host = url.host_str().map(str::to_ascii_lowercase);
        (url.scheme() == "https"
            && host.as_deref() == Some("files.slack.com")
            && url.port_or_known_default() == Some(443))
            || (host.is_some() && Some(origin(url)) == api)
    }

    /// Downloads a private file URL with the bot token through the egress checks,
    /// refusing more than `cap` bytes. The token goes only to [`Self::is_file_host`].
    pub async fn download(&self, egress: &Egress, url: &str, cap: u64) -> Result<Vec<u8>, ApiError> {
        let refused = |message: String| ApiError::Api {
            service: SERVICE,
            method: "files.download".into(),
            message,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| refused(format!("invalid file URL: {e}")))?;
        if !self.is_file_host(&parsed) {
            return Err(refused(format!(
                "refused to send the bot token to {}: not a Slack file host",
                parsed.host_str().unwrap_or("(no host)")
            )));
        }
        let request = egress
            .get(url)
            .map_err(|e| refused(e.to_string()))?
            .bearer_auth(&self.token);
        super::download_capped(SERVICE, "files.download", request, cap).await
    }

    /// Uploads `content` as a file shared in `channel` (in `thread_ts`, when given) with
    /// `comment` as its message: `files.getUploadURLExternal`, the bytes to the upload
    /// URL it returns (only a Slack file host, see [`Self::is_file_host`]), then
    /// `files.completeUploadExternal`.
    pub async fn upload(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        filename: &str,
        content: &[u8],
        comment: Option<&str>,
    ) -> Result<Value, ApiError> {
        const METHOD: &str = "files.getUploadURLExternal";
        let ticket = self
            .get(
                METHOD,
                &[
                    ("filename", filename.to_string()),
                    ("length", content.len().to_string()),
                ],
            )
            .await?;
        let refused = |message: String| ApiError::Api {
            service: SERVICE,
            method: METHOD.into(),
            message,
        };
        let (Some(url), Some(file_id)) = (ticket["upload_url"].as_str(), ticket["file_id"].as_str()) else {
            return Err(refused("answer without upload_url or file_id".into()));
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| refused(format!("invalid upload URL: {e}")))?;
        if !self.is_file_host(&parsed) {
            return Err(refused(format!(
                "refused to upload to {}: not a Slack file host",
                parsed.host_str().unwrap_or("(no host)")
            )));
        }
        let transport = |e: reqwest::Error| ApiError::Transport {
            service: SERVICE,
            method: "file upload".into(),
            message: e.to_string(),
        };
        let sent = self
            .http
            .post(parsed)
            .timeout(Duration::from_secs(60))
            .body(content.to_vec())
            .send()
            .await
            .map_err(transport)?;
        if !sent.status().is_success() {
            return Err(refused(format!("upload answered HTTP {}", sent.status())));
        }
        let mut done = serde_json::json!({
            "files": [{"id": file_id, "title": filename}],
            "channel_id": channel,
        });
        if let Some(ts) = thread_ts {
            done["thread_ts"] = ts.into();
        }
        if let Some(comment) = comment {
            done["initial_comment"] = comment.into();
        }
        self.call("files.completeUploadExternal", &done).await
    }

    /// `text` as people read it: mentions as `@display-name`, channels as `#name`,
    /// links as Markdown (see [`entities::humanize`]). Names are looked up once per
    /// [`entities::DEFAULT_TTL`]; an id that cannot be looked up, or a private
    /// conversation's, stays an id. A channel link's own label (`<#C1|ops>`) names it in
    /// this text only, when Slack has not named it: whoever wrote the text chose the
    /// label, so it never enters the shared directory (where it would rename the
    /// channel in other runs' text and turn a model's `#ops` into a link to it).
    pub async fn humanize(&self, text: &str) -> String {
        for entity in entities::named(text) {
            if !matches!(entity, entities::Entity::Channel { name: Some(_), .. }) {
                self.name_of(&entity).await;
            }
        }
        entities::humanize(text, |e| match e {
            entities::Entity::User(id) | entities::Entity::Channel { id, .. } => self.directory.get(id),
            _ => None,
        })
    }

    /// The display name of a user (else the real name, else the handle) or the name of
    /// a channel, from the cache or looked up; `None` when Slack does not say.
    pub async fn name_of(&self, entity: &entities::Entity) -> Option<String> {
        let (id, method, param) = match entity {
            entities::Entity::User(id) => (id, "users.info", "user"),
            entities::Entity::Channel { id, .. } => (id, "conversations.info", "channel"),
            _ => return None,
        };
        if param == "channel" && self.made_private.has(id) {
            // Slack's answer may lag the change: its old name must not come back.
            return None;
        }
        if let Some(name) = self.directory.get(id) {
            return Some(name);
        }
        let looked_up = if param == "user" {
            self.get_typed::<SlackApiUsersInfoResponse>(method, &[(param, id.clone())])
                .await
                .map(|r| {
                    let (display, profile_real) = match r.user.profile {
                        Some(p) => (p.display_name, p.real_name),
                        None => (None, None),
                    };
                    [display, r.user.real_name, profile_real, r.user.name]
                        .into_iter()
                        .flatten()
                        .find(|n| !n.is_empty())
                })
        } else {
            // A private conversation's name can be the secret ("#acme-acquisition"):
            // it stays an id, as Slack shows it to those outside.
            self.get_typed::<SlackApiConversationsInfoResponse>(method, &[(param, id.clone())])
                .await
                .map(|r| {
                    let f = &r.channel.flags;
                    let private = [f.is_private, f.is_im, f.is_mpim].contains(&Some(true));
                    r.channel.name.filter(|_| !private)
                })
        };
        let name = match looked_up {
            Ok(name) => name?,
            Err(e) => {
                tracing::debug!(%id, error = %e, "cannot name a Slack entity");
                return None;
            }
        };
        self.directory.put(id, &name);
        Some(name)
    }

    /// `@name` and `#name` for the people and channels this client has named turned
    /// back into Slack mentions (see [`entities::mentionize`]).
    pub fn mentionize(&self, text: &str) -> String {
        entities::mentionize(text, &self.directory)
    }

    /// Joins a public channel (`conversations.join`).
    pub async fn join(&self, channel: &str) -> Result<(), ApiError> {
        self.call("conversations.join", &serde_json::json!({"channel": channel}))
            .await
            .map(|_| ())
    }
}
