//! `deploy/` stays honest: every environment variable the manifests, compose file and
//! `.env.example` name is one steward reads, every variable steward reads is in
//! `.env.example`, the YAML files parse, and the compose file passes
//! `docker compose config` where docker is installed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn names(text: &str, pattern: &str) -> BTreeSet<String> {
    regex::Regex::new(pattern)
        .unwrap()
        .captures_iter(text)
        .map(|c| c[1].to_string())
        .collect()
}

/// Every variable steward reads: `Settings::from_vars` (the one reader), the CLI's
/// `env = "..."` arguments, `RUST_LOG`, and what the OpenTelemetry SDK reads itself
/// (its resource detector).
fn read_by_steward() -> BTreeSet<String> {
    let mut vars = names(&read("src/config/settings.rs"), r#"get\("([A-Z][A-Z0-9_]+)"\)"#);
    vars.extend(names(&read("src/cli/mod.rs"), r#"env = "([A-Z][A-Z0-9_]+)""#));
    vars.insert("RUST_LOG".into());
    vars.insert("OTEL_RESOURCE_ATTRIBUTES".into());
    assert!(vars.len() > 30, "the scan found too few variables: {vars:?}");
    vars
}

/// `STEWARD_HOOK_<NAME>_TOKEN` is read for every generic hook.
fn is_hook_token(name: &str) -> bool {
    name.starts_with("STEWARD_HOOK_") && name.ends_with("_TOKEN")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

#[test]
fn env_example_lists_exactly_what_steward_reads() {
    let steward = read_by_steward();
    let example = read("deploy/.env.example");
    let listed = names(&example, r"(?m)^#?\s*([A-Z][A-Z0-9_]+)=");
    let missing: Vec<&String> = steward.iter().filter(|v| !listed.contains(*v)).collect();
    assert!(
        missing.is_empty(),
        "read by steward but not in .env.example: {missing:?}"
    );
    assert!(
        example.contains("STEWARD_HOOK_<NAME>_TOKEN"),
        "the hook token pattern is explained"
    );
    let unknown: Vec<&String> = listed
        .iter()
        .filter(|v| !steward.contains(*v) && !is_hook_token(v))
        .collect();
    assert!(
        unknown.is_empty(),
        "in .env.example but read by nothing: {unknown:?}"
    );
}

#[test]
fn manifests_name_only_variables_steward_reads() {
    let steward = read_by_steward();
    let mut named = BTreeSet::new();
    // compose: ${VAR} references and the steward service's environment keys.
    let compose = read("deploy/compose.yaml");
    named.extend(names(&compose, r"\$\{([A-Z][A-Z0-9_]+)"));
    let doc: serde_yaml::Value = serde_yaml::from_str(&compose).unwrap();
    if let Some(env) = doc["services"]["steward"]["environment"].as_mapping() {
        named.extend(env.keys().filter_map(|k| k.as_str().map(str::to_string)));
    }
    // Kubernetes: ConfigMap and Secret keys, container env names.
    for file in ["configmap.yaml", "secret.yaml"] {
        let doc: serde_yaml::Value = serde_yaml::from_str(&read(&format!("deploy/k8s/{file}"))).unwrap();
        for key in ["data", "stringData"] {
            if let Some(map) = doc[key].as_mapping() {
                named.extend(map.keys().filter_map(|k| k.as_str().map(str::to_string)));
            }
        }
    }
    named.extend(names(
        &read("deploy/k8s/deployment.yaml"),
        r"- name: ([A-Z][A-Z0-9_]+)",
    ));
    // systemd and the image.
    named.extend(names(
        &read("deploy/steward.service"),
        r"Environment=([A-Z][A-Z0-9_]+)=",
    ));
    named.extend(names(
        &read("deploy/Dockerfile"),
        r"(?m)^\s*(?:ENV\s+)?([A-Z][A-Z0-9_]+)=\S",
    ));
    assert!(
        named.contains("DATABASE_URL") && named.contains("SLACK_SIGNING_SECRET"),
        "{named:?}"
    );
    let unknown: Vec<&String> = named.iter().filter(|v| !steward.contains(*v)).collect();
    assert!(
        unknown.is_empty(),
        "deploy/ names variables steward never reads: {unknown:?}"
    );
}

#[test]
fn deploy_yaml_parses_and_compose_config_passes() {
    let mut files = Vec::new();
    yaml_files(&repo().join("deploy"), &mut files);
    assert!(files.len() >= 12, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        serde_yaml::from_str::<serde_yaml::Value>(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    // The Slack manifest has the scopes steward's features need.
    let manifest: serde_yaml::Value = serde_yaml::from_str(&read("deploy/slack-app-manifest.yaml")).unwrap();
    let scopes: Vec<&str> = manifest["oauth_config"]["scopes"]["bot"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for needed in [
        "app_mentions:read",
        "chat:write",
        "reactions:write",
        "reactions:read",
        "users:read",
        "channels:join",
        "files:write",
        "im:write",
        "groups:read",
        "search:read.public",
    ] {
        assert!(scopes.contains(&needed), "missing scope {needed}");
    }
    // Buttons (approvals, feedback) post to the interactivity route.
    let interactivity = &manifest["settings"]["interactivity"];
    assert_eq!(interactivity["is_enabled"].as_bool(), Some(true));
    assert!(
        interactivity["request_url"]
            .as_str()
            .unwrap()
            .ends_with("/slack/interactivity")
    );
    let has_compose = std::process::Command::new("docker")
        .args(["compose", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_compose {
        let out = std::process::Command::new("docker")
            .args(["compose", "-f", "deploy/compose.yaml", "config", "-q"])
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "docker compose config: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_image_build_stage_copies_what_the_build_reads() {
    let dockerfile = read("deploy/Dockerfile");
    // The text after the first FROM, up to the second: the build stage.
    let build_stage = dockerfile.split("\nFROM ").nth(1).unwrap();
    let copied = names(build_stage, r"(?m)^COPY (\S+) ");
    // Files compiled in from outside src/ (the harness prompt, for one).
    let mut outside = BTreeSet::new();
    let mut stack = vec![repo().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for rel in names(&text, r#"include_(?:str|bytes)!\("([^"]+)"\)"#) {
                    let file = path.parent().unwrap().join(&rel);
                    let file = file.canonicalize().unwrap_or_else(|e| panic!("{rel}: {e}"));
                    let top = file.strip_prefix(repo()).unwrap().components().next().unwrap();
                    outside.insert(top.as_os_str().to_string_lossy().into_owned());
                }
            }
        }
    }
    assert!(outside.contains("prompts"), "{outside:?}");
    // The shipped image exports traces over gRPC too (OTEL_EXPORTER_OTLP_PROTOCOL=grpc).
    assert!(
        build_stage.matches("--features grpc").count() == 2,
        "both image build steps enable the grpc feature"
    );
    for dir in &outside {
        assert!(
            copied.contains(dir),
            "the build stage compiles in {dir}/ but does not COPY it: {copied:?}"
        );
    }
    // Cargo refuses a manifest whose bench files are missing: the stub step makes one
    // for each bench the manifest names, rather than a list that falls behind.
    assert!(build_stage.contains("[[bench]]") && build_stage.contains("Cargo.toml); do"));
    // Nothing the Dockerfile copies is left out of the build context.
    let ignored: BTreeSet<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(String::from)
        .collect();
    let all_copied = names(&dockerfile, r"(?m)^COPY (?:--chown=\S+ )?([^-\s]\S*) ");
    assert!(all_copied.contains("agents"), "{all_copied:?}");
    for path in &all_copied {
        assert!(
            !ignored.contains(path),
            ".dockerignore leaves out {path}, which the Dockerfile copies"
        );
    }
}

#[test]
fn the_ingress_routes_every_url_the_slack_manifest_names() {
    let manifest = read("deploy/slack-app-manifest.yaml");
    let urls = names(&manifest, r"request_url: https://[^/\s]+(/[^\s#]+)");
    assert!(
        urls.contains("/slack/events") && urls.contains("/slack/interactivity"),
        "{urls:?}"
    );
    let ingress: serde_yaml::Value = serde_yaml::from_str(&read("deploy/k8s/ingress.yaml")).unwrap();
    let routed: BTreeSet<String> = ingress["spec"]["rules"][0]["http"]["paths"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str().map(str::to_string))
        .collect();
    let missing: Vec<&String> = urls.iter().filter(|u| !routed.contains(*u)).collect();
    assert!(missing.is_empty(), "the Ingress does not route {missing:?}");
}
