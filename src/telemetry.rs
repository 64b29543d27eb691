//! Logging and tracing setup. Spans are created throughout the code (run, model call,
//! tool call); this installs the subscriber that prints them.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs a stderr subscriber filtered by `RUST_LOG`, else by `default` (such as
/// `warn,steward=info`). `json` switches to one JSON object per line.
pub fn init(json: bool, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.compact().try_init()
    };
}
