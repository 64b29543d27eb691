//! Jira: issue and comment webhooks in ([`inbound`]), comments out ([`JiraSource`]).

mod inbound;
mod source;

pub use inbound::*;
pub use source::JiraSource;
