//! Clients for the services steward talks to. Every base URL is overridable so tests
//! run against fake servers on 127.0.0.1.

pub mod adf;
pub mod adf_text;
pub mod event_outcome;
pub mod github;
pub mod jira;
pub mod mcp;
pub mod notion;
pub mod own_id;
pub mod search;
pub mod slack;
pub mod tool_args;
pub mod tools;

use crate::tools::ToolRegistry;

use crate::config::Settings;
pub use crate::config::settings::DEFAULT_ATTACHMENT_CAP;

/// The service clients of one process, built once from the environment and shared by
/// tools, replies, prompt fetching and the server. A client is `None` when its service
/// is not configured.
#[derive(Clone)]
pub struct Clients {
    pub slack: Option<slack::SlackClient>,
    pub jira: Option<jira::JiraClient>,
    pub notion: Option<notion::NotionClient>,
    pub github: github::GithubClient,
    /// Slack with `SLACK_SEARCH_USER_TOKEN`, for searches no person asked for.
    pub slack_search_user: Option<slack::SlackClient>,
}

impl Clients {
    /// Clients for the services `settings` configure (`SLACK_BOT_TOKEN`, `JIRA_*`,
    /// `NOTION_TOKEN`, `GITHUB_TOKEN` and their `*_API_URL` overrides).
    pub fn from_settings(http: reqwest::Client, settings: &Settings) -> Clients {
        let slack = slack::SlackClient::from_settings(http.clone(), settings);
        Clients {
            slack_search_user: match (&slack, &settings.slack_search_user_token) {
                (Some(s), Some(token)) => Some(s.with_token(token)),
                _ => None,
            },
            slack,
            jira: jira::JiraClient::from_settings(http.clone(), settings),
            notion: notion::NotionClient::from_settings(http.clone(), settings),
            github: github::GithubClient::from_settings(http, settings),
        }
    }
}

/// The tools that ship with steward: the core tools plus the integration tools over
/// `clients`.
pub fn builtin_tools(clients: &Clients, egress: crate::http::Egress) -> ToolRegistry {
    let mut r = ToolRegistry::core(egress);
    for tool in tools::integration_tools_with(
        clients.slack.clone(),
        clients.github.clone(),
        clients.jira.clone(),
    ) {
        r.register(tool);
    }
    for tool in tools::notion_tools(clients.notion.clone()) {
        r.register(tool);
    }
    for tool in search::search_tools(clients) {
        r.register(tool);
    }
    r.register(std::sync::Arc::new(event_outcome::EventOutcomeTool::new(
        clients.slack.clone(),
    )));
    r
}

/// A failed call to an integration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The service answered with an error (Slack's `ok: false`, a 4xx).
    #[error("{service} {method}: {message}")]
    Api {
        service: &'static str,
        method: String,
        message: String,
    },
    #[error("{service} {method}: rate limited, retry after {retry_after_secs}s")]
    RateLimited {
        service: &'static str,
        method: String,
        retry_after_secs: u64,
    },
    /// The service could not be reached, failed (a 5xx) or sent an unreadable answer.
    #[error("{service} {method}: {message}")]
    Transport {
        service: &'static str,
        method: String,
        message: String,
    },
    #[error("{0} is not configured")]
    NotConfigured(&'static str),
    /// An id that cannot be one segment of the service's API path (nothing was sent).
    #[error("{service}: {value:?} is not {what}")]
    BadId {
        service: &'static str,
        what: &'static str,
        value: String,
    },
}

impl ApiError {
    /// Whether asking again later may succeed: a rate limit, or a service that could not
    /// be reached or failed. A refusal, a bad id or a missing setting stays as it is.
    pub fn is_transient(&self) -> bool {
        matches!(self, ApiError::RateLimited { .. } | ApiError::Transport { .. })
    }
}

/// `value` when it can be one segment of an API path: ASCII letters, digits, `-`, `_`
/// and `.`, at most 128 bytes, never `.` or `..`. Ids come from models and payloads;
/// one holding `/`, `?` or `..` would reach another endpoint of the same API with
/// steward's credentials (`../databases/{id}` turning a page update into a database
/// update), so it is refused before anything is sent.
pub(crate) fn path_id<'a>(
    service: &'static str,
    what: &'static str,
    value: &'a str,
) -> Result<&'a str, ApiError> {
    let fits = !value.is_empty()
        && value.len() <= 128
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if fits {
        Ok(value)
    } else {
        Err(ApiError::BadId {
            service,
            what,
            value: value.chars().take(80).collect(),
        })
    }
}

/// Sends a request and decodes the JSON answer (any status); transport failures and
/// unreadable bodies become [`ApiError::Transport`]. Callers interpret the status.
pub(crate) async fn send_json(
    service: &'static str,
    what: &str,
    request: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, serde_json::Value), ApiError> {
    let transport = |e: reqwest::Error| ApiError::Transport {
        service,
        method: what.to_string(),
        message: e.to_string(),
    };
    let resp = crate::telemetry::propagation::outgoing(request)
        .send()
        .await
        .map_err(transport)?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let mut resp = resp;
    let bytes = body_capped(&mut resp, MAX_API_ANSWER)
        .await
        .map_err(|message| ApiError::Transport {
            service,
            method: what.to_string(),
            message: message.unwrap_or_else(|| format!("the answer is larger than {MAX_API_ANSWER} bytes")),
        })?;
    let value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Ok((status, headers, value))
}

/// Most bytes of one API answer (a page of messages, issues or blocks is far less): a
/// misbehaving server or proxy cannot fill steward's memory within the timeout.
pub const MAX_API_ANSWER: u64 = 32 * 1024 * 1024;

/// `resp`'s body, read a chunk at a time and refused past `cap` bytes: `Err(None)`
/// past the cap, `Err(Some(reason))` when reading failed.
async fn body_capped(resp: &mut reqwest::Response, cap: u64) -> Result<Vec<u8>, Option<String>> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| Some(e.to_string()))? {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Maps a non-2xx answer: a rate limit becomes [`ApiError::RateLimited`] (waiting the
/// server's `Retry-After`, else `default_wait` seconds), a 5xx [`ApiError::Transport`];
/// anything else becomes [`ApiError::Api`] with the service's own message, or the
/// status.
pub(crate) fn failure(
    service: &'static str,
    what: String,
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    rate_limited: bool,
    default_wait: u64,
    message: Option<String>,
) -> ApiError {
    if rate_limited {
        let wait = crate::http::retry_after_secs(headers, default_wait);
        return ApiError::RateLimited {
            service,
            method: what,
            retry_after_secs: wait,
        };
    }
    let message = message.unwrap_or_else(|| format!("HTTP {status}"));
    // The service failed, not the request: asking again later may succeed.
    if status.is_server_error() {
        return ApiError::Transport {
            service,
            method: what,
            message,
        };
    }
    ApiError::Api {
        service,
        method: what,
        message,
    }
}

/// Sends a download request and reads the body, refusing more than `cap` bytes (checked
/// while streaming, so a lying or missing size cannot fill memory). The request carries
/// no trace context unless the caller added it: a download can go to a host the text's
/// author chose (a Notion `external` file), which must not learn steward's trace ids.
pub(crate) async fn download_capped(
    service: &'static str,
    what: &str,
    request: reqwest::RequestBuilder,
    cap: u64,
) -> Result<Vec<u8>, ApiError> {
    let err = |message: String| ApiError::Transport {
        service,
        method: what.to_string(),
        message,
    };
    let mut resp = request
        .send()
        .await
        .map_err(|e| match crate::http::egress::refusal(&e) {
            Some(refused) => err(refused.to_string()),
            None => err(e.to_string()),
        })?;
    if !resp.status().is_success() {
        return Err(ApiError::Api {
            service,
            method: what.to_string(),
            message: format!("HTTP {}", resp.status()),
        });
    }
    body_capped(&mut resp, cap).await.map_err(|reason| {
        err(reason.unwrap_or_else(|| format!("the file is larger than the {cap}-byte attachment cap")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_past_its_cap_is_refused_as_it_streams() {
        let app = axum::Router::new().route("/big", axum::routing::get(|| async { "x".repeat(100_000) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let get = || async {
            crate::http::client()
                .unwrap()
                .get(format!("http://{addr}/big"))
                .send()
                .await
                .unwrap()
        };
        assert_eq!(body_capped(&mut get().await, 10_000).await, Err(None));
        assert_eq!(
            body_capped(&mut get().await, 100_000).await.unwrap().len(),
            100_000
        );
        server.abort();
    }

    #[test]
    fn path_ids_are_single_segments() {
        for ok in [
            "OPS-7",
            "10001",
            "367cba44-b6f3-4c92-81e7-6a2e9659efd4",
            "153104cd477e809d8dc4ff2d96ae3090",
            "my.repo_2",
        ] {
            assert_eq!(path_id("x", "an id", ok).unwrap(), ok);
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../databases/x",
            "p1?filter=1",
            "a%2Fb",
            "a b",
            "é",
            &"a".repeat(129),
        ] {
            let err = path_id("notion", "a Notion id", bad).unwrap_err().to_string();
            assert!(
                err.starts_with("notion: ") && err.ends_with(" is not a Notion id"),
                "{err}"
            );
        }
    }

    #[test]
    fn every_builtin_tool_takes_a_closed_object_generated_from_its_args() {
        let http = crate::http::client().unwrap();
        let tools = builtin_tools(
            &Clients::from_settings(http, &Settings::default()),
            Default::default(),
        );
        assert!(tools.names().len() > 20);
        for name in tools.names() {
            let tool = tools.get(&name).unwrap();
            let schema = &tool.spec().parameters;
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
            let text = schema.to_string();
            assert!(
                !text.contains("$ref") && !text.contains("$schema"),
                "{name}: {text}"
            );
            for key in schema["required"].as_array().into_iter().flatten() {
                let key = key.as_str().unwrap();
                assert!(schema["properties"].get(key).is_some(), "{name}: {key}");
            }
        }
    }
}
