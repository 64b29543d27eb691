//! Notion: webhook events in ([`inbound`]), comments and page files out
//! ([`NotionSource`]).

mod inbound;
mod source;

pub use inbound::*;
pub use source::NotionSource;
