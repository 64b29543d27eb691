//! Network for skill scripts through steward's egress proxy, with real bubblewrap: a
//! Python script reaches an allowed host over HTTP; plain HTTP inside a CONNECT tunnel,
//! an unlisted host, an internal address the operator did not open, a connection that
//! bypasses the proxy and requests past the cap all fail with the reason; each request
//! is recorded. Needs bubblewrap (`.ci/deps` installs it).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use steward::http::EgressPolicy;
use steward::http::proxy::{EgressHub, EgressRules, Proxy};
use steward::sandbox::process::Finished;
use support::*;

/// A plain HTTP server on 127.0.0.1 counting requests.
async fn origin() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/hello",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            counted.fetch_add(1, Ordering::SeqCst);
            let proxied = headers.contains_key("proxy-authorization");
            async move { format!("hello through the proxy (proxy header passed on: {proxied})") }
        }),
    );
    let url = serve(app).await;
    (url.rsplit(':').next().unwrap().parse().unwrap(), hits)
}

const SCRIPT: &str = r#"import http.client, os, socket, sys, urllib.request
port = int(sys.argv[1])
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return f"{r.status} {r.read().decode()}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.read().decode().strip()}"
    except Exception as e:
        return f"error {e}"
print("plain:", get(f"http://127.0.0.1:{port}/hello?token=abc"))
print("unlisted:", get(f"http://localhost:{port}/hello"))
# A CONNECT tunnel (how HTTPS goes) with plain HTTP inside: refused before it goes on
# (its Host would go unchecked; plain HTTP goes as a request, as above).
proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").split(":")
conn = http.client.HTTPConnection(proxy[0], int(proxy[1]), timeout=10)
conn.set_tunnel("127.0.0.1", port)
try:
    conn.request("GET", "/hello")
    print("tunnel:", conn.getresponse().status)
except Exception as e:
    print("tunnel: error", e)
# Around the proxy: the sandbox has no route out.
try:
    socket.create_connection(("127.0.0.1", port), timeout=3)
    print("direct: connected")
except OSError as e:
    print("direct: refused", e.errno)
print("capped:", get(f"http://127.0.0.1:{port}/hello"))
"#;

async fn run(
    rules: EgressRules,
    internal: &str,
    port: u16,
) -> (Finished, Vec<steward::http::proxy::NetRecord>) {
    let sandbox = egress_sandbox("egress-test");
    let socket = sandbox.socket_path("test");
    let hub = Arc::new(EgressHub::new(EgressPolicy::parse(internal).unwrap()));
    let proxy = Proxy::start(&socket, rules, hub, None).unwrap();
    let finished = run_python_behind(&proxy, &sandbox, SCRIPT, &[port.to_string()]).await;
    let records = proxy.records();
    (finished, records)
}

/// `steward run fetcher` on the tree at `root` against `fake`, with 127.0.0.1 opened
/// as STEWARD_HTTP_ALLOW opens on-premises hosts.
async fn run_fetcher(root: &std::path::Path, fake: &FakeModel) {
    std::fs::write(root.join("ev.json"), r#"{"text": "fetch it"}"#).unwrap();
    let event = root.join("ev.json");
    let base = format!("{}/v1", fake.url);
    let o = steward_in_async(
        root,
        &["run", "fetcher", "--event", event.to_str().unwrap()],
        &[
            ("OPENAI_BASE_URL", base.as_str()),
            ("OPENAI_API_KEY", "sk-test"),
            ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", output_text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_reach_allowed_hosts_only_through_the_proxy_and_every_request_is_recorded() {
    let (port, hits) = origin().await;
    let rules = EgressRules {
        allow: vec![format!("127.0.0.1:{port}")],
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: 2,
        max_bytes: 1 << 20,
        secrets: Vec::new(),
    };
    // The operator opened 127.0.0.1 (as STEWARD_HTTP_ALLOW does for on-premises hosts).
    let (finished, records) = run(rules, "127.0.0.1", port).await;
    let (out, _) = exited_ok(&finished);
    assert!(
        line(&out, "plain:").starts_with("plain: 200 hello through the proxy"),
        "{out}"
    );
    assert!(
        line(&out, "unlisted:").contains(&format!("403 steward egress proxy refused this request: localhost:{port} is not in this agent's skills.scripts.egress.allow")),
        "{out}"
    );
    assert!(line(&out, "tunnel:").starts_with("tunnel: error"), "{out}");
    assert!(line(&out, "direct:").starts_with("direct: refused"), "{out}");
    assert!(
        line(&out, "capped:").contains("the run's cap of 2 requests is reached"),
        "{out}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the plain request only");
    // Records: method, host, path without the query, status; refusals with why.
    let summary: Vec<(String, Option<String>, Option<u16>, bool)> = records
        .iter()
        .map(|r| (r.method.clone(), r.path.clone(), r.status, r.refused.is_some()))
        .collect();
    assert_eq!(
        summary,
        [
            ("GET".to_string(), Some("/hello".to_string()), Some(200), false),
            ("GET".to_string(), Some("/hello".to_string()), None, true),
            ("CONNECT".to_string(), None, Some(200), true),
            ("GET".to_string(), Some("/hello".to_string()), None, true),
        ]
    );
    assert_eq!(
        records[2].refused.as_deref(),
        Some("plain HTTP goes through the proxy as a request (an http:// URL), not through a tunnel"),
        "{records:?}"
    );
    assert_eq!(records[2].bytes_sent, 0, "nothing of it reached the host");
    assert!(records.iter().all(|r| !format!("{r:?}").contains("token=abc")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_address_stays_refused_unless_the_operator_opens_it() {
    let (port, hits) = origin().await;
    let rules = EgressRules {
        allow: vec![format!("127.0.0.1:{port}")],
        listed_in: "this agent's skills.scripts.egress.allow",
        within: None,
        max_requests: 10,
        max_bytes: 1 << 20,
        secrets: Vec::new(),
    };
    // Listed by the agent, but loopback: refused after resolution without STEWARD_HTTP_ALLOW.
    let (finished, records) = run(rules, "", port).await;
    let out = String::from_utf8_lossy(&finished.stdout).into_owned();
    assert!(line(&out, "plain:").contains("a loopback address"), "{out}");
    assert!(line(&out, "tunnel:").contains("error"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert!(records.iter().all(|r| r.refused.is_some()), "{records:?}");
}

/// Through `steward run`: the agent's `skills.scripts.egress` reaches the tool, the
/// forwarder is the steward executable, and the call's result lists its requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_egress_reaches_its_scripts_and_the_tool_result_records_the_requests() {
    let (port, hits) = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You fetch.");
    write(
        root,
        "prompts/skills/net/SKILL.md",
        "---\nname: net\ndescription: Fetches a page.\n---\nRun scripts/get.py PORT.\n",
    );
    write(
        root,
        "prompts/skills/net/scripts/get.py",
        "import sys, urllib.request\nprint(urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/hello', timeout=10).read().decode())\n",
    );
    write(
        root,
        "agents/fetcher.yaml",
        &format!(
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: []\nskills:\n  allowed: [net]\n  scripts:\n    egress: {{ allow: [\"127.0.0.1:{port}\"], max_requests: 5 }}\n"
        ),
    );
    let fake = FakeModel::start().await;
    let args = serde_json::json!({"skill": "net", "script": "scripts/get.py", "args": [port.to_string()]})
        .to_string();
    fake.push(Reply::ok(openai_tools(&[("c1", "run_skill_script", &args)])));
    fake.push(Reply::ok(openai_text("Fetched.")));
    run_fetcher(root, &fake).await;
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let results = tool_results(&fake);
    let result: serde_json::Value = serde_json::from_str(&results["c1"]).unwrap();
    assert!(
        result["stdout"]
            .as_str()
            .unwrap()
            .contains("hello through the proxy"),
        "{result}"
    );
    assert_eq!(result["network"][0]["method"], "GET", "{result}");
    assert_eq!(result["network"][0]["status"], 200, "{result}");
    assert_eq!(result["network"][0]["path"], "/hello", "{result}");

    // Each request is an event of the run under its call, shown by `runs show`.
    {
        use steward::store::RunStore;
        let store = steward::store::SqliteStore::open(&root.join("s.db"))
            .await
            .unwrap();
        let run = store.list_runs(1).await.unwrap().remove(0);
        let events = store.run_events(&run.id).await.unwrap();
        let net = events
            .iter()
            .find(|e| e.kind == "net_request")
            .expect("a net_request event");
        assert_eq!(net.data["parent_call_id"], "c1", "{:?}", net.data);
        assert_eq!(
            (net.data["host"].as_str(), net.data["status"].as_u64()),
            (Some("127.0.0.1"), Some(200))
        );
        assert_eq!(net.data["path"], "/hello");
        let shown = steward_in(root, &["runs", "show", &run.id], &[]);
        assert!(
            output_text(&shown).contains("net_request"),
            "{}",
            output_text(&shown)
        );
    }

    // The skill's own egress.yaml narrows the agent's list: 127.0.0.1 is not in it.
    write(
        root,
        "prompts/skills/net/egress.yaml",
        "allow: [api.example.com]\n",
    );
    fake.push(Reply::ok(openai_tools(&[("c2", "run_skill_script", &args)])));
    fake.push(Reply::ok(openai_text("Could not fetch.")));
    run_fetcher(root, &fake).await;
    let results = tool_results(&fake);
    assert!(
        results["c2"].contains(&format!("127.0.0.1:{port} is not in the skill's egress.yaml")),
        "{}",
        results["c2"]
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "nothing more reached the origin");

    // An egress.yaml that links out of the skill's folder is not read, and nothing of
    // what it points at is quoted back (a token file would be, in a YAML error).
    let egress = root.join("prompts/skills/net/egress.yaml");
    std::fs::write(root.join("token"), "eyJhbGciOiJSUzI1NiJ9.secret-token\n").unwrap();
    std::fs::remove_file(&egress).unwrap();
    std::os::unix::fs::symlink(root.join("token"), &egress).unwrap();
    fake.push(Reply::ok(openai_tools(&[("c3", "run_skill_script", &args)])));
    fake.push(Reply::ok(openai_text("Could not fetch.")));
    run_fetcher(root, &fake).await;
    let results = tool_results(&fake);
    assert!(
        results["c3"].contains("egress.yaml cannot be used") && !results["c3"].contains("secret-token"),
        "{}",
        results["c3"]
    );
    std::fs::remove_file(&egress).unwrap();
    write(
        root,
        "prompts/skills/net/egress.yaml",
        "allow: [api.example.com]\n",
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1, "nothing more reached the origin");

    // Secrets go only to allowed hosts, under names steward does not set itself.
    write(
        root,
        "agents/fetcher.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: []\nskills:\n  scripts:\n    egress:\n      allow: [api.example.com, \"https://x.example.com\"]\n      secrets:\n        TOKEN: { env: STEWARD_SECRET_X, hosts: [api.github.com], format: Bearer }\n        HTTPS_PROXY: { env: \"x-y\", hosts: [api.example.com] }\n        KEY: { env: OPENAI_API_KEY, hosts: [api.example.com] }\n",
    );
    let o = steward_in(root, &["validate"], &[]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    for expected in [
        "secret TOKEN: host 'api.github.com' is not in allow: a secret goes only to allowed hosts",
        "secret TOKEN: format 'Bearer' must hold {} once",
        "secret HTTPS_PROXY: 'HTTPS_PROXY' must be a variable name (letters, digits, _) other than those steward sets",
        "secret HTTPS_PROXY: env 'x-y' is not an environment variable name",
        "secret KEY: env 'OPENAI_API_KEY' must be named STEWARD_SECRET_<NAME>",
    ] {
        assert!(text.contains(expected), "{expected} in {text}");
    }
    assert!(
        text.contains("egress host 'https://x.example.com' is not a host name"),
        "{text}"
    );

    // A subagent's skill scripts are held to the same rules: its policy cannot name
    // steward's own key either.
    write(
        root,
        "agents/fetcher.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: []\nsubagents: [helper]\n",
    );
    write(
        root,
        "subagents/helper.yaml",
        "description: Fetches.\nprompt: prompts/p.md\ntools: []\nskills:\n  scripts:\n    egress:\n      allow: [api.example.com]\n      secrets:\n        KEY: { env: OPENAI_API_KEY, hosts: [api.example.com] }\n",
    );
    let o = steward_in(root, &["validate"], &[]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("subagents/helper.yaml")
            && text.contains("secret KEY: env 'OPENAI_API_KEY' must be named STEWARD_SECRET_<NAME>"),
        "{text}"
    );
}

/// An MCP stdio server in the sandbox with `egress:` reaches its allowed host through
/// the same proxy, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_mcp_server_reaches_its_allowed_hosts_through_the_proxy() {
    let (port, hits) = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You fetch.");
    write(root, "mcp/fetcher/server.py", PY_MCP_FETCHER);
    write(
        root,
        "mcp/fetcher.yaml",
        &format!(
            "command: python3\nargs: [/server/server.py]\negress: {{ allow: [\"127.0.0.1:{port}\"] }}\n"
        ),
    );
    write(
        root,
        "agents/fetcher.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [mcp:fetcher]\n",
    );
    let fake = FakeModel::start().await;
    let allowed = serde_json::json!({"url": format!("http://127.0.0.1:{port}/hello")}).to_string();
    let unlisted = serde_json::json!({"url": format!("http://localhost:{port}/hello")}).to_string();
    fake.push(Reply::ok(openai_tools(&[("c1", "fetcher__fetch", &allowed)])));
    fake.push(Reply::ok(openai_tools(&[("c2", "fetcher__fetch", &unlisted)])));
    fake.push(Reply::ok(openai_text("Fetched.")));
    run_fetcher(root, &fake).await;
    let results = tool_results(&fake);
    assert!(
        results["c1"].contains("hello through the proxy"),
        "{}",
        results["c1"]
    );
    assert!(
        results["c2"].contains("403 steward egress proxy refused this request: localhost:"),
        "{}",
        results["c2"]
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // egress needs the sandbox: a server outside it has the host's network already.
    write(
        root,
        "mcp/fetcher.yaml",
        "command: python3\nargs: [/server/server.py]\nsandbox: false\negress: { allow: [127.0.0.1] }\n",
    );
    let o = steward_in(root, &["validate"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("egress applies to sandboxed command servers"),
        "{}",
        output_text(&o)
    );
}
