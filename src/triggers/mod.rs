//! Event sources: authenticating and normalizing Slack, Jira, Notion, generic webhook and
//! cron events into [`crate::run::TriggerEvent`], and routing them to agents.

pub mod auth;
pub mod cron;
pub mod event;
pub mod jira;
pub mod notion;
pub mod router;
pub mod slack;
pub use event::{Origin, TriggerEvent};
