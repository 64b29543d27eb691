//! Jira: issue and comment webhooks in ([`inbound`]), comments out ([`JiraSource`]).

mod inbound;
pub mod route;
mod source;

pub use inbound::*;
pub use source::JiraSource;
