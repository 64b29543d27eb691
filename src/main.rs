fn main() -> std::process::ExitCode {
    // Inside a script sandbox with egress: the relay to the proxy, before anything of
    // the CLI starts (no runtime, no settings, no logging).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(steward::sandbox::forward::SUBCOMMAND) {
        let code = steward::sandbox::forward::main(&args[2..]);
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(255));
    }
    // A panic's message can quote the value it failed on (a slice of a private
    // message): where it happened, and a backtrace when RUST_BACKTRACE asks, never what.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let at = info.location().map_or_else(
            || "an unknown place".to_string(),
            |l| format!("{}:{}", l.file(), l.line()),
        );
        let trace = std::backtrace::Backtrace::capture();
        let trace = match trace.status() {
            std::backtrace::BacktraceStatus::Captured => format!("\n{trace}"),
            _ => String::new(),
        };
        eprintln!(
            "steward: thread '{}' panicked at {at} (its message is not shown: it may quote private text){trace}",
            thread.name().unwrap_or("unnamed"),
        );
    }));
    steward::cli::main()
}
