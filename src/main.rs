fn main() -> std::process::ExitCode {
    // Inside a script sandbox with egress: the relay to the proxy, before anything of
    // the CLI starts (no runtime, no settings, no logging).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(steward::sandbox::forward::SUBCOMMAND) {
        let code = steward::sandbox::forward::main(&args[2..]);
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(255));
    }
    steward::cli::main()
}
