//! Event sources, one folder each: authenticating and normalizing Slack, Jira, Notion,
//! generic webhook and cron events into [`TriggerEvent`]s, routing them to agents, and
//! (through [`Source`]) replying where they came from and fetching their files.

pub mod auth;
pub mod cron;
pub mod event;
pub mod explain;
pub mod filter_input;
pub mod jira;
pub mod notion;
pub mod router;
pub mod slack;
pub mod source;
pub mod webhook;
pub use event::{Origin, TriggerEvent};
pub use source::{Source, Sources};
