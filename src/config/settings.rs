//! Everything steward reads from its environment, read in one place at start
//! ([`Settings::from_env`], after `.env` is loaded). Components get their part of it;
//! none reads the environment itself, so tests build a `Settings` value instead of
//! setting process-wide variables.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The shortest `STEWARD_EVENT_RETENTION`: longer than the replay window of signed Jira
/// and Notion events (`triggers::auth::REPLAY_WINDOW_SECS`, an hour less) plus clock
/// skew, inside which a replayed delivery must still find its dedupe key.
pub const MIN_EVENT_RETENTION: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Largest attachment steward downloads by default (Slack files, Notion files, Jira
/// attachments): 20 MiB.
pub const DEFAULT_ATTACHMENT_CAP: u64 = 20 * 1024 * 1024;

/// Settings from environment variables. Empty values count as unset.
#[derive(Clone, Default)]
pub struct Settings {
    pub openai_api_key: Option<String>,
    pub openai_base_url: Option<String>,
    /// `OPENAI_CACHE_FIELDS=off`: do not send `prompt_cache_key` /
    /// `prompt_cache_retention` to `OPENAI_BASE_URL` (compatible servers that refuse
    /// unknown fields; a 400 naming one turns them off by itself too).
    pub openai_cache_fields_off: bool,
    /// `OPENAI_API_STYLE`: `responses` or `chat_completions`; unset, Responses for
    /// OpenAI's own host and Chat Completions for any other `OPENAI_BASE_URL`.
    pub openai_api_style: Option<ApiStyle>,
    pub anthropic_api_key: Option<String>,
    pub anthropic_base_url: Option<String>,
    pub slack_bot_token: Option<String>,
    /// Socket Mode (`xapp-...`).
    pub slack_app_token: Option<String>,
    pub slack_api_url: Option<String>,
    pub slack_signing_secret: Option<String>,
    pub slack_bot_user_id: Option<String>,
    /// `SLACK_TEAM_IDS`: the workspaces (`T…` ids, comma-separated) whose events and
    /// clicks steward accepts; empty accepts any workspace the signing secret signs for.
    pub slack_team_ids: Vec<String>,
    /// `SLACK_SEARCH_USER_TOKEN`: a user token (`xoxp-`) for Slack search in runs no
    /// person started (no `action_token`); unset, those runs cannot search Slack.
    pub slack_search_user_token: Option<String>,
    pub jira_base_url: Option<String>,
    pub jira_email: Option<String>,
    pub jira_api_token: Option<String>,
    pub jira_webhook_secret: Option<String>,
    pub notion_token: Option<String>,
    pub notion_api_url: Option<String>,
    pub notion_webhook_token: Option<String>,
    pub github_token: Option<String>,
    pub github_api_url: Option<String>,
    /// The GitHub repository (`owner/name`) the config tree lives in:
    /// `steward improve --github-pr` opens its pull requests there.
    pub config_repo: Option<String>,
    /// `STEWARD_HTTP_ALLOW`: internal hosts and networks outbound fetches may reach.
    pub http_allow: String,
    /// `STEWARD_MAX_ATTACHMENT_BYTES`.
    pub max_attachment_bytes: u64,
    /// `STEWARD_PROMPT_BASE_URL`: turns a prompt's repository path into a link.
    pub prompt_base_url: Option<String>,
    /// `STEWARD_SKILL_DIRS`: extra skill folders, colon-separated, relative to the root.
    pub skill_dirs: Vec<PathBuf>,
    /// Where skills' installed requirements are kept (`STEWARD_SKILL_DEPS_DIR`; default
    /// `$XDG_CACHE_HOME/steward/skill-deps`, else `~/.cache/steward/skill-deps`).
    pub skill_deps_dir: PathBuf,
    /// The host's CA bundle (`SSL_CERT_FILE`), the base of the trust bundle sandboxes
    /// with secrets get; the system's when unset.
    pub ssl_cert_file: Option<PathBuf>,
    /// The package index settings passed to the installer (`PIP_INDEX_URL`,
    /// `PIP_EXTRA_INDEX_URL`, `PIP_TRUSTED_HOST`, `UV_INDEX_URL`, `UV_EXTRA_INDEX_URL`,
    /// `NPM_CONFIG_REGISTRY`), and
    /// nothing else of steward's environment.
    pub package_index: Vec<(String, String)>,
    /// `STEWARD_HOOK_<NAME>_TOKEN` values by variable name.
    hook_tokens: BTreeMap<String, String>,
    /// The variables MCP server files name (`bearer_env`, `headers_env`, `env`): read
    /// like the rest, looked up by [`Settings::named_var`].
    named: BTreeMap<String, String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` is added).
    pub otel_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full traces URL, used as is.
    pub otel_traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`, with the
    /// name of the variable it came from (for errors).
    pub otel_headers: Option<(&'static str, String)>,
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, with its
    /// variable's name: `http/protobuf`, `http/json`, or `grpc` in builds with the
    /// `grpc` feature (see `cli::otlp`).
    pub otel_protocol: Option<(&'static str, String)>,
    pub otel_service_name: Option<String>,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: spans waiting to be sent, at most.
    pub otel_bsp_queue: Option<String>,
    pub otel_sampler: Option<String>,
    pub otel_sampler_arg: Option<String>,
    /// `OTEL_SDK_DISABLED=true` turns export off whatever else is set.
    pub otel_disabled: bool,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: spans carry prompts,
    /// tool arguments and results, and answers (never for private runs).
    pub otel_capture_content: bool,
    /// Log lines show `info` spans (from `RUST_LOG` or the command's default; set once
    /// logging is installed, true until then): runs enter their span on every poll only
    /// when they do.
    pub log_spans: bool,
    /// `STEWARD_METRICS_TOKEN`: bearer token `/metrics` requires (open when unset).
    pub metrics_token: Option<String>,
    /// `STEWARD_ADMIN_TOKEN`: bearer token (or login) for the run inspector.
    pub admin_token: Option<String>,
    /// `STEWARD_TRUSTED_USER_HEADER`: a header set by an authenticating proxy
    /// (`X-Forwarded-User`) that names the person; its presence admits the request.
    pub trusted_user_header: Option<String>,
    /// `STEWARD_TRUSTED_PROXIES`: the addresses the trusted user header is taken from
    /// (the authenticating proxy's); required with the header.
    pub trusted_proxies: crate::http::networks::Networks,
    /// `STEWARD_LOG_CHANNEL`: a Slack channel that gets one line per finished run.
    pub log_channel: Option<String>,
    /// `STEWARD_PUBLIC_URL`: where the inspector is reachable, for links from Slack.
    pub public_url: Option<String>,
    /// `STEWARD_DATA_KEY`: seals private-channel input at rest, so a restarted (or
    /// another) process can answer it. Unset: private input lives in memory only.
    pub data_key: Option<crate::types::seal::DataKey>,
    /// `STEWARD_EVENT_RETENTION` (`14d`, `72h`, ...): how long the event log keeps
    /// each delivery's outcome. Unset: 14 days.
    pub event_retention: Option<std::time::Duration>,
    /// `STEWARD_RUN_RETENTION` (`90d`, ...): how long an ended run is kept, with its
    /// steps, files, scores and approvals. Unset: for ever.
    pub run_retention: Option<std::time::Duration>,
}

impl std::fmt::Debug for Settings {
    /// Names which services are configured; never prints a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("openai", &self.openai_api_key.is_some())
            .field("anthropic", &self.anthropic_api_key.is_some())
            .field("slack", &self.slack_bot_token.is_some())
            .field("jira", &self.jira_base_url.is_some())
            .field("notion", &self.notion_token.is_some())
            .field("http_allow", &self.http_allow)
            .field("max_attachment_bytes", &self.max_attachment_bytes)
            .finish_non_exhaustive()
    }
}

/// Which of OpenAI's APIs an endpoint is spoken to with (`OPENAI_API_STYLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiStyle {
    /// `POST /responses`: reasoning carried across tool turns.
    Responses,
    /// `POST /chat/completions`: what compatible servers speak.
    ChatCompletions,
}

impl ApiStyle {
    /// `responses` or `chat_completions`; `None` for anything else.
    pub fn parse(s: &str) -> Option<ApiStyle> {
        match s.trim() {
            "responses" => Some(ApiStyle::Responses),
            "chat_completions" => Some(ApiStyle::ChatCompletions),
            _ => None,
        }
    }

    /// The style for `base_url` when none is set: Responses for OpenAI's own host,
    /// Chat Completions for any other (a compatible server may not have Responses).
    pub fn default_for(base_url: &str) -> ApiStyle {
        let url = reqwest::Url::parse(base_url).ok();
        match url.as_ref().and_then(|u| u.host_str()) {
            Some("api.openai.com") => ApiStyle::Responses,
            _ => ApiStyle::ChatCompletions,
        }
    }
}

/// The shortest `STEWARD_ADMIN_TOKEN` taken: guessing is throttled per address, and a
/// short token would still fall to many addresses.
const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// A setting with a value steward cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}='{value}' is not valid: {expected}")]
pub struct SettingError {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// Retention variable `name`, set to `value`: unset, or a duration of at least
/// [`MIN_EVENT_RETENTION`] (else an error saying it should be `expected`).
fn retention(
    name: &'static str,
    value: Option<&String>,
    expected: &'static str,
) -> Result<Option<std::time::Duration>, SettingError> {
    let Some(v) = value else {
        return Ok(None);
    };
    crate::types::duration::parse_duration(v)
        .ok()
        .filter(|d| *d >= MIN_EVENT_RETENTION)
        .map(Some)
        .ok_or_else(|| SettingError {
            name,
            value: v.clone(),
            expected,
        })
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Settings, SettingError> {
        Settings::from_vars(std::env::vars())
    }

    /// Reads settings from `vars` (name, value pairs).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Settings, SettingError> {
        let vars: BTreeMap<String, String> = vars.into_iter().filter(|(_, v)| !v.trim().is_empty()).collect();
        let get = |name: &str| vars.get(name).cloned();
        let max_attachment_bytes = match vars.get("STEWARD_MAX_ATTACHMENT_BYTES") {
            None => DEFAULT_ATTACHMENT_CAP,
            Some(v) => v.trim().parse().map_err(|_| SettingError {
                name: "STEWARD_MAX_ATTACHMENT_BYTES",
                value: v.clone(),
                expected: "a whole number of bytes",
            })?,
        };
        let skill_dirs = get("STEWARD_SKILL_DIRS")
            .map(|v| {
                v.split(':')
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        let skill_deps_dir = get("STEWARD_SKILL_DEPS_DIR")
            .map(PathBuf::from)
            .or_else(|| get("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("steward/skill-deps")))
            .or_else(|| get("HOME").map(|h| PathBuf::from(h).join(".cache/steward/skill-deps")))
            .unwrap_or_else(|| std::env::temp_dir().join("steward-skill-deps"));
        let package_index = [
            ("PIP_INDEX_URL", get("PIP_INDEX_URL")),
            ("PIP_EXTRA_INDEX_URL", get("PIP_EXTRA_INDEX_URL")),
            ("PIP_TRUSTED_HOST", get("PIP_TRUSTED_HOST")),
            ("UV_INDEX_URL", get("UV_INDEX_URL")),
            ("UV_EXTRA_INDEX_URL", get("UV_EXTRA_INDEX_URL")),
            (
                "NPM_CONFIG_REGISTRY",
                get("NPM_CONFIG_REGISTRY").or_else(|| get("npm_config_registry")),
            ),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect();
        let data_key = match vars.get("STEWARD_DATA_KEY") {
            None => None,
            Some(v) => Some(crate::types::seal::DataKey::parse(v).map_err(|_| SettingError {
                name: "STEWARD_DATA_KEY",
                value: "(hidden)".into(),
                expected: "32 bytes, base64-encoded (openssl rand -base64 32)",
            })?),
        };
        let openai_api_style = match vars.get("OPENAI_API_STYLE") {
            None => None,
            Some(v) => Some(ApiStyle::parse(v).ok_or_else(|| SettingError {
                name: "OPENAI_API_STYLE",
                value: v.clone(),
                expected: "responses or chat_completions",
            })?),
        };
        // Dedupe keys must outlive the 24-hour replay window of signed Jira and Notion
        // events, or a captured delivery could be replayed.
        let event_retention = retention(
            "STEWARD_EVENT_RETENTION",
            vars.get("STEWARD_EVENT_RETENTION"),
            "a duration of at least 24h (the replay window of signed events), such as 14d or 72h",
        )?;
        // A day at least: a run's thread, scores and budget are read back within it.
        let run_retention = retention(
            "STEWARD_RUN_RETENTION",
            vars.get("STEWARD_RUN_RETENTION"),
            "a duration of at least 24h, such as 90d",
        )?;
        let trusted_proxies = match vars.get("STEWARD_TRUSTED_PROXIES") {
            None => Default::default(),
            Some(v) => crate::http::networks::Networks::parse(v).map_err(|_| SettingError {
                name: "STEWARD_TRUSTED_PROXIES",
                value: v.clone(),
                expected: "addresses or networks separated by commas, such as 127.0.0.1 or 10.0.0.0/8",
            })?,
        };
        // A header anyone who reaches steward could set is no sign-in: it is taken only
        // from the proxy that sets it.
        if let Some(header) = vars.get("STEWARD_TRUSTED_USER_HEADER")
            && trusted_proxies.is_empty()
        {
            return Err(SettingError {
                name: "STEWARD_TRUSTED_USER_HEADER",
                value: header.clone(),
                expected: "STEWARD_TRUSTED_PROXIES as well: the addresses of the proxy that sets the header (such as 127.0.0.1 or 10.0.0.0/8), since anyone else who reaches steward could set it too",
            });
        }
        if let Some(token) = vars.get("STEWARD_ADMIN_TOKEN")
            && token.trim().chars().count() < MIN_ADMIN_TOKEN_CHARS
        {
            return Err(SettingError {
                name: "STEWARD_ADMIN_TOKEN",
                value: "(hidden)".into(),
                expected: "at least 16 characters, since it opens every run's record (make one with `openssl rand -hex 32`)",
            });
        }
        let hook_tokens: BTreeMap<String, String> = vars
            .iter()
            .filter(|(k, _)| k.starts_with("STEWARD_HOOK_") && k.ends_with("_TOKEN"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // A hook's token is all that stands between anyone who can reach steward and
        // a run with their payload; the hook's name is in the config repository.
        if let Some((name, _)) = hook_tokens
            .iter()
            .find(|(_, v)| v.trim().chars().count() < MIN_ADMIN_TOKEN_CHARS)
        {
            return Err(SettingError {
                name: "STEWARD_HOOK_<NAME>_TOKEN",
                value: format!("{name} (hidden)"),
                expected: "at least 16 characters, since it alone lets a caller start the hook's agents (make one with `openssl rand -hex 32`)",
            });
        }
        Ok(Settings {
            event_retention,
            run_retention,
            named: vars.clone(),
            openai_api_key: get("OPENAI_API_KEY"),
            openai_base_url: get("OPENAI_BASE_URL"),
            openai_cache_fields_off: get("OPENAI_CACHE_FIELDS").is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "off" | "false" | "0" | "no"
                )
            }),
            openai_api_style,
            anthropic_api_key: get("ANTHROPIC_API_KEY"),
            anthropic_base_url: get("ANTHROPIC_BASE_URL"),
            slack_bot_token: get("SLACK_BOT_TOKEN"),
            slack_app_token: get("SLACK_APP_TOKEN"),
            slack_api_url: get("SLACK_API_URL"),
            slack_signing_secret: get("SLACK_SIGNING_SECRET"),
            slack_bot_user_id: get("SLACK_BOT_USER_ID"),
            slack_team_ids: get("SLACK_TEAM_IDS")
                .map(|v| {
                    v.split(',')
                        .map(|t| t.trim().to_string())
                        .filter(|t| !t.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            slack_search_user_token: get("SLACK_SEARCH_USER_TOKEN"),
            jira_base_url: get("JIRA_BASE_URL"),
            jira_email: get("JIRA_EMAIL"),
            jira_api_token: get("JIRA_API_TOKEN"),
            jira_webhook_secret: get("JIRA_WEBHOOK_SECRET"),
            notion_token: get("NOTION_TOKEN"),
            notion_api_url: get("NOTION_API_URL"),
            notion_webhook_token: get("NOTION_WEBHOOK_TOKEN"),
            github_token: get("GITHUB_TOKEN"),
            github_api_url: get("GITHUB_API_URL"),
            config_repo: get("STEWARD_CONFIG_REPO"),
            http_allow: get("STEWARD_HTTP_ALLOW").unwrap_or_default(),
            max_attachment_bytes,
            prompt_base_url: get("STEWARD_PROMPT_BASE_URL"),
            skill_dirs,
            skill_deps_dir,
            ssl_cert_file: get("SSL_CERT_FILE").map(PathBuf::from),
            package_index,
            hook_tokens,
            otel_endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            otel_traces_endpoint: get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            otel_headers: (get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", v)))
            .or_else(|| get("OTEL_EXPORTER_OTLP_HEADERS").map(|v| ("OTEL_EXPORTER_OTLP_HEADERS", v))),
            otel_protocol: (get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v)))
            .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL").map(|v| ("OTEL_EXPORTER_OTLP_PROTOCOL", v))),
            otel_service_name: get("OTEL_SERVICE_NAME"),
            otel_bsp_queue: get("OTEL_BSP_MAX_QUEUE_SIZE"),
            otel_sampler: get("OTEL_TRACES_SAMPLER"),
            otel_sampler_arg: get("OTEL_TRACES_SAMPLER_ARG"),
            otel_disabled: is_true(get("OTEL_SDK_DISABLED")),
            otel_capture_content: is_true(get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")),
            log_spans: true,
            metrics_token: get("STEWARD_METRICS_TOKEN"),
            admin_token: get("STEWARD_ADMIN_TOKEN"),
            trusted_user_header: get("STEWARD_TRUSTED_USER_HEADER"),
            trusted_proxies,
            log_channel: get("STEWARD_LOG_CHANNEL"),
            public_url: get("STEWARD_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_string()),
            data_key,
        })
    }

    /// A variable a config file names by its name (an MCP server's token); `None` when
    /// unset or empty.
    pub fn named_var(&self, name: &str) -> Option<String> {
        self.named.get(name).cloned()
    }

    /// The token of generic hook `name` (`STEWARD_HOOK_<NAME>_TOKEN`).
    pub fn hook_token(&self, name: &str) -> Option<&str> {
        self.hook_tokens.get(&hook_token_var(name)).map(String::as_str)
    }
}

fn is_true(value: Option<String>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The environment variable holding a generic hook's token (name upper-cased, `-` → `_`).
pub fn hook_token_var(name: &str) -> String {
    format!(
        "STEWARD_HOOK_{}_TOKEN",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_known_variables_and_hook_tokens() {
        let s = Settings::from_vars(vars(&[
            ("SLACK_BOT_TOKEN", "xoxb-1"),
            ("NOTION_TOKEN", " "),
            ("STEWARD_HOOK_ZAPIER_INTAKE_TOKEN", "t0k-0123456789abcdef"),
            ("STEWARD_SKILL_DIRS", "a:b"),
        ]))
        .unwrap();
        assert_eq!(s.slack_bot_token.as_deref(), Some("xoxb-1"));
        assert_eq!(s.notion_token, None, "blank counts as unset");
        assert_eq!(s.hook_token("zapier-intake"), Some("t0k-0123456789abcdef"));
        // A short hook token could be guessed: refused at start, its value not shown.
        let short = Settings::from_vars(vars(&[("STEWARD_HOOK_ZAPIER_INTAKE_TOKEN", "t0k")])).unwrap_err();
        assert!(
            short
                .to_string()
                .contains("STEWARD_HOOK_ZAPIER_INTAKE_TOKEN (hidden)"),
            "{short}"
        );
        assert!(!short.to_string().contains("t0k'"), "{short}");
        assert_eq!(s.skill_dirs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(s.max_attachment_bytes, DEFAULT_ATTACHMENT_CAP);
        assert!(!format!("{s:?}").contains("xoxb-1"), "Debug never shows secrets");
    }

    #[test]
    fn a_bad_number_is_an_error_not_a_silent_default() {
        let e = Settings::from_vars(vars(&[("STEWARD_MAX_ATTACHMENT_BYTES", "20MB")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "STEWARD_MAX_ATTACHMENT_BYTES='20MB' is not valid: a whole number of bytes"
        );
    }

    #[test]
    fn run_retention_is_unset_by_default_and_a_day_at_least() {
        assert_eq!(Settings::from_vars(vars(&[])).unwrap().run_retention, None);
        let s = Settings::from_vars(vars(&[("STEWARD_RUN_RETENTION", "90d")])).unwrap();
        assert_eq!(
            s.run_retention,
            Some(std::time::Duration::from_secs(90 * 24 * 3600))
        );
        let e = Settings::from_vars(vars(&[("STEWARD_RUN_RETENTION", "1h")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "STEWARD_RUN_RETENTION='1h' is not valid: a duration of at least 24h, such as 90d"
        );
    }

    #[test]
    fn event_retention_is_at_least_the_replay_window() {
        for short in ["0s", "23h", "5m"] {
            let e = Settings::from_vars(vars(&[("STEWARD_EVENT_RETENTION", short)])).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "STEWARD_EVENT_RETENTION='{short}' is not valid: a duration of at least 24h (the replay window of signed events), such as 14d or 72h"
                )
            );
        }
        let s = Settings::from_vars(vars(&[("STEWARD_EVENT_RETENTION", "24h")])).unwrap();
        assert_eq!(s.event_retention, Some(MIN_EVENT_RETENTION));
    }

    #[test]
    fn a_trusted_header_needs_its_proxies_and_an_admin_token_its_length() {
        let header = ("STEWARD_TRUSTED_USER_HEADER", "X-Forwarded-User");
        let e = Settings::from_vars(vars(&[header])).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "STEWARD_TRUSTED_USER_HEADER='X-Forwarded-User' is not valid: STEWARD_TRUSTED_PROXIES as well"
            ),
            "{e}"
        );
        let e = Settings::from_vars(vars(&[header, ("STEWARD_TRUSTED_PROXIES", "oauth2-proxy")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("STEWARD_TRUSTED_PROXIES='oauth2-proxy' is not valid"),
            "{e}"
        );
        let s = Settings::from_vars(vars(&[
            header,
            ("STEWARD_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1"),
        ]))
        .unwrap();
        assert!(s.trusted_proxies.contains("10.2.3.4".parse().unwrap()));
        let e = Settings::from_vars(vars(&[("STEWARD_ADMIN_TOKEN", "hunter2")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("at least 16 characters") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(Settings::from_vars(vars(&[("STEWARD_ADMIN_TOKEN", "0123456789abcdef")])).is_ok());
    }
}
