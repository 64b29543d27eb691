//! The skill scripts' egress proxy (`sandbox/proxy.rs`), measured from the host side of
//! its Unix socket against an origin on 127.0.0.1, so only the proxy's own work counts:
//!
//! - added latency of a proxied HTTP request (absolute-form GET, a fresh connection
//!   each) against the same request sent to the origin directly, 500 each, interleaved;
//! - a tunnelled request: CONNECT, then the same GET inside the tunnel (goal: under
//!   0.5 ms added);
//! - 100 concurrent proxied requests, counting errors (goal: none);
//! - sandbox start with egress configured (the forwarder, the socket mount) against
//!   without, 30 runs each (goal: within 10 ms).
//!
//! `cargo bench --bench egress_proxy`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use steward::http::EgressPolicy;
use steward::http::proxy::{EgressHub, EgressRules, Proxy};
use steward::sandbox::process::{Egress, Job, ProcessLimits, ProcessSandbox, find_program};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const N: usize = 500;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn read_all(mut s: impl AsyncReadExt + Unpin) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    out
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().route("/hello", axum::routing::get(|| async { "hello" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let rules = EgressRules {
        allow: vec![format!("127.0.0.1:{port}")],
        within: None,
        max_requests: u32::MAX,
        max_bytes: u64::MAX,
        secrets: Vec::new(),
    };
    let hub = Arc::new(EgressHub::new(EgressPolicy::parse("127.0.0.1").unwrap()));
    let proxy = Proxy::start(&socket, rules, hub, None).unwrap();
    let get = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let proxied =
        format!("GET http://127.0.0.1:{port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let connect = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let (mut direct, mut via, mut tunnel) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..N {
        let t = Instant::now();
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(get.as_bytes()).await.unwrap();
        assert!(read_all(&mut s).await.ends_with(b"hello"));
        direct.push(t.elapsed());

        let t = Instant::now();
        let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
        s.write_all(proxied.as_bytes()).await.unwrap();
        assert!(read_all(&mut s).await.ends_with(b"hello"));
        via.push(t.elapsed());

        let t = Instant::now();
        let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
        s.write_all(connect.as_bytes()).await.unwrap();
        let mut established = [0u8; 39];
        s.read_exact(&mut established).await.unwrap();
        s.write_all(get.as_bytes()).await.unwrap();
        assert!(read_all(&mut s).await.ends_with(b"hello"));
        tunnel.push(t.elapsed());
    }
    let (d, v, t) = (median(direct), median(via), median(tunnel));
    println!(
        "{N} requests each: direct median {}, through the proxy {} (+{}), tunnelled {} (+{}; goal under 500 µs added)",
        us(d),
        us(v),
        us(v.saturating_sub(d)),
        us(t),
        us(t.saturating_sub(d))
    );

    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (socket, proxied) = (socket.clone(), proxied.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::UnixStream::connect(&socket).await.ok()?;
            s.write_all(proxied.as_bytes()).await.ok()?;
            read_all(&mut s).await.ends_with(b"hello").then_some(())
        }));
    }
    let mut errors = 0;
    for t in tasks {
        if !matches!(t.await, Ok(Some(()))) {
            errors += 1;
        }
    }
    println!(
        "100 concurrent proxied requests: {errors} errors, {:.1} ms in all",
        started.elapsed().as_secs_f64() * 1000.0
    );
    println!("records kept: {}", proxy.records().len());
    drop(proxy);
    sandbox_start().await;
}

async fn sandbox_start() {
    let sandbox = ProcessSandbox::detect(std::env::temp_dir().join("steward-egress-bench"))
        .with_forwarder(PathBuf::from(env!("CARGO_BIN_EXE_steward")));
    if let Some(why) = sandbox.unavailable() {
        println!("sandbox start: skipped ({why})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("scripts/pass.py"), "pass\n").unwrap();
    let python = find_program("python3").unwrap();
    let limits = ProcessLimits::default();
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for n in 0..30 {
        let job = Job {
            skill_dir: dir.path(),
            script: "scripts/pass.py",
            interpreter: &python,
            args: &[],
            stdin: None,
            inputs: &[],
            deps: None,
            proxy: None,
        };
        let t = Instant::now();
        sandbox.run(&job, &limits).await.unwrap();
        without.push(t.elapsed());
        let socket = sandbox.socket_path(&format!("bench-{n}"));
        let proxy = Proxy::start(
            &socket,
            EgressRules {
                allow: vec!["example.com".into()],
                within: None,
                max_requests: 10,
                max_bytes: 1 << 20,
                secrets: Vec::new(),
            },
            Default::default(),
            None,
        )
        .unwrap();
        let t = Instant::now();
        let done = sandbox
            .run(
                &Job {
                    proxy: Some(Egress {
                        socket: proxy.socket(),
                        trust: None,
                        env: &[],
                    }),
                    ..job
                },
                &limits,
            )
            .await
            .unwrap();
        with.push(t.elapsed());
        assert_eq!(done.stop, steward::sandbox::process::Stop::Exited(0));
    }
    let (a, b) = (median(without), median(with));
    println!(
        "sandbox start: median {:.1} ms without egress, {:.1} ms with the proxy and forwarder (+{:.1} ms; goal within 10 ms)",
        a.as_secs_f64() * 1000.0,
        b.as_secs_f64() * 1000.0,
        b.saturating_sub(a).as_secs_f64() * 1000.0
    );
}
