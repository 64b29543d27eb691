//! steward as an MCP server, for a coding agent working in the config repository: the
//! agents, recorded runs (private runs as metadata only, as stored), the event log, an
//! agent's review and draft eval cases from its runs, read from the run store; and,
//! where the command serving it has the config tree (`steward mcp`), its eval suite
//! and `steward improve`. Over stdio (`steward mcp`) and over Streamable HTTP at
//! `/mcp`, behind the inspector's access check.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::config::Config;
use crate::store::Store;

/// The config tree's eval suite, for `run_evals` and `propose_improvement`: given by the
/// command that serves MCP (`steward mcp` runs the config repository's suite; the
/// service's `/mcp` has none).
#[async_trait::async_trait]
pub trait EvalRunner: Send + Sync {
    /// Whether live runs (real model calls, which cost money) are allowed
    /// (`steward mcp --allow-live`).
    fn allows_live(&self) -> bool;

    /// Runs the cases `targets` names (agents, case ids; every case when empty) from
    /// their recordings, or live against the real models, and returns the report
    /// (`steward eval --json`'s shape).
    async fn run(&self, targets: Vec<String>, live: bool, trials: Option<u32>) -> Result<Value, String>;

    /// `steward improve` without `--apply`: proposes a change for a problem and gates it;
    /// returns the report (`steward improve --json`'s shape).
    async fn improve(&self, request: ImproveRequest) -> Result<Value, String>;

    /// Opens a pull request with the accepted improvement `improvements/<agent>/<id>/`
    /// (`steward improve --github-pr`); returns its address.
    async fn open_pr(&self, agent: &str, id: &str) -> Result<String, String>;
}

/// What `propose_improvement` asks.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct ImproveRequest {
    /// The agent to improve.
    pub agent: String,
    /// Which problem of `review_agent` (its rank; default 1, the most runs).
    pub problem: Option<usize>,
    /// Runs to improve from instead of a problem (ids or unique prefixes).
    pub runs: Option<Vec<String>>,
    /// Live trials per case on each side of the gate (default 3).
    pub trials: Option<u32>,
}

/// Why a live tool is refused on a server started without `--allow-live`.
const LIVE_REFUSED: &str = "this calls the real models, which costs money: start the server with `steward mcp --allow-live` to allow it";

#[derive(Clone)]
pub struct StewardMcp {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    evals: Option<Arc<dyn EvalRunner>>,
    router: ToolRouter<StewardMcp>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ListRunsArgs {
    /// Only this agent's runs.
    agent: Option<String>,
    /// Only runs in this status: queued, running, waiting, succeeded, failed, cancelled, interrupted.
    status: Option<String>,
    /// How far back in days (default 7).
    days: Option<u32>,
    /// At most this many (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct GetRunArgs {
    /// The run id, or a unique prefix of it.
    id: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ListEventsArgs {
    /// Only this source: slack, jira, notion, webhook, cron.
    source: Option<String>,
    /// Only this outcome (started, no_agent, filtered, duplicate, ...).
    outcome: Option<String>,
    /// Only events whose outcome names this agent.
    agent: Option<String>,
    /// At most this many (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct RunEvalsArgs {
    /// Agent names or case ids (`helpdesk/vpn`); empty or absent: every case.
    targets: Option<Vec<String>>,
    /// Run against the real models instead of the recordings (only on a server started
    /// with `--allow-live`).
    live: Option<bool>,
    /// Trials per case (live runs; default: each case's own).
    trials: Option<u32>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct DraftArgs {
    /// The run to make a case from: its id, or a unique prefix of it.
    run_id: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ReviewArgs {
    /// The agent to review.
    agent: String,
    /// How far back in days (default 7).
    days: Option<u32>,
}

fn json_result(v: Value) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(v.to_string())]))
}

fn failure(message: impl Into<String>) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::error(vec![ContentBlock::text(message.into())]))
}

fn days_ago(days: Option<u32>) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now() - chrono::Duration::days(i64::from(days.unwrap_or(7).clamp(1, 365)))
}

#[tool_router]
impl StewardMcp {
    pub fn new(store: Arc<dyn Store>, config: Arc<Config>, evals: Option<Arc<dyn EvalRunner>>) -> Self {
        StewardMcp {
            store,
            config,
            evals,
            router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Replays the agents' eval cases from their recordings (no model, no key, no network) and returns each case's pass or failure with reasons, tokens and cost: the check to run after changing a prompt, a skill or an agent. With live: true (servers started with --allow-live), runs them against the real models instead."
    )]
    async fn run_evals(
        &self,
        Parameters(args): Parameters<RunEvalsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(evals) = &self.evals else {
            return failure(
                "run_evals replays the config repository's cases: use `steward mcp` there (the service's /mcp has no suite to run)",
            );
        };
        let live = args.live.unwrap_or(false);
        if live && !evals.allows_live() {
            return failure(format!("live run_evals: {LIVE_REFUSED}"));
        }
        match evals
            .run(args.targets.unwrap_or_default(), live, args.trials)
            .await
        {
            Ok(report) => json_result(report),
            Err(e) => failure(e),
        }
    }

    #[tool(
        description = "steward improve for one of an agent's problems (by its rank in review_agent) or for chosen runs: the runs become eval cases, the improver proposes one change, and the agent's suite plus the new cases run live before and after it. Returns the report (the patch, per-case pass rates before and after, tokens and cost, the decision and why) and writes improvements/<agent>/<id>/ in the config repository; never changes the tree (apply the patch, or run `steward improve --apply`). Calls the real models: only on servers started with --allow-live."
    )]
    async fn propose_improvement(
        &self,
        Parameters(args): Parameters<ImproveRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(evals) = &self.evals else {
            return failure(
                "propose_improvement works on the config repository: use `steward mcp --allow-live` there (the service's /mcp has no tree to change)",
            );
        };
        if !evals.allows_live() {
            return failure(format!("propose_improvement: {LIVE_REFUSED}"));
        }
        if !self.config.agents.contains_key(&args.agent) {
            return failure(format!("no agent '{}'", args.agent));
        }
        match evals.improve(args).await {
            Ok(report) => json_result(report),
            Err(e) => failure(e),
        }
    }

    #[tool(description = "The configured agents: name, description, triggers, model, tools")]
    async fn list_agents(&self) -> Result<CallToolResult, ErrorData> {
        let agents: Vec<Value> = self
            .config
            .agents
            .values()
            .map(|a| {
                json!({
                    "name": a.name, "description": a.description, "file": a.file,
                    "triggers": a.triggers.iter().map(|t| t.kind_name()).collect::<Vec<_>>(),
                    "model": a.models.first().map(|m| format!("{}/{}", m.provider, m.model)),
                    "tools": a.tool_names(),
                })
            })
            .collect();
        json_result(json!({ "agents": agents }))
    }

    #[tool(description = "Recorded runs, most recent first, with their status, termination, tokens and cost")]
    async fn list_runs(
        &self,
        Parameters(args): Parameters<ListRunsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let status = match args.status.as_deref().map(crate::store::RunStatus::parse) {
            Some(None) => {
                return failure(
                    "status: expected queued, running, waiting, succeeded, failed, cancelled or interrupted",
                );
            }
            Some(s) => s,
            None => None,
        };
        let filter = crate::store::RunFilter {
            agent: args.agent,
            status,
            since: Some(days_ago(args.days)),
            top_level: true,
            limit: args.limit.unwrap_or(50).clamp(1, 500),
            ..Default::default()
        };
        match self.store.query_runs(&filter).await {
            Ok(runs) => json_result(json!({ "runs": runs })),
            Err(e) => failure(e.to_string()),
        }
    }

    #[tool(
        description = "One run whole: its trigger, every step, tool calls with arguments and results, the answer, scores and feedback, the token bill (a private run shows metadata only)"
    )]
    async fn get_run(&self, Parameters(args): Parameters<GetRunArgs>) -> Result<CallToolResult, ErrorData> {
        let id = match crate::store::resolve_run_id(self.store.as_ref(), &args.id).await {
            Ok(Ok(id)) => id,
            Ok(Err(why)) => return failure(why),
            Err(e) => return failure(e.to_string()),
        };
        match crate::run::report::RunReport::load(self.store.as_ref(), &id).await {
            Ok(Some(report)) => json_result(serde_json::to_value(&report).unwrap_or_default()),
            Ok(None) => failure(format!("no run with id {id}")),
            Err(e) => failure(e.to_string()),
        }
    }

    #[tool(
        description = "The event log: each delivery's outcome and why (why an agent did or did not answer)"
    )]
    async fn list_events(
        &self,
        Parameters(args): Parameters<ListEventsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = match args
            .outcome
            .as_deref()
            .map(crate::types::event_outcome::OutcomeKind::parse)
        {
            Some(None) => return failure("outcome: not an outcome"),
            Some(o) => o,
            None => None,
        };
        let filter = crate::store::EventFilter {
            source: args.source,
            outcome,
            agent: args.agent,
            since: None,
            limit: args.limit.unwrap_or(50).clamp(1, 500),
        };
        match self.store.list_events(&filter).await {
            Ok(events) => json_result(json!({ "events": events })),
            Err(e) => failure(e.to_string()),
        }
    }

    #[tool(
        description = "An agent's problems over a period, ranked, with example runs and where the fix likely lies"
    )]
    async fn review_agent(
        &self,
        Parameters(args): Parameters<ReviewArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if !self.config.agents.contains_key(&args.agent) {
            return failure(format!("no agent '{}'", args.agent));
        }
        match crate::evals::review::review(self.store.as_ref(), &args.agent, days_ago(args.days)).await {
            Ok(review) => json_result(serde_json::to_value(&review).unwrap_or_default()),
            Err(e) => failure(e.to_string()),
        }
    }

    #[tool(
        description = "A draft eval case from a recorded run: the case file (its trigger, tool results as mocks, observed calls and ending, empty criteria), where it belongs, and the run's feedback and judge explanations to write criteria from. Writes nothing: `steward eval new --from-run ID` writes it with the recording that replays it."
    )]
    async fn draft_eval_case(
        &self,
        Parameters(args): Parameters<DraftArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let draft = match crate::evals::draft::from_run(self.store.as_ref(), &args.run_id).await {
            Ok(d) => d,
            Err(e) => return failure(e.to_string()),
        };
        let scores = match self.store.run_scores(&draft.run_id).await {
            Ok(s) => s,
            Err(e) => return failure(e.to_string()),
        };
        let signals: Vec<Value> = scores
            .iter()
            .map(|s| {
                json!({"kind": s.kind, "criterion": s.criterion, "passed": s.passed,
                       "score": s.score, "explanation": s.explanation})
            })
            .collect();
        json_result(json!({
            "run_id": draft.run_id,
            "agent": draft.agent,
            "path": draft.rel_path.display().to_string(),
            "case_yaml": draft.yaml,
            "model_answers": draft.responses.len(),
            "scores": signals,
            "next": format!(
                "Run `steward eval new --from-run {}` in the config repository to write the case with the recording that replays it; then add criteria from the scores above and `steward eval {}`.",
                draft.run_id, draft.agent
            ),
        }))
    }
}

#[tool_handler(router = self.router.clone())]
impl ServerHandler for StewardMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("steward", env!("CARGO_PKG_VERSION")))
    }
}

/// The `/mcp` route: Streamable HTTP, one session per client.
pub fn http_service(
    store: Arc<dyn Store>,
    config: Arc<Config>,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    StewardMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    // The inspector's host check (`host_guard`) has already refused a foreign `Host`
    // before a request gets here, with steward's own list (its bind address and public
    // URL); rmcp's list of loopback names would refuse steward's public hostname.
    // rmcp reads the body itself, past axum's `DefaultBodyLimit`: the same 1 MB cap as
    // every other route.
    let settings = rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(super::BODY_LIMIT);
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(StewardMcp::new(store.clone(), config.clone(), None)),
        Default::default(),
        settings,
    )
}

/// Serves on stdin and stdout until the client closes them.
pub async fn serve_stdio(
    store: Arc<dyn Store>,
    config: Arc<Config>,
    evals: Arc<dyn EvalRunner>,
) -> anyhow::Result<()> {
    let running = StewardMcp::new(store, config, Some(evals))
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
