//! Secrets for sandboxed programs as placeholders, with real bubblewrap and HTTPS fake
//! servers on 127.0.0.1 (certificates from a test CA, names mapped by the hub's
//! resolver): a Python script calls an allowed host through `requests` and the server
//! receives the real token while the script's environment, `/proc` and output hold only
//! the placeholder; the same placeholder sent to another allowed host is refused; a
//! tunnelled host's TLS is never opened (the script sees the server's own certificate);
//! a redirect to a private address is refused at the next hop; an MCP stdio server
//! gets its token as a placeholder and its call succeeds through the proxy. Needs bubblewrap and the system
//! Python's requests (`.ci/deps` installs both).

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use steward::http::EgressPolicy;
use steward::http::proxy::{EgressHub, EgressRules, NetRecord, Proxy};
use steward::http::secrets::SecretRule;
use steward::sandbox::process::Finished;
use support::*;

const TOKEN: &str = "real-token-5f0c";
const OTHER: &str = "other-key-81ad";

/// A CA for the fake servers, and its certificate (PEM).
struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

fn test_ca() -> TestCa {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "steward test origin CA");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    TestCa {
        pem: cert.pem(),
        issuer: rcgen::Issuer::new(params, key),
    }
}

/// What the origin saw: (Host header, Authorization, X-Api-Key).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// An HTTPS server on 127.0.0.1 for `names` (certificate from `ca`): `/echo` answers
/// with the credentials it received; `/redirect` sends to `internal.example.test` on
/// the same port.
async fn https_origin(ca: &TestCa, names: &[&str]) -> (u16, Seen) {
    steward::http::install_crypto_provider();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.use_authority_key_identifier_extension = true;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new()
        .route(
            "/echo",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                let get = |n: &str| {
                    headers
                        .get(n)
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default()
                };
                let (host, auth, key) = (get("host"), get("authorization"), get("x-api-key"));
                kept.lock()
                    .unwrap()
                    .push((host.clone(), auth.clone(), key.clone()));
                async move { format!("host={host} auth={auth} key={key}") }
            }),
        )
        .route(
            // Compressed whatever the client asked, as some servers do.
            "/gzip",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                use std::io::Write;
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                gz.write_all(format!("gzip auth={auth}").as_bytes()).unwrap();
                (
                    [(axum::http::header::CONTENT_ENCODING, "gzip")],
                    gz.finish().unwrap(),
                )
            }),
        )
        .route(
            // Two MiB, twice a test run's byte cap.
            "/big",
            axum::routing::get(|| async { vec![b'x'; 2 << 20] }),
        )
        .route(
            "/upload",
            axum::routing::post(|body: axum::body::Bytes| async move { format!("got {}", body.len()) }),
        )
        .route(
            "/br",
            axum::routing::get(|| async {
                ([(axum::http::header::CONTENT_ENCODING, "br")], vec![1u8, 2, 3])
            }),
        )
        .route(
            "/redirect",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                let host = headers
                    .get("host")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let port = host.rsplit(':').next().unwrap_or("443");
                (
                    axum::http::StatusCode::FOUND,
                    [(
                        axum::http::header::LOCATION,
                        format!("https://internal.example.test:{port}/echo"),
                    )],
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

const SCRIPT: &str = r#"import http.client, os, ssl, sys, requests
port = int(sys.argv[1])
token = os.environ["API_TOKEN"]
print("placeholder:", token)
leaked = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        if b"real-token" in open(f"/proc/{pid}/environ", "rb").read():
            leaked.append(pid)
    except OSError:
        pass
print("proc leaks:", leaked)
def get(url, **kw):
    try:
        r = requests.get(url, timeout=10, **kw)
        return f"{r.status_code} {r.text.strip()}"
    except Exception as e:
        return f"error {type(e).__name__} {e}"
print("api:", get(f"https://api.example.test:{port}/echo", headers={"Authorization": token}))
print("token style:", get(f"https://api.example.test:{port}/echo", headers={"Authorization": f"token {token}"}))
print("other key:", get(f"https://other.example.test:{port}/echo", headers={"X-Api-Key": os.environ["OTHER_KEY"]}))
print("wrong host:", get(f"https://other.example.test:{port}/echo", headers={"Authorization": token}))
print("wrong header:", get(f"https://api.example.test:{port}/echo", headers={"X-Api-Key": token}))
print("in url:", get(f"https://api.example.test:{port}/echo?t={token}"))
print("redirect:", get(f"https://api.example.test:{port}/redirect"))
print("gzip:", get(f"https://api.example.test:{port}/gzip", headers={"Authorization": token}))
def post(url, data):
    try:
        r = requests.post(url, data=data, headers={"Authorization": token}, timeout=10)
        return f"{r.status_code} {r.text.strip()}"
    except Exception as e:
        return f"error {type(e).__name__}"
print("br:", get(f"https://api.example.test:{port}/br", headers={"Authorization": token}))
def issuer(host):
    proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").split(":")
    conn = http.client.HTTPSConnection(proxy[0], int(proxy[1]), timeout=10, context=ssl.create_default_context())
    conn.set_tunnel(host, port)
    conn.request("GET", "/echo")
    conn.getresponse().read()
    return dict(x[0] for x in conn.sock.getpeercert()["issuer"])["commonName"]
print("tunnel issuer:", issuer("plain.example.test"))
print("opened issuer:", issuer("api.example.test"))
# Last: the second upload uses up the run's byte cap.
print("upload:", post(f"https://api.example.test:{port}/upload", b"x" * 100000))
print("too big:", post(f"https://api.example.test:{port}/upload", b"x" * (2 << 20)))
"#;

fn rules(port: u16) -> EgressRules {
    let at = |h: &str| format!("{h}:{port}");
    EgressRules {
        allow: [
            "api.example.test",
            "other.example.test",
            "plain.example.test",
            "internal.example.test",
        ]
        .map(at)
        .to_vec(),
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: 20,
        max_bytes: 1 << 20,
        secrets: vec![
            SecretRule {
                name: "API_TOKEN".into(),
                env: "STEWARD_SECRET_API".into(),
                hosts: vec![at("api.example.test")],
                header: Some("authorization".into()),
                format: "Bearer {}".into(),
            },
            SecretRule {
                name: "OTHER_KEY".into(),
                env: "STEWARD_SECRET_OTHER".into(),
                hosts: vec![at("other.example.test")],
                header: None,
                format: "{}".into(),
            },
        ],
    }
}

async fn run_script(ca: &TestCa, port: u16, script: &str) -> (Finished, Vec<NetRecord>) {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let hub = EgressHub::new(EgressPolicy::parse("127.0.0.1").unwrap())
        .with_secrets(move |name| match name {
            "STEWARD_SECRET_API" => Some(TOKEN.into()),
            "STEWARD_SECRET_API_HOSTS" => Some(format!("api.example.test:{port}")),
            "STEWARD_SECRET_OTHER" => Some(OTHER.into()),
            "STEWARD_SECRET_OTHER_HOSTS" => Some(format!("other.example.test:{port}")),
            _ => None,
        })
        .with_host("api.example.test", loopback)
        .with_host("other.example.test", loopback)
        .with_host("plain.example.test", loopback)
        // An allowed name at a private address the operator did not open.
        .with_host("internal.example.test", IpAddr::V4(Ipv4Addr::new(10, 255, 0, 7)))
        .with_extra_roots(&ca.pem)
        .unwrap();
    let sandbox = egress_sandbox("secrets-test");
    let proxy = Proxy::start(&sandbox.socket_path("secrets"), rules(port), Arc::new(hub), None).unwrap();
    let finished = run_python_behind(&proxy, &sandbox, script, &[port.to_string()]).await;
    (finished, proxy.records())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_uses_a_token_it_never_holds_on_its_hosts_only() {
    let ca = test_ca();
    let (port, seen) = https_origin(
        &ca,
        &["api.example.test", "other.example.test", "plain.example.test"],
    )
    .await;
    let (finished, records) = run_script(&ca, port, SCRIPT).await;
    let (out, err) = exited_ok(&finished);
    let placeholder = line(&out, "placeholder:").trim_start_matches("placeholder: ");
    assert!(placeholder.starts_with("stw_secret_"), "{out}");
    assert_eq!(line(&out, "proc leaks:"), "proc leaks: []", "{out}");
    // The server got the value; the script read back only the placeholder.
    assert_eq!(
        line(&out, "api:"),
        format!("api: 200 host=api.example.test:{port} auth=Bearer {placeholder} key=")
    );
    assert_eq!(
        line(&out, "token style:"),
        format!("token style: 200 host=api.example.test:{port} auth=token {placeholder} key=")
    );
    assert!(line(&out, "other key:").starts_with("other key: 200 "), "{out}");
    assert!(
        !out.contains(TOKEN) && !out.contains(OTHER) && !err.contains(TOKEN),
        "{out}{err}"
    );
    assert!(
        line(&out, "wrong host:").contains(&format!(
            "403 steward egress proxy refused this request: the placeholder of secret API_TOKEN was sent to other.example.test, which is not one of its hosts (api.example.test:{port})"
        )),
        "{out}"
    );
    assert!(
        line(&out, "wrong header:").contains("secret API_TOKEN goes only in the authorization header"),
        "{out}"
    );
    assert!(line(&out, "in url:").contains("is in the URL"), "{out}");
    // The tunnelled host's own certificate; the opened one's from steward's CA.
    assert_eq!(
        line(&out, "tunnel issuer:"),
        "tunnel issuer: steward test origin CA"
    );
    assert_eq!(
        line(&out, "opened issuer:"),
        "opened issuer: steward egress proxy (this process only)"
    );
    // A compressed echo is decoded and scrubbed; an encoding steward cannot read is
    // refused rather than passed on unread.
    assert_eq!(
        line(&out, "gzip:"),
        format!("gzip: 200 gzip auth=Bearer {placeholder}")
    );
    assert!(
        line(&out, "br:").contains("502 steward egress proxy refused this request: the answer is br-encoded"),
        "{out}"
    );
    // Request bodies stream through, counted against the run's byte cap (1 MiB here).
    assert_eq!(line(&out, "upload:"), "upload: 200 got 100000");
    assert!(!line(&out, "too big:").starts_with("too big: 200"), "{out}");
    // A redirect to an allowed name at a private address fails at the next hop.
    assert!(line(&out, "redirect:").contains("error ProxyError"), "{out}");
    let next_hop = records
        .iter()
        .find(|r| r.host == "internal.example.test")
        .expect("the next hop is recorded");
    assert!(
        next_hop
            .refused
            .as_deref()
            .is_some_and(|w| w.contains("10.255.0.7, a private address")),
        "{next_hop:?}"
    );
    let seen = seen.lock().unwrap().clone();
    let auths: Vec<&str> = seen.iter().map(|(_, a, _)| a.as_str()).collect();
    assert!(auths.contains(&format!("Bearer {TOKEN}").as_str()), "{seen:?}");
    assert!(auths.contains(&format!("token {TOKEN}").as_str()), "{seen:?}");
    assert!(seen.iter().any(|(_, _, k)| k == OTHER), "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|(_, a, k)| a.contains("stw_secret_") || k.contains("stw_secret_")),
        "no refused request reached the server: {seen:?}"
    );
    // Records name the secrets used, never their values.
    let used: Vec<(&str, Vec<String>)> = records
        .iter()
        .filter(|r| !r.secrets.is_empty())
        .map(|r| (r.host.as_str(), r.secrets.clone()))
        .collect();
    assert_eq!(
        used,
        [
            ("api.example.test", vec!["API_TOKEN".to_string()]),
            ("api.example.test", vec!["API_TOKEN".to_string()]),
            ("other.example.test", vec!["OTHER_KEY".to_string()]),
            ("api.example.test", vec!["API_TOKEN".to_string()]),
            ("api.example.test", vec!["API_TOKEN".to_string()]),
            // The two uploads.
            ("api.example.test", vec!["API_TOKEN".to_string()]),
            ("api.example.test", vec!["API_TOKEN".to_string()]),
        ]
    );
    let text = serde_json::to_string(&records).unwrap();
    assert!(!text.contains(TOKEN) && !text.contains(placeholder), "{text}");
    assert!(
        records.iter().any(|r| r
            .refused
            .as_deref()
            .is_some_and(|w| w.contains("not one of its hosts"))),
        "{records:?}"
    );
}

/// An opened (secret-bearing) connection's answer is counted against the run's byte
/// cap as it arrives: two MiB through a one-MiB cap is cut at the cap, the program sees
/// a broken answer rather than the whole of it, and the record says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_answer_stops_at_the_runs_byte_cap() {
    let ca = test_ca();
    let (port, _) = https_origin(&ca, &["api.example.test"]).await;
    let script = r#"import os, sys, requests
port = int(sys.argv[1])
try:
    r = requests.get(f"https://api.example.test:{port}/big", headers={"Authorization": os.environ["API_TOKEN"]}, timeout=10)
    print("big:", r.status_code, len(r.content))
except Exception as e:
    print("big: error", type(e).__name__)
"#;
    let (finished, records) = run_script(&ca, port, script).await;
    let (out, _) = exited_ok(&finished);
    assert!(line(&out, "big:").starts_with("big: error"), "{out}");
    let big: Vec<&NetRecord> = records.iter().filter(|r| r.host == "api.example.test").collect();
    assert_eq!(big.len(), 1, "{records:?}");
    let cap = 1u64 << 20;
    assert_eq!(
        big[0].refused.as_deref(),
        Some(format!("closed at the run's cap of {cap} bytes").as_str())
    );
    // The body stopped at the cap (headers are counted when the record is kept).
    assert!(big[0].bytes_received <= cap + 4096, "{:?}", big[0]);
    assert_eq!(big[0].secrets, ["API_TOKEN"]);
}

/// Through `steward run`: the agent's script and its sandboxed MCP server both get the
/// token as a placeholder from config, the server receives the value, and each request
/// is a `net_request` event under its call naming the secret (`runs show --json`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_script_and_mcp_server_get_placeholders_from_config() {
    let ca = test_ca();
    let (port, seen) = https_origin(&ca, &["127.0.0.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "ca.pem", &ca.pem);
    write(root, "prompts/p.md", "You call the API.");
    write(
        root,
        "prompts/skills/net/SKILL.md",
        "---\nname: net\ndescription: Calls the API.\n---\nRun scripts/call.py PORT.\n",
    );
    write(
        root,
        "prompts/skills/net/scripts/call.py",
        "import os, sys, requests\nr = requests.get(f'https://127.0.0.1:{sys.argv[1]}/echo', headers={'Authorization': os.environ['API_TOKEN']}, timeout=10)\nprint(r.status_code, r.text)\n",
    );
    let egress = format!(
        "egress:\n  allow: [\"127.0.0.1:{port}\"]\n  secrets:\n    API_TOKEN: {{env: STEWARD_SECRET_API, hosts: [\"127.0.0.1:{port}\"], header: Authorization, format: \"Bearer {{}}\"}}\n"
    );
    write(root, "mcp/api/server.py", PY_MCP_FETCHER);
    write(
        root,
        "mcp/api.yaml",
        &format!("command: python3\nargs: [/server/server.py]\n{egress}"),
    );
    let indented: String = egress.lines().map(|l| format!("    {l}\n")).collect();
    write(
        root,
        "agents/caller.yaml",
        &format!(
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [mcp:api]\nskills:\n  allowed: [net]\n  scripts:\n{indented}"
        ),
    );
    let o = steward_in(root, &["validate"], &[]);
    assert!(o.status.success(), "{}", output_text(&o));

    let fake = FakeModel::start().await;
    let script = serde_json::json!({"skill": "net", "script": "scripts/call.py", "args": [port.to_string()]})
        .to_string();
    let fetch = serde_json::json!({"url": format!("https://127.0.0.1:{port}/echo")}).to_string();
    fake.push(Reply::ok(openai_tools(&[("c1", "run_skill_script", &script)])));
    fake.push(Reply::ok(openai_tools(&[("c2", "api__fetch", &fetch)])));
    fake.push(Reply::ok(openai_text("Called.")));
    std::fs::write(root.join("ev.json"), r#"{"text": "call it"}"#).unwrap();
    let event = root.join("ev.json");
    let base = format!("{}/v1", fake.url);
    let ca_file = root.join("ca.pem");
    let o = steward_in_async(
        root,
        &["run", "caller", "--event", event.to_str().unwrap()],
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
            ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
            // steward trusts the origin's CA (upstream and in the sandboxes' bundle).
            ("SSL_CERT_FILE", ca_file.to_str().unwrap()),
            ("STEWARD_SECRET_API", TOKEN),
            ("STEWARD_SECRET_API_HOSTS", &format!("127.0.0.1:{port}")),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", output_text(&o));
    let results = tool_results(&fake);
    let echoed = format!("200 host=127.0.0.1:{port} auth=Bearer stw_secret_");
    assert!(results["c1"].contains(&echoed), "{}", results["c1"]);
    assert!(
        results["c2"].contains("holds stw_secret_") && results["c2"].contains("auth=Bearer stw_secret_"),
        "{}",
        results["c2"]
    );
    assert!(!results["c1"].contains(TOKEN) && !results["c2"].contains(TOKEN));
    let auths: Vec<String> = seen.lock().unwrap().iter().map(|(_, a, _)| a.clone()).collect();
    assert_eq!(auths, [format!("Bearer {TOKEN}"), format!("Bearer {TOKEN}")]);

    let listed = steward_in(root, &["runs", "list", "--json"], &[]);
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let shown = steward_in(root, &["runs", "show", &id, "--json"], &[]);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(!text.contains(TOKEN), "{text}");
    let shown: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = shown["events"].as_array().expect("events in runs show --json");
    let net: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .filter(|e| e["kind"] == "net_request")
        .map(|e| {
            (
                e["data"]["parent_call_id"].as_str().unwrap(),
                &e["data"]["secrets"],
            )
        })
        .collect();
    assert_eq!(
        net,
        [
            ("c1", &serde_json::json!(["API_TOKEN"])),
            ("c2", &serde_json::json!(["API_TOKEN"]))
        ],
        "{shown}"
    );
}
