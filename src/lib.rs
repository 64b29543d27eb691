//! steward: a company's internal agent. Triggers start agent configurations that run
//! an LLM tool-calling loop (or a script) over one shared tool registry, with every run
//! recorded durably.

pub mod cli;
pub mod config;
pub mod evals;
pub mod files;
pub mod http;
pub mod integrations;
pub mod metrics;
pub mod provider;
pub mod run;
pub mod sandbox;
pub mod server;
pub mod skills;
pub mod store;
pub mod telemetry;
pub mod tokens;
pub mod tools;
pub mod triggers;
pub mod types;
