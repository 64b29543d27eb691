//! Evals: cases that run an agent on a recorded trigger with mocked tools and check
//! what it did (objective expectations and judge criteria), replaying model calls from
//! cassettes so CI is deterministic, or recording and running live; and reports for
//! people and CI (table, JSON, JUnit, comparison with an earlier result).

pub mod ask;
pub mod case;
pub mod cassette;
pub mod digest;
pub mod draft;
pub mod expect;
pub mod improve;
pub mod judge;
pub mod mocks;
pub mod post_run;
pub mod report;
pub mod review;
pub mod suite;

pub use case::Case;

/// Where MCP cassettes live under the config root: one file per server
/// (`evals/mcp/<server>.json`), shared by every case that uses its tools.
pub const MCP_CASSETTES: &str = "evals/mcp";
pub use suite::{CaseResult, EvalMode, Suite};
