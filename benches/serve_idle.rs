//! Idle memory of `steward serve`: resident set size with OTLP export off and on (the
//! OpenTelemetry SDK's batch processor and exporter, a collector on 127.0.0.1 that
//! answers every export), after start-up has settled and after a few minutes' worth of
//! empty export rounds would have run.
//!
//! `cargo bench --bench serve_idle`: starts the release binary on the shipped config
//! tree (no keys), samples `VmRSS` from `/proc/<pid>/status` and prints the medians.
//! Goal (issue #39): at most 40 MB with export on.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Runs each configuration this many times; medians are reported.
const ROUNDS: usize = 5;
/// How long `serve` idles before sampling.
const SETTLE: Duration = Duration::from_secs(6);

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A collector that answers every request with 200 and an empty body, on its own thread.
fn collector() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = vec![0u8; 1 << 16];
                // One request per connection is enough for an idle exporter.
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            });
        }
    });
    format!("http://{addr}")
}

fn start(db: &Path, otlp: Option<&str>) -> (Child, String) {
    let addr = free_addr();
    let mut command = Command::new(env!("CARGO_BIN_EXE_steward"));
    command
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", env!("CARGO_MANIFEST_DIR"))
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("RUST_LOG", "error")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(url) = otlp {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    }
    (command.spawn().unwrap(), addr)
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn wait_up(addr: &str) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("steward serve did not start on {addr}");
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let collector = collector();
    let dir = tempfile::tempdir().unwrap();
    for (label, otlp) in [("export off", None), ("export on", Some(collector.as_str()))] {
        let mut samples = Vec::new();
        for round in 0..ROUNDS {
            let db = dir.path().join(format!("idle-{round}-{}.db", otlp.is_some()));
            let (mut child, addr) = start(&db, otlp);
            wait_up(&addr);
            std::thread::sleep(SETTLE);
            samples.push(rss_kb(child.id()));
            let _ = child.kill();
            let _ = child.wait();
        }
        println!(
            "idle RSS, {label}: median {:.1} MB (samples {:?} kB)",
            median(samples.clone()) as f64 / 1024.0,
            samples
        );
    }
}
