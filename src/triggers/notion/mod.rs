//! Notion: webhook events in ([`inbound`]), comments and page files out
//! ([`NotionSource`]).

mod inbound;
pub mod route;
mod source;

pub use inbound::*;
pub use source::NotionSource;
