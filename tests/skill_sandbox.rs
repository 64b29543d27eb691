//! Python and shell skill scripts in the bubblewrap sandbox: runs through the tool
//! gateway against the fake model server with a real SQLite store, and attack scripts
//! against the sandbox itself. Needs bubblewrap (`.ci/deps` installs it).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::run::Termination;
use steward::sandbox::process::{Job, ProcessLimits, ProcessSandbox, Stop, WorkFile, find_program};
use steward::skills::SkillSet;
use steward::triggers::TriggerEvent;
use support::*;
use tokio_util::sync::CancellationToken;

fn sandbox() -> Arc<ProcessSandbox> {
    let base = std::env::temp_dir().join(format!("steward-sandbox-test-{}", std::process::id()));
    let sandbox = ProcessSandbox::detect(base);
    if let Some(why) = sandbox.unavailable() {
        panic!("the script sandbox is unavailable ({why}); install bubblewrap (.ci/deps does)");
    }
    Arc::new(sandbox)
}

/// A folder holding one skill's scripts, mounted as the skill.
fn skill_dir(scripts: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in scripts {
        write(dir.path(), rel, text);
    }
    dir
}

async fn run_script(
    sandbox: &ProcessSandbox,
    dir: &Path,
    script: &str,
    interpreter: &str,
    args: &[&str],
    limits: &ProcessLimits,
) -> steward::sandbox::process::Finished {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let program = find_program(interpreter).unwrap();
    sandbox
        .run(
            &Job {
                skill_dir: dir,
                script,
                interpreter: &program,
                args: &args,
                stdin: None,
                inputs: &[],
                deps: None,
                proxy: None,
            },
            limits,
        )
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const FILL_FORM: &str = r#"import json, sys
# Fills a form template from the answers file named on the command line.
answers = json.load(open(sys.argv[1]))
template = open(sys.argv[2]).read()
filled = template.format(**answers)
open("filled.txt", "w").write(filled)
print(json.dumps({"fields": sorted(answers), "bytes": len(filled)}))
"#;

const GREET: &str =
    "#!/bin/bash\nset -e\nread -r who\necho \"hello $who from $1 and $2\"\necho 'to stderr' >&2\n";

const FAIL: &str = "import sys\nprint('half done')\nprint('Traceback: the form has no field named total', file=sys.stderr)\nsys.exit(3)\n";

/// A config root with one agent and a skill shipping Python and shell scripts.
fn form_tree(interpreters: &str) -> (tempfile::TempDir, Config, SkillSet) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You fill forms.");
    write(
        root,
        "prompts/skills/forms/SKILL.md",
        "---\nname: forms\ndescription: Fill text forms from answers.\ncompatibility: Needs python3.\nlicense: Apache-2.0\n---\nRun scripts/fill_form.py ANSWERS TEMPLATE.\n",
    );
    write(root, "prompts/skills/forms/scripts/fill_form.py", FILL_FORM);
    write(root, "prompts/skills/forms/scripts/greet.sh", GREET);
    write(root, "prompts/skills/forms/scripts/fail.py", FAIL);
    write(root, "prompts/skills/forms/scripts/hello.rb", "puts 'hi'\n");
    write(
        root,
        "prompts/skills/forms/scripts/requirements.txt",
        "# none: the standard library fills text forms (tests/skill_deps.rs installs real ones)\n",
    );
    write(
        root,
        "agents/filler.yaml",
        &format!(
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [file_read]\nskills:\n  scripts:\n    interpreters: {interpreters}\n    timeout: 20s\n"
        ),
    );
    let skills = SkillSet::load(root, &[]);
    let known = Known {
        tools: builtin_registry().names(),
        skills: skills.names(),
    };
    let config = Config::load(root, &known).unwrap_or_else(|d| panic!("{d}"));
    (dir, config, skills)
}

/// Runs the filler agent once: the model asks for `calls`, then answers.
async fn filler_round(
    skills: SkillSet,
    config: &Config,
    calls: &[(&str, &str, &str)],
    attach: Vec<steward::files::NewFile>,
) -> (
    FakeModel,
    steward::run::Runner,
    steward::run::RunOutcome,
    tempfile::TempDir,
) {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(calls)));
    fake.push(Reply::ok(openai_text("done")));
    let tools = builtin_registry();
    let (dir, mut runner) = runner(providers(Some(&fake), None), tools, false).await;
    runner.skills = Arc::new(skills);
    let mut trigger = TriggerEvent::from_cli(json!({"text": "fill the form"}));
    trigger.attachments = attach;
    let agent = config.agent("filler").unwrap();
    let out = runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    (fake, runner, out, dir)
}

#[tokio::test]
async fn a_python_script_fills_a_form_from_input_files_and_its_output_becomes_a_run_file() {
    let (_root, config, skills) = form_tree("[python3, bash, sh]");
    let skills = skills.with_sandbox(sandbox());
    let attach = vec![
        steward::files::NewFile {
            name: "answers.json".into(),
            mime: "application/json".into(),
            content: br#"{"name": "Ada", "team": "Platform"}"#.to_vec(),
        },
        steward::files::NewFile {
            name: "template.txt".into(),
            mime: "text/plain".into(),
            content: b"Name: {name}\nTeam: {team}\n".to_vec(),
        },
    ];
    let (fake, runner, out, _d) = filler_round(
        skills,
        &config,
        &[
            ("l1", "load_skills", r#"{"names": ["forms"]}"#),
            (
                "s1",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/fill_form.py", "args": ["answers.json", "template.txt"], "files": ["f_1", "f_2"]}"#,
            ),
            (
                "s2",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/greet.sh", "args": ["argv-one", "argv two"], "stdin": "Grace\n"}"#,
            ),
        ],
        attach,
    )
    .await;
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let results = tool_results(&fake);
    let loaded = &results["l1"];
    assert!(
        loaded.contains("License: Apache-2.0\nCompatibility: Needs python3."),
        "{loaded}"
    );
    assert!(
        !loaded.contains("scripts' requirements"),
        "it declares none: {loaded}"
    );
    let filled: Value = serde_json::from_str(&results["s1"]).unwrap();
    assert_eq!(filled["exit_code"], 0);
    assert_eq!(
        serde_json::from_str::<Value>(filled["stdout"].as_str().unwrap().trim()).unwrap(),
        json!({"fields": ["name", "team"], "bytes": 25})
    );
    assert_eq!(
        filled["files"],
        json!([{"id": "f_3", "name": "filled.txt", "bytes": 25}])
    );
    // The written file is a run file like any other, stored with the run.
    let files = runner.store.run_files(&out.run_id).await.unwrap();
    let stored = files.iter().find(|f| f.id == "f_3").unwrap();
    assert_eq!(stored.content, b"Name: Ada\nTeam: Platform\n");
    assert_eq!(stored.meta["source"], "script_output");

    let greet: Value = serde_json::from_str(&results["s2"]).unwrap();
    assert_eq!(greet["stdout"], "hello Grace from argv-one and argv two\n");
    assert_eq!(greet["stderr"], "to stderr");
    assert_eq!(greet["files"], json!([]));

    // The model sees `load_skills` names as an enum of the skills it may load.
    let tools = &fake.requests()[0].body["tools"];
    let load = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "load_skills")
        .unwrap();
    assert_eq!(
        load["function"]["parameters"]["properties"]["names"]["items"]["enum"],
        json!(["forms"])
    );
}

/// A script's input files are written once each, and held to its work folder's byte
/// limit before they are written: one file named twice fits, two that together pass
/// the limit are refused with the reason.
#[tokio::test]
async fn input_files_are_given_once_and_held_to_the_work_folders_limit() {
    // `max_written_mb: 1`, through the tree's interpreters line.
    let (_root, config, skills) = form_tree("[python3, bash, sh]\n    max_written_mb: 1");
    let skills = skills.with_sandbox(sandbox());
    let file = |name: &str| steward::files::NewFile {
        name: name.into(),
        mime: "text/plain".into(),
        content: vec![b'x'; 600 * 1024],
    };
    let (fake, _runner, out, _d) = filler_round(
        skills,
        &config,
        &[
            ("l1", "load_skills", r#"{"names": ["forms"]}"#),
            (
                "twice",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/greet.sh", "args": ["a", "b"], "stdin": "Ada\n", "files": ["f_1", "f_1"]}"#,
            ),
            (
                "both",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/greet.sh", "args": ["a", "b"], "stdin": "Ada\n", "files": ["f_1", "f_2"]}"#,
            ),
        ],
        vec![file("one.txt"), file("two.txt")],
    )
    .await;
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let results = tool_results(&fake);
    assert!(results["twice"].contains("hello Ada"), "{}", results["twice"]);
    assert!(
        results["both"].contains(
            "its input files are more than a script's work folder holds (100 files, 1048576 bytes)"
        ),
        "{}",
        results["both"]
    );
}

#[tokio::test]
async fn failures_name_the_exit_code_the_scripts_and_the_interpreter() {
    let (_root, config, skills) = form_tree("[python3]");
    let skills = skills.with_sandbox(sandbox());
    let (fake, _runner, out, _d) = filler_round(
        skills,
        &config,
        &[
            (
                "a",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/fail.py"}"#,
            ),
            (
                "b",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/check_fields.py"}"#,
            ),
            (
                "c",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/greet.sh"}"#,
            ),
            (
                "d",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/hello.rb"}"#,
            ),
            (
                "e",
                "run_skill_script",
                r#"{"skill": "forms", "script": "scripts/fail.py", "args": {"x": 1}}"#,
            ),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(out.termination, Termination::Completed);
    let r = tool_results(&fake);
    assert_eq!(
        r["a"],
        "error: forms/scripts/fail.py exited with code 3.\nstderr (last 2000 bytes at most):\nTraceback: the form has no field named total\nstdout (last 2000 bytes at most):\nhalf done"
    );
    assert_eq!(
        r["b"],
        "error: skill 'forms' has no script 'scripts/check_fields.py'; its scripts: scripts/fail.py, scripts/fill_form.py, scripts/greet.sh, scripts/hello.rb, scripts/requirements.txt"
    );
    assert_eq!(
        r["c"],
        "error: forms/scripts/greet.sh needs the interpreter 'bash', which this agent does not allow (allowed: python3)"
    );
    assert!(r["d"].contains("needs the interpreter 'ruby'"), "{}", r["d"]);
    assert_eq!(
        r["e"],
        "error: scripts/fail.py takes `args` as a list of strings (command-line arguments)"
    );
}

#[tokio::test]
async fn without_a_sandbox_scripts_are_refused_and_the_catalog_says_so() {
    let (_root, config, skills) = form_tree("[python3]");
    let skills = skills.with_sandbox(Arc::new(ProcessSandbox::disabled(
        "bubblewrap cannot create its namespaces here (test)",
    )));
    assert_eq!(
        skills.scripts_unavailable().map(|(_, names)| names),
        Some(vec!["forms"])
    );
    let (fake, _runner, _out, _d) = filler_round(
        skills,
        &config,
        &[(
            "a",
            "run_skill_script",
            r#"{"skill": "forms", "script": "scripts/fill_form.py"}"#,
        )],
        Vec::new(),
    )
    .await;
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("- forms: Fill text forms from answers. (scripts unavailable on this host)"),
        "{system}"
    );
    assert_eq!(
        tool_results(&fake)["a"],
        "error: forms/scripts/fill_form.py cannot run: Python, shell and Node skill scripts are unavailable on this host (bubblewrap cannot create its namespaces here (test))"
    );
}

#[tokio::test]
async fn the_sandbox_hides_the_host_network_environment_and_processes() {
    let sandbox = sandbox();
    // A database file and a listener on the host the script must not reach.
    let host = tempfile::tempdir().unwrap();
    let db = host.path().join("steward.db");
    std::fs::write(&db, "SECRET ROWS").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!(
        r#"import os, socket, json, resource
out = {{}}
out["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    out["net"] = "connected"
except OSError as e:
    out["net"] = type(e).__name__
for path in ["{db}", "/etc/shadow", "/root", "/work/../etc/passwd"]:
    out[path] = os.path.exists(path)
out["env"] = sorted(os.environ)
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
try:
    open("/usr/evil", "w")
    out["usr"] = "writable"
except OSError as e:
    out["usr"] = type(e).__name__
try:
    open("/skill/scripts/probe.py", "a")
    out["skill"] = "writable"
except OSError as e:
    out["skill"] = type(e).__name__
out["uid"] = os.getuid()
print(json.dumps(out))
"#,
        db = db.display()
    );
    let dir = skill_dir(&[("scripts/probe.py", &probe)]);
    // `serve` raises its open-file limit to the hard one: the sandbox must not inherit it.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit structures for the calls to read and write.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let done = run_script(
        &sandbox,
        dir.path(),
        "scripts/probe.py",
        "python3",
        &[],
        &ProcessLimits::default(),
    )
    .await;
    assert_eq!(done.stop, Stop::Exited(0), "{}", text(&done.stderr));
    let seen: Value = serde_json::from_str(text(&done.stdout).trim()).unwrap();
    assert_ne!(seen["net"], "connected", "no network: {seen}");
    let nofile = &seen["nofile"];
    assert!(
        nofile[0].as_u64().unwrap() <= 1024 && nofile[1].as_u64().unwrap() <= 1024,
        "the sandbox keeps a session's open-file limit: {nofile}"
    );
    assert_eq!(
        seen[db.display().to_string()],
        false,
        "the host's files are not visible"
    );
    assert_eq!(seen["/etc/shadow"], false);
    assert_eq!(seen["/root"], false);
    assert_eq!(seen["/work/../etc/passwd"], false);
    // Only what the sandbox sets (bubblewrap adds PWD, Python may add LC_CTYPE):
    // nothing of steward's.
    let allowed = [
        "PWD",
        "HOME",
        "LANG",
        "LC_CTYPE",
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "SKILL_DIR",
        "TMPDIR",
    ];
    for k in seen["env"].as_array().unwrap() {
        assert!(
            allowed.contains(&k.as_str().unwrap()),
            "{k} leaked into the sandbox"
        );
    }
    let pids = seen["pids"].as_array().unwrap();
    assert!(pids.len() <= 3, "only the sandbox's own processes: {pids:?}");
    assert_ne!(seen["usr"], "writable", "the system is read-only");
    assert_ne!(seen["skill"], "writable", "the skill folder is read-only");
    assert_eq!(seen["uid"], 65534);
}

/// Everything in a sandbox is the kernel's first choice when memory runs out, so a
/// script past the host's memory dies before steward (set inside the sandbox, which
/// works whoever steward runs as).
#[tokio::test]
async fn a_script_is_killed_before_steward_when_memory_runs_out() {
    let dir = skill_dir(&[("s.sh", "cat /proc/self/oom_score_adj\n")]);
    let out = run_script(
        &sandbox(),
        dir.path(),
        "s.sh",
        "sh",
        &[],
        &ProcessLimits::default(),
    )
    .await;
    assert_eq!(text(&out.stdout), "1000\n");
}

/// Scripts at once are bounded across the process: one past the slots waits, for at
/// most its own wall time, then fails with the reason.
#[tokio::test]
async fn scripts_past_the_processs_slots_wait_then_fail_as_busy() {
    let base = std::env::temp_dir().join(format!("steward-sandbox-slots-{}", std::process::id()));
    let sandbox = Arc::new(ProcessSandbox::detect(base).with_slots(1));
    let dir = skill_dir(&[("s.sh", "sleep 1\necho done\n")]);
    let long = ProcessLimits {
        wall: Duration::from_secs(10),
        ..ProcessLimits::default()
    };
    let short = ProcessLimits {
        wall: Duration::from_millis(200),
        ..ProcessLimits::default()
    };
    let program = find_program("sh").unwrap();
    let job = Job {
        skill_dir: dir.path(),
        script: "s.sh",
        interpreter: &program,
        args: &[],
        stdin: None,
        inputs: &[],
        deps: None,
        proxy: None,
    };
    let (first, second) = tokio::join!(sandbox.run(&job, &long), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sandbox.run(&job, &short).await
    });
    assert_eq!(text(&first.unwrap().stdout), "done\n");
    let err = second.unwrap_err().to_string();
    assert!(
        err.contains("every script slot of this process stayed busy"),
        "{err}"
    );
    // Once the slot is free, the next one runs.
    let third = sandbox.run(&job, &long).await.unwrap();
    assert_eq!(text(&third.stdout), "done\n");
}

#[tokio::test]
async fn runaway_scripts_are_stopped_at_their_limits() {
    let sandbox = sandbox();
    let dir = skill_dir(&[
        ("scripts/forkbomb.sh", "bomb() { bomb | bomb & }; bomb; sleep 5\n"),
        ("scripts/forever.py", "while True:\n    pass\n"),
        (
            "scripts/chatty.py",
            "import sys\nchunk = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(chunk)\n",
        ),
        ("scripts/filler.sh", "head -c 10000000000 /dev/zero > big.bin\n"),
        (
            "scripts/many.sh",
            "i=0; while [ $i -lt 1000 ]; do echo $i > f$i; i=$((i+1)); done; sleep 5\n",
        ),
        ("scripts/hog.py", "x = bytearray(2 * 1024 * 1024 * 1024)\n"),
        (
            "scripts/sparse.sh",
            "i=0; while [ $i -lt 40 ]; do truncate -s 4M f$i.txt; i=$((i+1)); done\n",
        ),
    ]);
    let limits = ProcessLimits {
        wall: Duration::from_secs(3),
        max_processes: 16,
        max_output_bytes: 64 * 1024,
        max_written_bytes: 8 * 1024 * 1024,
        ..ProcessLimits::default()
    };
    // A fork bomb meets the process limit (forks fail), and the time limit ends it.
    let done = run_script(&sandbox, dir.path(), "scripts/forkbomb.sh", "bash", &[], &limits).await;
    assert!(done.took < Duration::from_secs(10));
    assert!(
        text(&done.stderr).contains("fork: retry: Resource temporarily unavailable"),
        "{:?} {}",
        done.stop,
        text(&done.stderr)
    );
    // An endless loop is killed at the wall-time limit.
    let t = Instant::now();
    let done = run_script(
        &sandbox,
        dir.path(),
        "scripts/forever.py",
        "python3",
        &[],
        &limits,
    )
    .await;
    assert_eq!(done.stop, Stop::TimedOut);
    assert!(t.elapsed() < Duration::from_secs(8));
    // 1 GB of output stops at the cap, keeping the cap.
    let done = run_script(&sandbox, dir.path(), "scripts/chatty.py", "python3", &[], &limits).await;
    assert_eq!(done.stop, Stop::OutputCap);
    assert_eq!(done.stdout.len(), 64 * 1024);
    // Writing 10 GB stops at the write limit; nothing of it comes back.
    let done = run_script(&sandbox, dir.path(), "scripts/filler.sh", "sh", &[], &limits).await;
    assert!(
        matches!(&done.stop, Stop::Exited(c) if *c != 0) || matches!(done.stop, Stop::WriteCap(_)),
        "{:?}",
        done.stop
    );
    assert!(
        done.stop.describe(&limits, done.took).contains("stopped")
            || text(&done.stderr).contains("File too large")
    );
    assert!(
        done.files
            .iter()
            .all(|f| f.content.len() as u64 <= limits.max_written_bytes)
    );
    // Sparse files, each within the file-size limit, claiming 160 MB the disk does not
    // hold, left by a script that exits before the folder is looked at again: the
    // folder is checked at exit and nothing past the cap is read back.
    let done = run_script(&sandbox, dir.path(), "scripts/sparse.sh", "sh", &[], &limits).await;
    assert_eq!(
        done.stop,
        Stop::WriteCap("it wrote more than 8388608 bytes into its work folder".into())
    );
    assert!(done.files.is_empty(), "{} files came back", done.files.len());
    // Too many files.
    let done = run_script(&sandbox, dir.path(), "scripts/many.sh", "sh", &[], &limits).await;
    assert_eq!(
        done.stop,
        Stop::WriteCap("it created more than 100 files in its work folder".into())
    );
    // Memory past the address-space limit fails inside the script.
    let done = run_script(&sandbox, dir.path(), "scripts/hog.py", "python3", &[], &limits).await;
    assert_ne!(done.stop, Stop::Exited(0));
    assert!(
        text(&done.stderr).contains("MemoryError"),
        "{}",
        text(&done.stderr)
    );
}

/// Processes that each stay under the address-space limit but together pass the memory
/// limit are killed by the run's memory cgroup, and the script is told so.
#[tokio::test]
async fn processes_together_are_held_to_the_memory_limit() {
    let sandbox = sandbox();
    let dir = skill_dir(&[(
        "scripts/herd.py",
        "import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n        x = bytearray(120 * 1024 * 1024)\n        time.sleep(2)\n        os._exit(0)\n    kids.append(pid)\nfailed = [p for p in kids if os.waitpid(p, 0)[1] != 0]\nraise SystemExit(1 if failed else 0)\n",
    )]);
    let limits = ProcessLimits {
        wall: Duration::from_secs(20),
        memory_bytes: 300 * 1024 * 1024,
        ..ProcessLimits::default()
    };
    let done = run_script(&sandbox, dir.path(), "scripts/herd.py", "python3", &[], &limits).await;
    if sandbox.limits_memory_together() {
        assert_eq!(done.stop, Stop::MemoryLimit, "{}", text(&done.stderr));
        assert_eq!(
            done.stop.describe(&limits, done.took),
            "was killed at its memory limit (300 MB for all its processes together)"
        );
    } else {
        // Without a writable memory cgroup only each process is limited (SECURITY.md).
        assert_eq!(done.stop, Stop::Exited(0), "{}", text(&done.stderr));
    }
}

#[tokio::test]
async fn input_files_are_in_the_work_folder_and_changed_ones_come_back() {
    let sandbox = sandbox();
    let dir = skill_dir(&[(
        "scripts/edit.sh",
        "cat in.txt; echo more >> in.txt; mkdir -p out; echo new > out/new.txt; ln -s /etc/hostname link\n",
    )]);
    let inputs = [
        WorkFile {
            name: "in.txt".into(),
            content: Arc::new(b"first\n".to_vec()),
        },
        WorkFile {
            name: "same.txt".into(),
            content: Arc::new(b"unchanged\n".to_vec()),
        },
    ];
    let program = find_program("sh").unwrap();
    let done = sandbox
        .run(
            &Job {
                skill_dir: dir.path(),
                script: "scripts/edit.sh",
                interpreter: &program,
                args: &[],
                stdin: None,
                inputs: &inputs,
                deps: None,
                proxy: None,
            },
            &ProcessLimits::default(),
        )
        .await
        .unwrap();
    assert_eq!(done.stop, Stop::Exited(0), "{}", text(&done.stderr));
    assert_eq!(text(&done.stdout), "first\n");
    let names: Vec<(&str, &[u8])> = done
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.content.as_slice()))
        .collect();
    // Links are never followed out of the sandbox; unchanged inputs are not returned.
    assert_eq!(
        names,
        [("in.txt", &b"first\nmore\n"[..]), ("out/new.txt", &b"new\n"[..])]
    );
}

/// bubblewrap's PID 1 keeps the environment and command line bubblewrap started with
/// (containers/bubblewrap#725): they must hold nothing of steward's, no host path, no
/// inherited descriptor, and no nested user namespace may be made.
#[tokio::test]
async fn pid_1_shows_no_secret_or_host_path_and_user_namespaces_are_refused() {
    let sandbox = sandbox();
    let probe = r#"import os, json, subprocess
out = {}
for name in ["environ", "cmdline"]:
    try:
        out[name] = open("/proc/1/" + name, "rb").read().decode("utf-8", "replace")
    except OSError as e:
        out[name] = "unreadable: " + type(e).__name__
out["fds"] = sorted(int(f) for f in os.listdir("/proc/self/fd"))
try:
    os.unshare(os.CLONE_NEWUSER)
    out["userns"] = "created"
except (OSError, AttributeError) as e:
    out["userns"] = type(e).__name__
r = subprocess.run(["unshare", "-r", "id", "-u"], capture_output=True, text=True)
out["unshare"] = [r.returncode, r.stdout.strip()]
print(json.dumps(out))
"#;
    let dir = skill_dir(&[("scripts/peek.py", probe)]);
    let done = run_script(
        &sandbox,
        dir.path(),
        "scripts/peek.py",
        "python3",
        &[],
        &ProcessLimits::default(),
    )
    .await;
    assert_eq!(done.stop, Stop::Exited(0), "{}", text(&done.stderr));
    let seen: Value = serde_json::from_str(text(&done.stdout).trim()).unwrap();
    let environ = seen["environ"].as_str().unwrap();
    // The test process has PATH, HOME, CARGO_* ...: none of it reaches PID 1.
    assert!(
        environ.is_empty() || environ.starts_with("unreadable"),
        "PID 1's environment: {environ:?}"
    );
    let cmdline = seen["cmdline"].as_str().unwrap();
    let host_dir = dir.path().display().to_string();
    assert!(
        !cmdline.contains(&host_dir),
        "host path on PID 1's command line: {cmdline:?}"
    );
    assert!(
        !cmdline.contains("steward-sandbox-test"),
        "work folder on the command line: {cmdline:?}"
    );
    // stdin, stdout, stderr and the descriptor listing /proc/self/fd itself.
    let fds: Vec<i64> = seen["fds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert!(
        fds.len() <= 4 && fds.iter().take(3).eq([0, 1, 2].iter()),
        "inherited descriptors: {fds:?}"
    );
    assert_ne!(seen["userns"], "created", "{seen}");
    assert_ne!(seen["unshare"][1], "0", "unshare -r gave uid 0: {seen}");
    assert_ne!(seen["unshare"][0], 0, "{seen}");
}

/// The seccomp filter (src/sandbox/seccomp.rs): calls no script needs fail with
/// EPERM (io_uring with ENOSYS), ordinary ones work. The same probe outside the
/// sandbox shows `unshare(0)` succeeding, so the refusal is the filter's.
#[tokio::test]
async fn system_calls_no_script_needs_are_refused() {
    let sandbox = sandbox();
    let probe = r#"import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl, io_uring_setup, bpf = (int(a) for a in sys.argv[1:4])
def call(f, *args):
    ctypes.set_errno(0)
    r = f(*args)
    return [r, ctypes.get_errno()]
print(json.dumps({
    "getpid": call(libc.getpid),
    "unshare": call(libc.unshare, 0),
    "ptrace": call(libc.ptrace, 0, 0, 0, 0),
    "keyctl": call(libc.syscall, keyctl, 0, -3, 0),
    "bpf": call(libc.syscall, bpf, 0, 0, 0),
    "io_uring": call(libc.syscall, io_uring_setup, 1, 0),
    "packet_socket": call(libc.socket, 17, 3, 0),
    "unix_socket": call(libc.socket, 1, 1, 0),
}))
"#;
    let numbers = [libc::SYS_keyctl, libc::SYS_io_uring_setup, libc::SYS_bpf].map(|n| n.to_string());
    let args: Vec<&str> = numbers.iter().map(String::as_str).collect();
    let dir = skill_dir(&[("scripts/calls.py", probe)]);
    let done = run_script(
        &sandbox,
        dir.path(),
        "scripts/calls.py",
        "python3",
        &args,
        &ProcessLimits::default(),
    )
    .await;
    assert_eq!(done.stop, Stop::Exited(0), "{}", text(&done.stderr));
    let seen: Value = serde_json::from_str(text(&done.stdout).trim()).unwrap();
    assert!(seen["getpid"][0].as_i64().unwrap() > 0, "{seen}");
    for name in ["unshare", "ptrace", "keyctl", "bpf"] {
        assert_eq!(seen[name], json!([-1, libc::EPERM]), "{name}: {seen}");
    }
    assert_eq!(seen["io_uring"], json!([-1, libc::ENOSYS]), "{seen}");
    // Sockets of the families scripts use work; others fail as if the kernel lacked
    // them (AF_PACKET without the filter fails with EPERM: the sandbox has no
    // CAP_NET_RAW).
    assert!(seen["unix_socket"][0].as_i64().unwrap() >= 0, "{seen}");
    assert_eq!(seen["packet_socket"], json!([-1, libc::EAFNOSUPPORT]), "{seen}");

    let outside = std::process::Command::new(find_program("python3").unwrap())
        .arg(dir.path().join("scripts/calls.py"))
        .args(&numbers)
        .output()
        .unwrap();
    let host: Value = serde_json::from_str(text(&outside.stdout).trim()).unwrap();
    assert_eq!(host["unshare"], json!([0, 0]), "outside the sandbox: {host}");
}

#[tokio::test]
async fn a_script_killed_at_its_cpu_limit_is_told_so() {
    let sandbox = sandbox();
    let dir = skill_dir(&[("scripts/spin.py", "while True:\n    pass\n")]);
    let limits = ProcessLimits {
        cpu_secs: 1,
        wall: Duration::from_secs(20),
        ..ProcessLimits::default()
    };
    let done = run_script(&sandbox, dir.path(), "scripts/spin.py", "python3", &[], &limits).await;
    let said = done.stop.describe(&limits, done.took);
    assert!(said.contains("CPU time limit (1 s)"), "{said} ({:?})", done.stop);
    // One that ignores the warning signal is killed at the hard limit, a second later,
    // and is told which limit, not only "signal 9".
    let dir = skill_dir(&[(
        "scripts/stubborn.py",
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n",
    )]);
    let done = run_script(
        &sandbox,
        dir.path(),
        "scripts/stubborn.py",
        "python3",
        &[],
        &limits,
    )
    .await;
    let said = done.stop.describe(&limits, done.took);
    assert!(
        said.contains("after its CPU time limit (1 s; it ignored the warning signal"),
        "{said} ({:?})",
        done.stop
    );
}
