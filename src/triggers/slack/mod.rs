//! Slack: Events API and Socket Mode payloads in ([`inbound`]), threaded replies and
//! shared files out ([`SlackSource`]).

mod inbound;
pub mod route;
mod source;
pub mod status;
pub mod stream;
pub mod thread;

pub use inbound::*;
pub use source::SlackSource;
