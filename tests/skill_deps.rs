//! Skills' Python requirements, installed for real: a local package index on 127.0.0.1
//! serving a wheel, `steward skills install` (once per declaration, never again), and
//! the script importing it inside the bubblewrap sandbox. Needs bubblewrap and python3
//! with pip (`.ci/deps` installs them).

mod support;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use steward::sandbox::process::{Job, ProcessLimits, ProcessSandbox, find_program};
use steward::skills::SkillSet;
use steward::skills::deps::{DepsCache, DepsState};
use support::*;

const WHEEL: &str = "stwdemo-1.0-py3-none-any.whl";

/// A pure-Python wheel of `stwdemo` 1.0, made here (no network, no build tools).
fn wheel() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default();
        let files = [
            (
                "stwdemo/__init__.py",
                "def hello():\n    return 'hello from stwdemo'\n",
            ),
            (
                "stwdemo-1.0.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: stwdemo\nVersion: 1.0\n",
            ),
            (
                "stwdemo-1.0.dist-info/WHEEL",
                "Wheel-Version: 1.0\nGenerator: steward-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            ),
            (
                "stwdemo-1.0.dist-info/RECORD",
                "stwdemo/__init__.py,,\nstwdemo-1.0.dist-info/METADATA,,\nstwdemo-1.0.dist-info/WHEEL,,\nstwdemo-1.0.dist-info/RECORD,,\n",
            ),
        ];
        for (name, text) in files {
            zip.start_file(name, options).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
    }
    out.into_inner()
}

/// A PEP 503 "simple" index with one project, counting wheel downloads.
async fn index() -> (String, Arc<AtomicUsize>) {
    index_of("stwdemo", WHEEL, wheel()).await
}

/// A "simple" index serving `file` (`bytes`) as the one release of `project`.
async fn index_of(project: &str, file: &str, bytes: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let downloads = Arc::new(AtomicUsize::new(0));
    let counted = downloads.clone();
    let page = format!("<html><body><a href=\"/files/{file}\">{file}</a></body></html>");
    let app = axum::Router::new()
        .route(
            &format!("/simple/{project}/"),
            axum::routing::get(move || async move { axum::response::Html(page) }),
        )
        .route(
            &format!("/files/{file}"),
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async move { bytes }
            }),
        );
    (format!("{}/simple", serve(app).await), downloads)
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "prompts/skills/demo/SKILL.md",
        "---\nname: demo\ndescription: Says hello through a package.\n---\nRun scripts/hello.py.\n",
    );
    write(root, "prompts/skills/demo/requirements.txt", "stwdemo==1.0\n");
    write(
        root,
        "prompts/skills/demo/scripts/hello.py",
        "import stwdemo\nprint(stwdemo.hello())\n",
    );
    write(
        root,
        "prompts/skills/demo/scripts/bare.py",
        "import yaml_not_declared\n",
    );
    dir
}

#[tokio::test]
async fn declared_requirements_install_once_and_scripts_import_them_in_the_sandbox() {
    let dir = tree();
    let root = dir.path();
    let (index, downloads) = index().await;
    let cache = root.join("cache");
    // The index is on 127.0.0.1, an internal address the installs' proxy refuses unless
    // the operator opens it.
    let env = [
        ("PIP_INDEX_URL", index.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
        ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
    ];
    let o = steward_in_async(root, &["skills", "list", "--json"], &env).await;
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list["skills"][0]["requirements"]["declared"][0], "stwdemo==1.0");
    assert_eq!(list["skills"][0]["requirements"]["state"], "not installed");

    let o = steward_in_async(root, &["skills", "install", "demo"], &env).await;
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("demo: installed in"),
        "{}",
        output_text(&o)
    );
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
    // Once per declaration: a second install downloads nothing.
    let o = steward_in_async(root, &["skills", "install"], &env).await;
    assert!(o.status.success(), "{}", output_text(&o));
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
    let o = steward_in_async(root, &["skills", "list"], &env).await;
    assert!(
        output_text(&o).contains("requirements (installed): stwdemo==1.0"),
        "{}",
        output_text(&o)
    );

    // In the sandbox, the script imports the installed package from /deps.
    let skills = SkillSet::load(root, &[]).with_deps(Arc::new(DepsCache::new(cache.clone(), Vec::new())));
    let skill = &skills.skills["demo"];
    let python = find_program("python3").unwrap();
    let DepsState::Ready(folder) = skills.deps.state(skill, &python) else {
        panic!("not installed: {:?}", skills.deps.state(skill, &python));
    };
    let site = skills.deps.ensure(skill, &python).await.unwrap().unwrap();
    assert_eq!(site, folder.join("site"));
    let sandbox = ProcessSandbox::detect(
        std::env::temp_dir().join(format!("steward-deps-test-{}", std::process::id())),
    );
    assert!(sandbox.unavailable().is_none(), "{:?}", sandbox.unavailable());
    let run = |script: &'static str, deps: Option<std::path::PathBuf>| {
        let (sandbox, dir, python) = (&sandbox, skill.dir.clone(), python.clone());
        async move {
            sandbox
                .run(
                    &Job {
                        skill_dir: &dir,
                        script,
                        interpreter: &python,
                        args: &[],
                        stdin: None,
                        inputs: &[],
                        deps: deps.as_deref(),
                        proxy: None,
                    },
                    &ProcessLimits::default(),
                )
                .await
                .unwrap()
        }
    };
    let with = run("scripts/hello.py", Some(site.clone())).await;
    assert_eq!(
        String::from_utf8_lossy(&with.stdout).trim(),
        "hello from stwdemo",
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    let without = run("scripts/hello.py", None).await;
    let err = String::from_utf8_lossy(&without.stderr).into_owned();
    assert!(err.contains("No module named 'stwdemo'"), "{err}");
    // A module no requirement provides: the hint names the file to declare it in.
    let bare = run("scripts/bare.py", Some(site)).await;
    let hint =
        steward::skills::deps::missing_module_hint(&String::from_utf8_lossy(&bare.stderr), skill).unwrap();
    assert!(
        hint.contains("'yaml_not_declared'")
            && hint.contains("stwdemo==1.0")
            && hint.contains("requirements.txt"),
        "{hint}"
    );
}

#[tokio::test]
async fn a_requirement_the_index_lacks_fails_with_the_installers_error_and_leaves_nothing_behind() {
    let dir = tree();
    let root = dir.path();
    write(root, "prompts/skills/demo/requirements.txt", "stwmissing==9\n");
    let (index, _) = index().await;
    let cache = root.join("cache");
    let env = [
        ("PIP_INDEX_URL", index.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
        ("OPENAI_API_KEY", "sk-must-not-reach-the-installer"),
        ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
    ];
    let o = steward_in_async(root, &["skills", "install", "demo"], &env).await;
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let text = output_text(&o);
    assert!(
        text.contains("demo: the installer failed") && text.contains("stwmissing"),
        "{text}"
    );
    // Nothing half-installed is left to look finished.
    let left: Vec<_> = std::fs::read_dir(&cache)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// Installs go through an egress proxy that allows the package index's hosts only: a
/// requirement naming a file elsewhere, or an index at an internal address the operator
/// did not open, fails with the proxy's reason.
#[tokio::test]
async fn installs_reach_the_package_index_only() {
    let dir = tree();
    let root = dir.path();
    let (index, downloads) = index().await;
    let port = index
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // The same server under another name: not the index.
    write(
        root,
        "prompts/skills/demo/requirements.txt",
        &format!("stwdemo @ http://localhost:{port}/files/{WHEEL}\n"),
    );
    let cache = root.join("cache");
    let env = [
        ("PIP_INDEX_URL", index.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
        ("STEWARD_HTTP_ALLOW", "127.0.0.1,localhost"),
    ];
    let o = steward_in_async(root, &["skills", "install", "demo"], &env).await;
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("localhost:{port} is not in the package index's hosts")),
        "{text}"
    );
    assert_eq!(downloads.load(Ordering::SeqCst), 0);

    // The index itself, at an internal address nobody opened.
    write(root, "prompts/skills/demo/requirements.txt", "stwdemo==1.0\n");
    let env = [
        ("PIP_INDEX_URL", index.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
    ];
    let o = steward_in_async(root, &["skills", "install", "demo"], &env).await;
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("127.0.0.1, a loopback address"), "{text}");
    assert_eq!(downloads.load(Ordering::SeqCst), 0);
}

/// The public `pdf` skill's real requirement: the `pypdf` wheel from PyPI (`.ci/deps`
/// downloads it into `target/test-wheels`), served by a local index, installed once,
/// and used by a script in the sandbox to write and read back a PDF.
#[tokio::test]
async fn the_pdf_skills_pypdf_installs_once_and_works_in_the_sandbox() {
    let wheels = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-wheels");
    let found = std::fs::read_dir(&wheels).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("pypdf-") && n.ends_with(".whl"))
    });
    let Some(file) = found else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no pypdf wheel in {}: .ci/deps downloads it",
            wheels.display()
        );
        eprintln!("skipped: no pypdf wheel in {} (run .ci/deps)", wheels.display());
        return;
    };
    let (index, downloads) = index_of("pypdf", &file, std::fs::read(wheels.join(&file)).unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "prompts/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Reads and writes PDF files.\n---\nRun scripts/roundtrip.py.\n",
    );
    write(root, "prompts/skills/pdf/requirements.txt", "pypdf\n");
    write(
        root,
        "prompts/skills/pdf/scripts/roundtrip.py",
        "from pypdf import PdfReader, PdfWriter\nw = PdfWriter()\nfor _ in range(3):\n    w.add_blank_page(width=72, height=72)\nw.add_metadata({'/Title': 'made in the sandbox'})\nw.write('/work/out.pdf')\nr = PdfReader('/work/out.pdf')\nprint(len(r.pages), r.metadata.title)\n",
    );
    let cache = root.join("cache");
    let env = [
        ("PIP_INDEX_URL", index.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
        ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
    ];
    for _ in 0..2 {
        let o = steward_in_async(root, &["skills", "install", "pdf"], &env).await;
        assert!(o.status.success(), "{}", output_text(&o));
    }
    assert_eq!(downloads.load(Ordering::SeqCst), 1, "installed once, not again");
    let skills = SkillSet::load(root, &[]).with_deps(Arc::new(DepsCache::new(cache, Vec::new())));
    let skill = &skills.skills["pdf"];
    let python = find_program("python3").unwrap();
    let site = skills.deps.ensure(skill, &python).await.unwrap().unwrap();
    let sandbox = ProcessSandbox::detect(
        std::env::temp_dir().join(format!("steward-pypdf-test-{}", std::process::id())),
    );
    let done = sandbox
        .run(
            &Job {
                skill_dir: &skill.dir,
                script: "scripts/roundtrip.py",
                interpreter: &python,
                args: &[],
                stdin: None,
                inputs: &[],
                deps: Some(&site),
                proxy: None,
            },
            &ProcessLimits::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&done.stdout).trim(),
        "3 made in the sandbox",
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(done.files.iter().any(|f| f.name == "out.pdf"));
}

/// Node: a skill's `package.json` dependencies install with npm (`--ignore-scripts`)
/// from a local registry on 127.0.0.1, once, and a Node script requires them from
/// `/deps` in the sandbox.
#[tokio::test]
async fn a_skills_package_json_installs_once_and_node_scripts_require_it() {
    let (Some(_), Some(node)) = (find_program("npm"), find_program("node")) else {
        assert!(std::env::var_os("CI").is_none(), "CI machines have node and npm");
        eprintln!("skipped: no node and npm on this host");
        return;
    };
    // The package, packed by npm itself (offline).
    let pkg = tempfile::tempdir().unwrap();
    write(
        pkg.path(),
        "package.json",
        r#"{"name": "stwnode", "version": "1.0.0", "main": "index.js", "scripts": {"install": "echo must-not-run > /tmp/stwnode-install-ran"}}"#,
    );
    write(
        pkg.path(),
        "index.js",
        "exports.hello = () => 'hello from stwnode';\n",
    );
    let packed = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(pkg.path())
        .current_dir(pkg.path())
        .output()
        .unwrap();
    assert!(
        packed.status.success(),
        "{}",
        String::from_utf8_lossy(&packed.stderr)
    );
    let tarball = std::fs::read(pkg.path().join("stwnode-1.0.0.tgz")).unwrap();
    let integrity = {
        use base64::Engine;
        use sha2::Digest;
        format!(
            "sha512-{}",
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&tarball))
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let registry = format!("http://{}/", listener.local_addr().unwrap());
    let packument = serde_json::json!({
        "name": "stwnode",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": "stwnode",
            "version": "1.0.0",
            "main": "index.js",
            "scripts": {"install": "echo must-not-run > /tmp/stwnode-install-ran"},
            "dist": {"tarball": format!("{registry}stwnode/-/stwnode-1.0.0.tgz"), "integrity": integrity},
        }},
    });
    let downloads = Arc::new(AtomicUsize::new(0));
    let counted = downloads.clone();
    let app = axum::Router::new()
        .route(
            "/stwnode",
            axum::routing::get(move || async move { axum::Json(packument) }),
        )
        .route(
            "/stwnode/-/stwnode-1.0.0.tgz",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async move { tarball }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "prompts/skills/nodedemo/SKILL.md",
        "---\nname: nodedemo\ndescription: Says hello through an npm package.\n---\nRun scripts/hello.js.\n",
    );
    write(
        root,
        "prompts/skills/nodedemo/package.json",
        r#"{"name": "nodedemo", "private": true, "dependencies": {"stwnode": "1.0.0"}}"#,
    );
    write(
        root,
        "prompts/skills/nodedemo/scripts/hello.js",
        "console.log(require('stwnode').hello());\n",
    );
    let cache = root.join("cache");
    let env = [
        ("NPM_CONFIG_REGISTRY", registry.as_str()),
        ("STEWARD_SKILL_DEPS_DIR", cache.to_str().unwrap()),
        ("STEWARD_HTTP_ALLOW", "127.0.0.1"),
    ];
    let o = steward_in_async(root, &["skills", "list", "--json"], &env).await;
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        list["skills"][0]["node_requirements"],
        serde_json::json!({"declared": ["stwnode@1.0.0"], "state": "not installed"})
    );
    for _ in 0..2 {
        let o = steward_in_async(root, &["skills", "install", "nodedemo"], &env).await;
        assert!(o.status.success(), "{}", output_text(&o));
    }
    assert_eq!(downloads.load(Ordering::SeqCst), 1, "installed once");
    assert!(
        !std::path::Path::new("/tmp/stwnode-install-ran").exists(),
        "a package's install script never runs"
    );
    let skills = SkillSet::load(root, &[]).with_deps(Arc::new(DepsCache::new(cache, Vec::new())));
    let skill = &skills.skills["nodedemo"];
    let modules = skills.deps.ensure(skill, &node).await.unwrap().unwrap();
    assert!(modules.ends_with("node/node_modules"), "{}", modules.display());
    let sandbox = ProcessSandbox::detect(
        std::env::temp_dir().join(format!("steward-node-deps-test-{}", std::process::id())),
    );
    let limits = ProcessLimits {
        // Node reserves much address space.
        memory_bytes: 8 << 30,
        ..ProcessLimits::default()
    };
    let run = |deps: Option<std::path::PathBuf>| {
        let (sandbox, dir, node, limits) = (&sandbox, skill.dir.clone(), node.clone(), limits.clone());
        async move {
            sandbox
                .run(
                    &Job {
                        skill_dir: &dir,
                        script: "scripts/hello.js",
                        interpreter: &node,
                        args: &[],
                        stdin: None,
                        inputs: &[],
                        deps: deps.as_deref(),
                        proxy: None,
                    },
                    &limits,
                )
                .await
                .unwrap()
        }
    };
    let with = run(Some(modules)).await;
    assert_eq!(
        String::from_utf8_lossy(&with.stdout).trim(),
        "hello from stwnode",
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    let without = run(None).await;
    let hint = steward::skills::deps::missing_module_hint(&String::from_utf8_lossy(&without.stderr), skill)
        .expect("a hint for the missing module");
    assert!(
        hint.contains("'stwnode'") && hint.contains("package.json"),
        "{hint}"
    );
}
