//! Outbound HTTP: the client for configured services and [`egress::Egress`] for
//! untrusted URLs.

pub mod egress;
pub mod networks;
pub mod proxy;
pub mod retry_after;
pub mod secrets;

pub use egress::{Egress, EgressError, EgressPolicy};

pub use retry_after::{retry_after, retry_after_secs};

use std::time::Duration;

/// Installs ring as the process's rustls crypto provider. reqwest is built without its
/// own provider so the tree has one TLS crypto stack; installing twice is a no-op.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client for tools and providers: rustls, 10 s connect timeout, at most 10 redirects.
/// Per-request timeouts are set by callers.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    client_builder().build()
}

/// [`client`]'s settings, before it is built, for a caller that changes one.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
        .user_agent(concat!("steward/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::limited(10))
}

/// An error and its causes, on one line (`a: b: c`).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
