//! The tree's evals and improvements as the service runs them: `steward mcp`'s
//! `run_evals` and `propose_improvement`, and digests' "Propose a fix" in `steward serve`.

use std::path::PathBuf;
use std::sync::Arc;

use super::eval::run_report;
use crate::config::Settings;
use crate::evals::suite::EvalMode;

/// `run_evals` and `propose_improvement` for `steward mcp`: the tree's suite, replayed
/// (or live, when the server was started with `--allow-live`), and `steward improve`.
pub(super) struct Replayer {
    pub root: PathBuf,
    pub env: Settings,
    pub allow_live: bool,
    /// The store `steward improve` reads runs from, opened again on the improve
    /// runtime.
    pub database_url: String,
    pub database_url_from: &'static str,
}

/// Runs `work` on a current-thread runtime of its own on a blocking thread: the suite's
/// futures hold the MCP connector's non-`Sync` parts (unused on a replay, but in their
/// type), so they cannot be tasks of the server's runtime.
async fn on_own_runtime<T: Send + 'static>(
    work: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<T>>>>
    + Send
    + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the eval runtime: {e}"))?;
        runtime.block_on(work()).map_err(|e| format!("{e:#}"))
    })
    .await
    .map_err(|e| format!("the eval run stopped: {e}"))?
}

#[async_trait::async_trait]
impl crate::server::mcp::EvalRunner for Replayer {
    fn allows_live(&self) -> bool {
        self.allow_live
    }

    async fn run(
        &self,
        targets: Vec<String>,
        live: bool,
        trials: Option<u32>,
    ) -> Result<serde_json::Value, String> {
        let (root, env) = (self.root.clone(), self.env.clone());
        let mode = if live { EvalMode::Live } else { EvalMode::Replay };
        let report = on_own_runtime(move || {
            Box::pin(async move { run_report(&root, &env, mode, &targets, trials, false).await })
        })
        .await?;
        serde_json::from_str(&report.json()).map_err(|e| e.to_string())
    }

    async fn improve(
        &self,
        request: crate::server::mcp::ImproveRequest,
    ) -> Result<serde_json::Value, String> {
        let (root, env) = (self.root.clone(), self.env.clone());
        let (url, from) = (self.database_url.clone(), self.database_url_from);
        let improvement = on_own_runtime(move || {
            Box::pin(async move {
                let store = super::open_existing_store(&url, from).await?;
                let mut args = super::improve::ImproveArgs::new(&request.agent);
                args.problem = request.problem;
                args.runs = request.runs.unwrap_or_default();
                if let Some(t) = request.trials {
                    args.trials = t;
                }
                let proposed =
                    super::improve::propose(&root, &env, store.as_ref(), Arc::default(), &args).await?;
                Ok(proposed.improvement)
            })
        })
        .await?;
        serde_json::to_value(&improvement).map_err(|e| e.to_string())
    }

    async fn open_pr(&self, agent: &str, id: &str) -> Result<String, String> {
        let (root, env) = (self.root.clone(), self.env.clone());
        let (agent, id) = (agent.to_string(), id.to_string());
        on_own_runtime(move || {
            Box::pin(async move {
                let repo = env.config_repo.clone().ok_or_else(|| {
                    anyhow::anyhow!(
                        "STEWARD_CONFIG_REPO (owner/name) is not set: steward does not know where to open it"
                    )
                })?;
                let proposed = super::improve::load(&root, &agent, &id)?;
                super::improve::github_pr(&root, &env, &repo, &proposed).await
            })
        })
        .await
    }
}
