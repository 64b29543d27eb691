//! Agent Skills and subagents against the fake model server with a real SQLite store.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::files::NewFile;
use steward::run::{Runner, Termination};
use steward::skills::{Level, SkillSet};
use steward::store::RunStatus;
use steward::triggers::TriggerEvent;
use support::*;
use tokio_util::sync::CancellationToken;

fn skill(root: &Path, folder: &str, front: &str, body: &str) {
    write(
        root,
        &format!("prompts/skills/{folder}/SKILL.md"),
        &format!("---\n{front}\n---\n{body}"),
    );
}

#[test]
fn skills_load_leniently_with_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    skill(
        root,
        "alpha",
        "name: alpha\ndescription: The first skill.",
        "# Alpha\n",
    );
    skill(
        root,
        "beta",
        "name: beta-two\ndescription: Mismatched folder.",
        "# Beta\n",
    );
    skill(
        root,
        "gamma",
        "name: gamma\ndescription: Use when: the user asks",
        "# Gamma\n",
    );
    skill(root, "delta", "name: delta", "# Delta\n");
    skill(
        root,
        "epsilon",
        "name: epsilon\ndescription: [broken",
        "# Epsilon\n",
    );
    write(
        root,
        ".agents/skills/zeta/SKILL.md",
        "---\nname: zeta\ndescription: From an extra folder.\n---\nZ\n",
    );
    let set = SkillSet::load(root, &[".agents/skills".into()]);
    assert_eq!(
        set.names().into_iter().collect::<Vec<_>>(),
        ["alpha", "beta-two", "gamma", "zeta"]
    );
    assert_eq!(set.get("gamma").unwrap().description, "Use when: the user asks");
    let diags: Vec<String> = set.diagnostics.iter().map(ToString::to_string).collect();
    let all = diags.join("\n");
    assert!(
        all.contains(
            "prompts/skills/beta/SKILL.md: warning: name 'beta-two' does not match its folder 'beta'"
        ),
        "{all}"
    );
    assert!(
        all.contains("prompts/skills/gamma/SKILL.md: warning: front matter needed quoting"),
        "{all}"
    );
    assert!(
        all.contains("prompts/skills/delta/SKILL.md: error: missing or empty 'description'; skipped"),
        "{all}"
    );
    assert!(
        all.contains("prompts/skills/epsilon/SKILL.md: error: cannot parse the front matter"),
        "{all}"
    );
    assert_eq!(
        set.diagnostics.iter().filter(|d| d.level == Level::Error).count(),
        2
    );

    // The CLI shows the same: `skills list` lists and warns, `validate` fails on errors.
    let bin = env!("CARGO_BIN_EXE_steward");
    let out = std::process::Command::new(bin)
        .args(["skills", "list"])
        .env("STEWARD_ROOT", root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("alpha")
            && text.contains("The first skill.")
            && text.contains("error: missing or empty"),
        "{text}"
    );
    let out = std::process::Command::new(bin)
        .arg("validate")
        .env("STEWARD_ROOT", root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("delta/SKILL.md: error")
            && err.contains("no agents (expected YAML files in")
            && err.contains("3 problems found"),
        "{err}"
    );
}

/// A tree with agents, subagents and skills, loaded as `steward` would.
struct Tree {
    _dir: tempfile::TempDir,
    config: Config,
    skills: SkillSet,
}

fn tree(files: &[(&str, &str)]) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        write(dir.path(), rel, text);
    }
    let skills = SkillSet::load(dir.path(), &[]);
    let known = Known {
        tools: builtin_registry().names(),
        skills: skills.names(),
    };
    let config = Config::load(dir.path(), &known).unwrap_or_else(|d| panic!("{d}"));
    Tree {
        _dir: dir,
        config,
        skills,
    }
}

async fn runner_for(t: &Tree, fake: &FakeModel) -> (tempfile::TempDir, Runner) {
    let (dir, mut runner) = runner(providers(Some(fake), None), builtin_registry(), true).await;
    runner.subagents = Arc::new(t.config.subagents.clone());
    runner.skills = Arc::new(t.skills.clone());
    (dir, runner)
}

fn tool_contents(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

const SKILLED: &[(&str, &str)] = &[
    ("prompts/p.md", "You are the skilled agent."),
    (
        "prompts/skills/alpha/SKILL.md",
        "---\nname: alpha\ndescription: Alpha know-how.\n---\nALPHA BODY\n",
    ),
    ("prompts/skills/alpha/references/more.md", "MORE ALPHA\n"),
    (
        "prompts/skills/secret/SKILL.md",
        "---\nname: secret\ndescription: Not for this agent.\n---\nSECRET BODY\n",
    ),
    (
        "prompts/skills/must/SKILL.md",
        "---\nname: must\ndescription: Always needed.\n---\nMUST BODY\n",
    ),
    (
        "agents/skilled.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\nskills: { required: [must], prohibited: [secret] }\n",
    ),
];

#[tokio::test]
async fn skills_catalog_loading_and_refusals() {
    let t = tree(SKILLED);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[
        ("c1", "load_skills", r#"{"names": ["alpha"]}"#),
        (
            "c2",
            "load_subskill",
            r#"{"skill": "alpha", "path": "../secret/SKILL.md"}"#,
        ),
        ("c3", "load_skills", r#"{"names": ["secret"]}"#),
        (
            "c4",
            "load_subskill",
            r#"{"skill": "alpha", "path": "references/more.md"}"#,
        ),
        ("c5", "load_skills", r#"{"names": ["nope"]}"#),
    ])));
    fake.push(Reply::ok(openai_text("done")));
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("skilled").unwrap();
    let (spans, guard) = capture_spans();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "go"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    drop(guard);
    assert_eq!(out.termination, Termination::Completed);

    // Each load is a span with its size, or the kind of refusal.
    let loads: Vec<(String, String, String)> = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name == "load_skill")
        .map(|(_, f)| {
            (
                f["steward.skill.name"].clone(),
                f["steward.skill.file"].clone(),
                f.get("error.type")
                    .cloned()
                    .unwrap_or_else(|| format!("{} bytes", f["steward.skill.bytes"])),
            )
        })
        .collect();
    let has = |name: &str, file: &str, outcome: &str| {
        loads
            .iter()
            .any(|(n, f, o)| n == name && f == file && o.contains(outcome))
    };
    assert!(has("must", "SKILL.md", "bytes"), "{loads:?}");
    assert!(has("alpha", "SKILL.md", "bytes"));
    // The model's own words (a path it tried, a name no skill has) stay out of traces.
    assert!(has("alpha", "(not loaded)", "outside"));
    assert!(has("(unknown)", "SKILL.md", "prohibited"));
    assert!(has("alpha", "references/more.md", "bytes"));
    assert!(has("(unknown)", "SKILL.md", "unknown"));
    assert!(
        !loads.iter().any(|(n, f, _)| n == "nope" || f.contains("..")),
        "{loads:?}"
    );
    let metrics = runner.metrics.render();
    assert!(
        metrics.contains(r#"steward_skill_loads_total{agent="skilled",skill="alpha"} 1"#),
        "{metrics}"
    );

    let reqs = fake.requests();
    let system = reqs[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("## Skills")
            && system.contains("- alpha: Alpha know-how.")
            && system.contains("- must: Always needed.")
    );
    assert!(
        !system.contains("secret"),
        "a prohibited skill is not in the catalog"
    );
    let first_user = reqs[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(
        first_user.starts_with("[steward: required skills for this agent]")
            && first_user.contains("MUST BODY")
    );
    let tool_names: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tool_names.contains(&"load_skills")
            && tool_names.contains(&"load_subskill")
            && !tool_names.contains(&"subagent")
    );

    let results = tool_contents(&reqs[1].body);
    assert_eq!(
        results[0],
        "# Skill: alpha\n\nALPHA BODY\n\n(Other files of this skill, for load_subskill: references/more.md)"
    );
    assert_eq!(
        results[1],
        "error: path '../secret/SKILL.md' must stay inside the skill folder (no '..' or absolute paths)"
    );
    assert_eq!(results[2], "error: skill 'secret' is prohibited for this agent");
    assert_eq!(results[3], "# alpha/references/more.md\n\nMORE ALPHA\n");
    assert_eq!(
        results[4],
        "error: unknown skill 'nope'; available skills: alpha, must"
    );

    let row = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert_eq!(
        row.skill_loads,
        [
            ("alpha".to_string(), 1),
            ("alpha/references/more.md".to_string(), 1),
            ("must".to_string(), 1)
        ]
        .into()
    );
}

#[tokio::test]
async fn the_request_and_required_skills_survive_every_compaction_once() {
    let t = tree(SKILLED);
    let fake = FakeModel::start().await;
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = calls.clone();
    fake.handler(move |body| {
        let size = request_tokens(body);
        if body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("You are compacting")
        {
            return Reply::ok(reported(openai_text("Summary of the work so far."), size));
        }
        let n = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= 10 {
            return Reply::ok(reported(openai_text("done"), size));
        }
        // Reading a ~1,500-token skill reference repeatedly fills the window.
        let call = openai_tools(&[(
            format!("c{n}").as_str(),
            "load_subskill",
            r#"{"skill": "alpha", "path": "references/big.md"}"#,
        )]);
        Reply::ok(reported(call, size))
    });
    let mut files: Vec<(&str, &str)> = SKILLED.to_vec();
    let big = "alpha beta gamma delta ".repeat(375);
    files.push(("prompts/skills/alpha/references/big.md", &big));
    let t2 = tree(&files);
    drop(t);
    let (_d, runner) = runner_for(&t2, &fake).await;
    let mut agent = (*t2.config.agent("skilled").unwrap()).clone();
    agent.context.window_tokens = Some(6_000);
    let request = "Please audit the alpha ledger for Q3 (ref 7731).";
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({ "text": request })),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let compactions = events.iter().filter(|e| e.kind == "compaction").count();
    assert!(compactions >= 2, "{compactions} compactions; the test needs two");
    let after = fake
        .requests()
        .into_iter()
        .rfind(|r| {
            let system = r.body["messages"][0]["content"].as_str().unwrap_or_default();
            !system.starts_with("You are compacting")
                && r.body["messages"]
                    .to_string()
                    .contains("the conversation was compacted (compaction 2)")
        })
        .expect("a request after the second compaction");
    let msgs = after.body["messages"].as_array().unwrap();
    let contents: Vec<&str> = msgs.iter().filter_map(|m| m["content"].as_str()).collect();
    let count = |needle: &str| contents.iter().filter(|c| c.contains(needle)).count();
    assert_eq!(
        count(request),
        1,
        "the original request, verbatim, once: {contents:#?}"
    );
    assert_eq!(count("MUST BODY"), 1, "the required skill, once: {contents:#?}");
    // The required skill, then the request, open the conversation after the system prompt.
    assert!(contents[1].contains("MUST BODY"), "{contents:#?}");
    assert!(contents[2].contains(request), "{contents:#?}");
    assert_eq!(
        msgs[0]["content"],
        fake.requests()[0].body["messages"][0]["content"],
        "system prompt unchanged"
    );
}

const DELEGATING: &[(&str, &str)] = &[
    ("prompts/boss.md", "You are the boss agent."),
    ("prompts/helper.md", "You are the helper subagent."),
    ("prompts/looper.md", "You are the looper subagent."),
    (
        "subagents/helper.yaml",
        "description: Helps.\nprompt: prompts/helper.md\ntools: []\n",
    ),
    (
        "subagents/looper.yaml",
        "description: Loops.\nprompt: prompts/looper.md\ntools: inherit\nlimits: { max_turns: 1 }\n",
    ),
    (
        "agents/boss.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/boss.md\ntools: [current_time]\nsubagents: [helper, looper]\n",
    ),
];

fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn subagents_run_concurrently_see_only_their_files_and_roll_up() {
    let t = tree(DELEGATING);
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let system = system_of(body);
        let reply = if system.starts_with("You are the helper subagent") {
            openai_text("helper answer")
        } else if tool_contents(body).is_empty() {
            openai_tools(&[
                (
                    "s1",
                    "subagent",
                    r#"{"name": "helper", "prompt": "Summarize b.txt", "files": ["f_2"]}"#,
                ),
                ("s2", "subagent", r#"{"name": "helper", "prompt": "Say hello"}"#),
            ])
        } else {
            openai_text("boss done")
        };
        Reply::ok(reply).delay(Duration::from_secs(1))
    });
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("boss").unwrap();
    let mut trigger = TriggerEvent::from_cli(json!({"text": "delegate"}));
    trigger.attachments = vec![
        NewFile {
            name: "a.txt".into(),
            mime: "text/plain".into(),
            content: b"secret a".to_vec(),
        },
        NewFile {
            name: "b.txt".into(),
            mime: "text/plain".into(),
            content: b"content b".to_vec(),
        },
    ];
    let out = runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    assert_eq!(out.final_text.as_deref(), Some("boss done"));

    let reqs = fake.requests();
    let parents: Vec<_> = reqs
        .iter()
        .filter(|r| system_of(&r.body).starts_with("You are the boss"))
        .collect();
    let children: Vec<_> = reqs
        .iter()
        .filter(|r| system_of(&r.body).starts_with("You are the helper"))
        .collect();
    assert_eq!((parents.len(), children.len()), (2, 2));
    // Both children (1 s each) ran between the parent's two requests, together: from the
    // first child request to the parent's next request is ~1 s, not the 2 s of a sequence.
    let child_starts: Vec<_> = children.iter().map(|c| c.at).collect();
    let first_child = child_starts[0].min(child_starts[1]);
    let both = parents[1].at - first_child;
    assert!(
        both < Duration::from_millis(1_800),
        "subagents did not overlap: {both:?}"
    );
    let spread = child_starts[1].max(child_starts[0]) - first_child;
    assert!(
        spread < Duration::from_millis(500),
        "children started {spread:?} apart"
    );
    // The parent's catalog lists its subagents; the child sees only the files it was given.
    assert!(
        system_of(&parents[0].body).contains("## Subagents")
            && system_of(&parents[0].body).contains("- helper: Helps.")
    );
    let with_file = children
        .iter()
        .find(|c| {
            c.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .contains("Summarize b.txt")
        })
        .unwrap();
    let opening = with_file.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        opening.contains("- f_2 b.txt") && !opening.contains("a.txt"),
        "{opening}"
    );
    let without = children
        .iter()
        .find(|c| {
            c.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .contains("Say hello")
        })
        .unwrap();
    assert!(
        !without.body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Files:")
    );
    // Child tools: `tools: []` plus the base tools; no subagent tool at depth 1.
    let child_tools = with_file.body["tools"].to_string();
    assert!(!child_tools.contains("\"subagent\"") && !child_tools.contains("current_time"));
    let results = tool_contents(&parents[1].body);
    assert_eq!(results, ["helper answer", "helper answer"]);

    // Child runs are recorded, linked, and their tokens roll up into the parent.
    let runs = runner.store.list_runs(10).await.unwrap();
    let kids: Vec<_> = runs
        .iter()
        .filter(|r| r.parent_id.as_deref() == Some(out.run_id.as_str()))
        .collect();
    assert_eq!(kids.len(), 2);
    assert!(
        kids.iter()
            .all(|k| k.agent == "helper" && k.status == RunStatus::Succeeded && k.usage.input_tokens == 1200)
    );
    let parent = runs.iter().find(|r| r.id == out.run_id).unwrap();
    assert_eq!(parent.usage.input_tokens, 1000 + 1200 + 2 * 1200);
    assert_eq!(out.usage.input_tokens, 4600);
}

#[tokio::test]
async fn a_failing_child_is_an_error_result_and_the_parent_continues() {
    let t = tree(DELEGATING);
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let system = system_of(body);
        Reply::ok(if system.starts_with("You are the looper subagent") {
            openai_tools(&[("l1", "current_time", "{}")])
        } else if tool_contents(body).is_empty() {
            openai_tools(&[("s1", "subagent", r#"{"name": "looper", "prompt": "loop"}"#)])
        } else {
            openai_text("recovered")
        })
    });
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("boss").unwrap();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "x"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    assert_eq!(out.final_text.as_deref(), Some("recovered"));
    let last = fake
        .requests()
        .into_iter()
        .filter(|r| system_of(&r.body).starts_with("You are the boss"))
        .last()
        .unwrap();
    let result = &tool_contents(&last.body)[0];
    assert!(
        result.starts_with("error: subagent 'looper' (run ")
            && result.ends_with("ended with max_turns: reached max_turns (1)"),
        "{result}"
    );
    // `tools: inherit` gave the looper its parent's current_time.
    let looper = fake
        .requests()
        .into_iter()
        .find(|r| system_of(&r.body).starts_with("You are the looper"))
        .unwrap();
    assert!(looper.body["tools"].to_string().contains("current_time"));
    let runs = runner.store.list_runs(10).await.unwrap();
    let child = runs.iter().find(|r| r.agent == "looper").unwrap();
    assert_eq!(child.termination.as_deref(), Some("max_turns"));
    assert_eq!(child.parent_id.as_deref(), Some(out.run_id.as_str()));
}

#[tokio::test]
async fn skill_scripts_run_in_the_sandbox_with_only_granted_tools() {
    let t = tree(&[
        ("prompts/p.md", "You are the calculating agent."),
        (
            "prompts/skills/calc/SKILL.md",
            "---\nname: calc\ndescription: Exact arithmetic.\nallowed-tools: current_time slack_post_message\n---\nUse run_skill_script.\n",
        ),
        (
            "prompts/skills/calc/scripts/sum.rhai",
            "let total = 0;\nfor x in args.values { total += x; }\n#{ total: total, count: args.values.len() }\n",
        ),
        (
            "prompts/skills/calc/scripts/clock.rhai",
            "tool(\"current_time\", #{ timezone: \"UTC\" })\n",
        ),
        (
            "prompts/skills/calc/scripts/fetch.rhai",
            "tool(\"http_fetch\", #{ url: \"http://127.0.0.1:1/\" })\n",
        ),
        (
            "prompts/skills/calc/scripts/post.rhai",
            "tool(\"slack_post_message\", #{ channel: \"C1\", text: \"hi\" })\n",
        ),
        (
            "prompts/skills/calc/scripts/count.rhai",
            "let t = 0;\nfor i in 0..100000 { t += i; }\nt\n",
        ),
        (
            "agents/calc.yaml",
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [http_fetch, current_time]\nsandbox: { max_operations: 5000 }\n",
        ),
    ]);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[
        (
            "c1",
            "run_skill_script",
            r#"{"skill": "calc", "script": "sum", "args": {"values": [1, 2, 39]}}"#,
        ),
        (
            "c2",
            "run_skill_script",
            r#"{"skill": "calc", "script": "scripts/clock.rhai"}"#,
        ),
        (
            "c3",
            "run_skill_script",
            r#"{"skill": "calc", "script": "fetch"}"#,
        ),
        (
            "c4",
            "run_skill_script",
            r#"{"skill": "calc", "script": "../../etc/passwd"}"#,
        ),
        ("c5", "run_skill_script", r#"{"skill": "calc", "script": "post"}"#),
        (
            "c6",
            "run_skill_script",
            r#"{"skill": "calc", "script": "count"}"#,
        ),
    ])));
    fake.push(Reply::ok(openai_text("42")));
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("calc").unwrap();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "add"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let results = tool_contents(&fake.requests()[1].body);
    let sum: Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(sum, json!({"total": 42, "count": 3}));
    assert_eq!(
        results[1], "2026-01-05T17:00:00+00:00 (Monday, UTC)",
        "a granted tool runs (mocked here)"
    );
    assert!(
        results[2].starts_with("error: calc/scripts/fetch.rhai")
            && results[2].contains("not in this skill's allowed-tools"),
        "{}",
        results[2]
    );
    assert_eq!(
        results[3],
        "error: invalid script path '../../etc/passwd': it must stay inside the skill's folder"
    );
    // The skill grants a tool the agent does not have: the agent's grant wins.
    assert!(
        results[4].contains("tool 'slack_post_message' is not granted to agent 'calc'"),
        "{}",
        results[4]
    );
    // The agent's `sandbox:` limits hold for its skills' Rhai scripts too.
    assert!(
        results[5].starts_with("error: calc/scripts/count.rhai:2:")
            && results[5].ends_with("sandbox limit hit: too many operations (sandbox.max_operations)"),
        "{}",
        results[5]
    );
}

/// A tool marked `approval: required` is called only by the run's own model, which
/// waits for a person: a skill script that lists it in `allowed-tools` is refused
/// (nothing sent), and a subagent whose own `tools:` names it does not get it.
#[tokio::test]
async fn tools_needing_approval_are_never_called_from_a_skill_script_or_a_subagent() {
    let t = tree(&[
        ("prompts/p.md", "You are the gated agent."),
        ("prompts/poster.md", "You are the poster subagent."),
        (
            "prompts/skills/poster/SKILL.md",
            "---\nname: poster\ndescription: Posts.\nallowed-tools: slack_post_message current_time\n---\nUse run_skill_script.\n",
        ),
        (
            "prompts/skills/poster/scripts/post.rhai",
            "tool(\"slack_post_message\", #{ channel: \"C1\", text: \"hi\" })\n",
        ),
        (
            "subagents/poster.yaml",
            "description: Posts.\nprompt: prompts/poster.md\ntools: [slack_post_message, current_time]\n",
        ),
        (
            "agents/gated.yaml",
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time, {name: slack_post_message, approval: required}]\nsubagents: [poster]\n",
        ),
    ]);
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let reply = if system_of(body).starts_with("You are the poster subagent") {
            openai_text("nothing to post with")
        } else if tool_contents(body).is_empty() {
            openai_tools(&[
                (
                    "c1",
                    "run_skill_script",
                    r#"{"skill": "poster", "script": "post"}"#,
                ),
                (
                    "c2",
                    "subagent",
                    r#"{"name": "poster", "prompt": "Post hi to C1"}"#,
                ),
            ])
        } else {
            openai_text("done")
        };
        Reply::ok(reply)
    });
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("gated").unwrap();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "post"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let reqs = fake.requests();
    let last = reqs
        .iter()
        .rfind(|r| system_of(&r.body).starts_with("You are the gated"))
        .unwrap();
    let results = tool_contents(&last.body);
    assert!(
        results[0].contains(
            "tool 'slack_post_message' needs a person's approval (approval.tools), which a skill script cannot wait for"
        ),
        "{}",
        results[0]
    );
    let child = reqs
        .iter()
        .find(|r| system_of(&r.body).starts_with("You are the poster"))
        .unwrap();
    let offered: Vec<&str> = child.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"current_time"), "{offered:?}");
    assert!(!offered.contains(&"slack_post_message"), "{offered:?}");
    // Nothing was posted: no nested call ran.
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    assert!(
        !events
            .iter()
            .any(|e| e.kind == "tool_call" && e.data["name"] == "slack_post_message"),
        "{events:?}"
    );
}

#[tokio::test]
async fn skill_script_calls_are_recorded_counted_and_mark_side_effects() {
    let t = tree(&[
        ("prompts/p.md", "You post."),
        (
            "prompts/skills/poster/SKILL.md",
            "---\nname: poster\ndescription: Posts.\nallowed-tools: slack_post_message\n---\nUse run_skill_script.\n",
        ),
        (
            "prompts/skills/poster/scripts/spam.rhai",
            "for i in 0..5 { tool(\"slack_post_message\", #{ channel: \"C1\", text: `n${i}` }); }\n\"done\"\n",
        ),
        (
            "agents/poster.yaml",
            "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [slack_post_message]\nlimits: { max_tool_calls: 3 }\n",
        ),
    ]);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "run_skill_script",
        r#"{"skill": "poster", "script": "spam"}"#,
    )])));
    fake.always(Reply::ok(openai_text("done")));
    let (_d, runner) = runner_for(&t, &fake).await;
    let agent = t.config.agent("poster").unwrap();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "go"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // 1 direct call + 2 nested calls fill max_tool_calls (3); the third nested call ends the run.
    assert_eq!(out.termination, Termination::MaxToolCalls, "{:?}", out.error);
    assert_eq!(out.tool_calls, 3);
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let nested: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == "tool_call" && e.data["parent_call_id"] == "c1")
        .map(|e| &e.data)
        .collect();
    assert_eq!(nested.len(), 2, "{events:?}");
    assert!(
        nested
            .iter()
            .all(|d| d["name"] == "slack_post_message" && d["side_effect"] == true)
    );
    assert_eq!(nested[0]["call_id"], "c1.1");
    // A crash now would not retry the run: it has side effects.
    assert!(runner.store.has_side_effects(&out.run_id).await.unwrap());
    assert_eq!(
        fake.requests().len(),
        1,
        "the model is not asked again after the cap"
    );
}
