//! The forwarder inside a script sandbox with egress (`steward __forward ADDR SOCKET --
//! COMMAND...`): the sandbox's network namespace has only loopback, so the script's
//! `HTTP_PROXY` points at `ADDR` on loopback, and this process relays each connection
//! to steward's egress proxy through `SOCKET`, a Unix socket bind-mounted into the
//! sandbox: the one way out. It starts `COMMAND` and exits with its status (128 + the
//! signal for a killed one, as a shell reports it), so the sandbox's limits read the
//! same with or without egress.

use std::os::unix::process::ExitStatusExt;

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "__forward";

/// Runs the forwarder with `args` (after the subcommand); returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let (Some(addr), Some(socket), Some("--")) = (args.first(), args.get(1), args.get(2).map(String::as_str))
    else {
        eprintln!("usage: steward {SUBCOMMAND} ADDR SOCKET -- COMMAND [ARGS...]");
        return 2;
    };
    let Some((program, rest)) = args[3..].split_first() else {
        eprintln!("steward {SUBCOMMAND}: no command");
        return 2;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("steward {SUBCOMMAND}: {e}");
            return 2;
        }
    };
    let listener = match runtime.block_on(tokio::net::TcpListener::bind(addr.as_str())) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("steward {SUBCOMMAND}: cannot listen on {addr}: {e}");
            return 2;
        }
    };
    let socket = socket.clone();
    // One thread relays every connection; the script runs as a child of this process.
    std::thread::spawn(move || {
        runtime.block_on(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let socket = socket.clone();
                tokio::spawn(async move {
                    if let Ok(mut unix) = tokio::net::UnixStream::connect(&socket).await {
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                    }
                });
            }
        })
    });
    match std::process::Command::new(program).args(rest).status() {
        Ok(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        Err(e) => {
            eprintln!("steward {SUBCOMMAND}: cannot start {program}: {e}");
            127
        }
    }
}
