//! A thread of its own for each script, with a deep stack.
//!
//! Rhai walks nested values recursively (printing, comparing, converting to JSON,
//! dropping), and a script can nest arrays and maps as deep as its item limits allow
//! (10,000 by default, more when arrays and maps alternate): on a blocking pool thread's
//! 2 MiB stack that overflowed and aborted the whole process. Only the pages a script
//! touches are ever committed, so a deep stack costs nothing for ordinary scripts.

/// Stack of a script's thread: room for the deepest nesting the item limits allow,
/// walked by a debug build.
pub const SCRIPT_STACK: usize = 512 * 1024 * 1024;

/// Why a script's thread gave no result.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// The system would not start a thread.
    #[error("could not start a thread for the script: {0}")]
    Spawn(#[from] std::io::Error),
    /// It panicked (its message is not kept: it can quote the value it failed on).
    #[error("the script thread panicked")]
    Panicked,
}

/// Runs `work` on a thread of its own with a [`SCRIPT_STACK`] stack, named `name`, and
/// waits for its result without blocking the async workers. Dropping the future leaves
/// the thread to finish: scripts stop themselves at their deadline or on their run's
/// cancellation (`super::engine`).
pub async fn run<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ThreadError> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(SCRIPT_STACK)
        .spawn(move || {
            let _ = done.send(work());
        })?;
    result.await.map_err(|_| ThreadError::Panicked)
}
