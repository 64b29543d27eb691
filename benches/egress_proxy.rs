//! The skill scripts' egress proxy (`http/proxy/`), measured from the host side of
//! its Unix socket against an origin on 127.0.0.1, so only the proxy's own work counts:
//!
//! - added latency of a proxied HTTP request (absolute-form GET, a fresh connection
//!   each) against the same request sent to the origin directly, 500 each, interleaved;
//! - a tunnelled request: CONNECT, then the same GET inside the tunnel (goal: under
//!   0.5 ms added);
//! - 100 concurrent proxied requests, counting errors (goal: none);
//! - sandbox start with egress configured (the forwarder, the socket mount) against
//!   without, 30 runs each (goal: within 10 ms);
//! - HTTPS with header injection: a fresh TLS connection each, opened by the proxy with
//!   a certificate from its CA, the placeholder replaced, forwarded to an HTTPS origin
//!   (its own test CA) on a pooled upstream connection, against the same request sent
//!   to the origin directly with the real token, 300 each, interleaved (goal: p50 under
//!   2 ms added); and the same HTTPS request tunnelled without injection.
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
        listed_in: "this agent's skills.scripts.egress.allow",
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
    injection(dir.path()).await;
    sandbox_start().await;
}

/// A CA, and an HTTPS server on 127.0.0.1 under it answering `/hello` with the
/// Authorization header it got.
async fn https_origin() -> (u16, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::default();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "bench origin CA");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let app = axum::Router::new().route(
        "/hello",
        axum::routing::get(|h: axum::http::HeaderMap| async move {
            format!("hello {}", h.get("authorization").map(|v| v.len()).unwrap_or(0))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(
                        hyper_util::rt::TokioIo::new(tls),
                        hyper_util::service::TowerToHyperService::new(app),
                    )
                    .await;
            });
        }
    });
    (port, ca_pem)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A TLS client trusting the certificates in `pem`.
fn tls_client(pem: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
        let _ = roots.add(cert.unwrap());
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One GET of `/hello` over TLS on `stream`, to the end of the answer.
async fn tls_get<S>(tls: &tokio_rustls::TlsConnector, stream: S, auth: &str) -> Vec<u8>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut s = tls.connect(name, stream).await.unwrap();
    let get = format!(
        "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(get.as_bytes()).await.unwrap();
    read_all(&mut s).await
}

async fn injection(dir: &std::path::Path) {
    steward::http::install_crypto_provider();
    const M: usize = 300;
    let (port, ca_pem) = https_origin().await;
    let at = format!("127.0.0.1:{port}");
    let hub = EgressHub::new(EgressPolicy::parse("127.0.0.1").unwrap())
        .with_secrets(|_| Some("real-token-0123456789".into()))
        .with_extra_roots(&ca_pem)
        .unwrap();
    let rules = EgressRules {
        allow: vec![at.clone()],
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: u32::MAX,
        max_bytes: u64::MAX,
        secrets: vec![steward::http::secrets::SecretRule {
            name: "TOKEN".into(),
            env: "STEWARD_SECRET_TOKEN".into(),
            hosts: vec![at.clone()],
            header: Some("authorization".into()),
            format: "Bearer {}".into(),
        }],
    };
    let socket = dir.join("inject.sock");
    let proxy = Proxy::start(&socket, rules, Arc::new(hub), None).unwrap();
    let placeholder = proxy.secret_env()[0].1.clone();
    let bundle = std::fs::read(proxy.trust_bundle().unwrap()).unwrap();
    let (direct_tls, proxied_tls) = (tls_client(ca_pem.as_bytes()), tls_client(&bundle));
    let connect = format!("CONNECT {at} HTTP/1.1\r\nHost: {at}\r\n\r\n");
    // The answer's length is the Authorization header the origin got: the real value.
    let expected = format!("hello {}", "Bearer real-token-0123456789".len());
    // The same host without a secret: tunnelled, TLS end to end with the origin.
    let plain_socket = dir.join("tunnel.sock");
    let plain_rules = EgressRules {
        allow: vec![at.clone()],
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: u32::MAX,
        max_bytes: u64::MAX,
        secrets: Vec::new(),
    };
    let plain_hub = EgressHub::new(EgressPolicy::parse("127.0.0.1").unwrap());
    let plain = Proxy::start(&plain_socket, plain_rules, Arc::new(plain_hub), None).unwrap();
    let (mut direct, mut injected, mut tunnelled) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..M {
        let t = Instant::now();
        let mut s = tokio::net::UnixStream::connect(&plain_socket).await.unwrap();
        s.write_all(connect.as_bytes()).await.unwrap();
        let mut established = [0u8; 39];
        s.read_exact(&mut established).await.unwrap();
        let answer = tls_get(&direct_tls, s, "Bearer real-token-0123456789").await;
        assert!(contains(&answer, expected.as_bytes()));
        tunnelled.push(t.elapsed());

        let t = Instant::now();
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let answer = tls_get(&direct_tls, tcp, "Bearer real-token-0123456789").await;
        assert!(contains(&answer, expected.as_bytes()));
        direct.push(t.elapsed());

        let t = Instant::now();
        let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
        s.write_all(connect.as_bytes()).await.unwrap();
        let mut established = [0u8; 39];
        s.read_exact(&mut established).await.unwrap();
        let answer = tls_get(&proxied_tls, s, &placeholder).await;
        assert!(
            contains(&answer, expected.as_bytes()),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        injected.push(t.elapsed());
    }
    let (d, i) = (median(direct.clone()), median(injected.clone()));
    let p90 = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() * 9 / 10]
    };
    let tu = median(tunnelled);
    println!(
        "HTTPS with header injection, {M} requests each (fresh TLS connection): direct median {}, injected {} (+{}; goal under 2 ms added); p90 {} vs {}; tunnelled without injection {} (+{})",
        us(d),
        us(i),
        us(i.saturating_sub(d)),
        us(p90(direct)),
        us(p90(injected)),
        us(tu),
        us(tu.saturating_sub(d))
    );
    drop(plain);
    assert!(
        proxy
            .records()
            .iter()
            .all(|r| r.secrets == ["TOKEN"] && r.status == Some(200))
    );
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
    // Secrets configured: the proxy's start writes the trust bundle, the sandbox mounts
    // it and sets the placeholders (the CA is made once, before the loop).
    let hub = Arc::new(EgressHub::default().with_secrets(|_| Some("value".into())));
    let secret_rules = EgressRules {
        allow: vec!["example.com".into()],
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: 10,
        max_bytes: 1 << 20,
        secrets: vec![steward::http::secrets::SecretRule {
            name: "TOKEN".into(),
            env: "STEWARD_SECRET_TOKEN".into(),
            hosts: vec!["example.com".into()],
            header: None,
            format: "{}".into(),
        }],
    };
    drop(
        Proxy::start(
            &sandbox.socket_path("warm"),
            secret_rules.clone(),
            hub.clone(),
            None,
        )
        .unwrap(),
    );
    let (mut without, mut with, mut with_secrets) = (Vec::new(), Vec::new(), Vec::new());
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
        let t = Instant::now();
        let proxy = Proxy::start(
            &socket,
            EgressRules {
                allow: vec!["example.com".into()],
                listed_in: "this agent's skills.scripts.egress.allow",
                within: None,
                max_requests: 10,
                max_bytes: 1 << 20,
                secrets: Vec::new(),
            },
            Default::default(),
            None,
        )
        .unwrap();
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
        drop(proxy);
        let t = Instant::now();
        let socket = sandbox.socket_path(&format!("bench-secrets-{n}"));
        let proxy = Proxy::start(&socket, secret_rules.clone(), hub.clone(), None).unwrap();
        let done = sandbox
            .run(
                &Job {
                    proxy: Some(Egress {
                        socket: proxy.socket(),
                        trust: proxy.trust_bundle(),
                        env: proxy.secret_env(),
                    }),
                    ..job
                },
                &limits,
            )
            .await
            .unwrap();
        with_secrets.push(t.elapsed());
        assert_eq!(done.stop, steward::sandbox::process::Stop::Exited(0));
    }
    let (a, b, c) = (median(without), median(with), median(with_secrets));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "sandbox start (the proxy's start included): median {:.1} ms without egress, {:.1} ms with the proxy and forwarder (+{:.1} ms), {:.1} ms with a secret (trust bundle, placeholder; +{:.1} ms); goal within 10 ms",
        ms(a),
        ms(b),
        ms(b.saturating_sub(a)),
        ms(c),
        ms(c.saturating_sub(a))
    );
}
