//! The one way to assemble a [`Runner`]: the CLI, tests and benchmarks name only the
//! parts they change.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Runner;
use crate::config::AgentConfig;
use crate::files::extractor::Extractor;
use crate::provider::ProviderSet;
use crate::provider::retry::RetryPolicy;
use crate::skills::SkillSet;
use crate::store::Store;
use crate::tokens::TokenCounter;
use crate::tools::ToolRegistry;
use crate::triggers::Sources;

/// Builds a [`Runner`]. Defaults: no providers, no tools, real (not mocked) tools, a
/// fresh token counter, no subagents or skills, no reply outputs, the in-process
/// extractor limits.
pub struct RunnerBuilder {
    runner: Runner,
}

impl Runner {
    /// Starts a runner whose runs are recorded in `store`.
    pub fn builder(store: Arc<dyn Store>) -> RunnerBuilder {
        RunnerBuilder {
            runner: Runner {
                store,
                providers: ProviderSet::new(RetryPolicy::default()),
                tools: Arc::new(ToolRegistry::new()),
                mock_tools: false,
                tokens: Arc::new(TokenCounter::new()),
                subagents: Arc::default(),
                skills: Arc::default(),
                sources: Arc::default(),
                prompts: Arc::default(),
                extractor: Arc::default(),
                metrics: Arc::default(),
                capture_content: false,
                interrupt: CancellationToken::new(),
                data_key: None,
                instrument_runs: true,
            },
        }
    }
}

impl RunnerBuilder {
    pub fn providers(mut self, providers: ProviderSet) -> Self {
        self.runner.providers = providers;
        self
    }

    /// Seals a private run's checkpoint while it waits for an approval.
    pub fn data_key(mut self, key: Option<crate::types::seal::DataKey>) -> Self {
        self.runner.data_key = key;
        self
    }

    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.runner.tools = Arc::new(tools);
        self
    }

    /// Every tool answers with its mock instead of its real implementation.
    pub fn mock_tools(mut self, mock: bool) -> Self {
        self.runner.mock_tools = mock;
        self
    }

    /// Shares one token counter (its tables take a while to build).
    pub fn tokens(mut self, tokens: Arc<TokenCounter>) -> Self {
        self.runner.tokens = tokens;
        self
    }

    pub fn subagents(mut self, subagents: BTreeMap<String, Arc<AgentConfig>>) -> Self {
        self.runner.subagents = Arc::new(subagents);
        self
    }

    pub fn skills(mut self, skills: SkillSet) -> Self {
        self.runner.skills = Arc::new(skills);
        self
    }

    /// Where final answers are posted (Slack, Jira, Notion), trigger files fetched
    /// from, and Notion-hosted prompts read from.
    pub fn sources(mut self, sources: Sources) -> Self {
        self.runner.sources = Arc::new(sources);
        self
    }

    pub fn extractor(mut self, extractor: Extractor) -> Self {
        self.runner.extractor = Arc::new(extractor);
        self
    }

    /// Counts runs into `metrics` (shared with the server's `/metrics`).
    pub fn metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.runner.metrics = metrics;
        self
    }

    /// Whether top-level runs enter their span on every poll (default: yes). Turn it off
    /// when log lines do not show spans ([`crate::telemetry::Telemetry::logs_spans`]).
    pub fn instrument_runs(mut self, on: bool) -> Self {
        self.runner.instrument_runs = on;
        self
    }

    /// Records message content on spans for runs that are not private.
    pub fn capture_content(mut self, on: bool) -> Self {
        self.runner.capture_content = on;
        self
    }

    pub fn build(self) -> Runner {
        self.runner
    }
}
