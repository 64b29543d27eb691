//! Loading config trees: typed specs, runtime types, and errors with file, line and column.

use std::path::Path;
use std::time::Duration;

use steward::config::{Config, Coordinator, Known, ToolSelection, TriggerSpec};

fn tools() -> Known {
    Known {
        tools: ["http_fetch", "current_time"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        skills: ["jira-formatting", "slack-formatting"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn the_repository_tree_is_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let skills = steward::skills::SkillSet::load(root, &[]);
    assert!(skills.diagnostics.is_empty(), "{:?}", skills.diagnostics);
    let tools = steward::integrations::builtin_tools(
        &steward::integrations::Clients::from_settings(steward::http::client().unwrap(), &Default::default()),
        Default::default(),
    )
    .names();
    let known = Known {
        skills: skills.names(),
        tools,
    };
    let config = Config::load(root, &known).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        config.subagents.keys().collect::<Vec<_>>(),
        ["improver", "judge", "planner", "reviewer", "router", "summarizer"]
    );
    assert_eq!(config.agent("page-summarizer").unwrap().subagents, ["summarizer"]);
    let agent = config.agent("page-summarizer").unwrap();
    assert_eq!(agent.models[0].to_string(), "openai/gpt-6-luna");
    assert_eq!(agent.models[1].to_string(), "anthropic/claude-haiku-4-5");
    assert_eq!(agent.limits.timeout, Duration::from_secs(120));
}

#[test]
fn full_agent_shape_parses_into_runtime_types() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Do the thing.");
    write(dir.path(), "prompts/planner.md", "Plan.");
    write(dir.path(), "scripts/s.rhai", "reply(\"hi\");");
    write(
        dir.path(),
        "subagents/planner.yaml",
        "prompt: prompts/planner.md\ntools: inherit\n",
    );
    write(
        dir.path(),
        "agents/jira-from-thread.yaml",
        r#"name: jira-from-thread
description: "Turn a Slack thread into a routed Jira ticket when someone adds :jira:"
triggers:
  - slack_reaction: { reaction: jira }
  - slack_mention: { channels: [C0123ABCD] }
  - jira: { events: ["jira:issue_created"], projects: [OPS] }
  - notion: { events: [page.properties_updated], database: 1a2b, property: Status, to: Ready for review }
  - cron: { schedule: "0 9 * * 1-5", timezone: America/Los_Angeles }
  - webhook: { name: zapier-intake }
coordinator: llm
model: openai/gpt-4.1
fallbacks: [anthropic/claude-sonnet-4-5]
prompt: prompts/p.md
prompt_url: https://example.com/prompt
tools: [http_fetch, current_time]
skills: { required: [jira-formatting], allowed: ["*"], prohibited: [] }
subagents: [planner]
files: { preload_bytes: 4096 }
context: { window_tokens: 1047576, compact_at: 0.8, file_threshold_tokens: 10000, file_preview_tokens: 1000 }
limits: { max_tool_calls: 40, max_turns: 30, timeout: 10m, max_cost_usd: 2.0 }
output: { reply: false, prompt_link: true }
evals: { post_run: [ "Was the ticket routed to the team that owns the component?" ] }
"#,
    );
    write(
        dir.path(),
        "agents/scripted.yaml",
        "coordinator: script\nscript: scripts/s.rhai\n",
    );
    let config = Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    let a = config.agent("jira-from-thread").unwrap();
    assert_eq!(a.triggers.len(), 6);
    assert!(matches!(&a.triggers[0], TriggerSpec::SlackReaction(r) if r.reaction == "jira"));
    assert!(matches!(&a.triggers[4], TriggerSpec::Cron(c) if c.schedule == "0 9 * * 1-5"));
    assert_eq!(a.limits.max_cost_usd, Some(2.0));
    assert_eq!(a.limits.timeout, Duration::from_secs(600));
    assert_eq!(a.context.window_tokens, Some(1_047_576));
    assert_eq!(a.preload_bytes, 4096);
    assert!(!a.output.reply);
    assert_eq!(
        a.prompt.as_ref().unwrap().url.as_deref(),
        Some("https://example.com/prompt")
    );
    assert_eq!(a.skills.required, ["jira-formatting"]);
    let s = config.agent("scripted").unwrap();
    assert_eq!(
        s.coordinator,
        Coordinator::Script {
            path: "scripts/s.rhai".into(),
            source: "reply(\"hi\");".into()
        }
    );
    assert!(s.models.is_empty());
    assert_eq!(config.subagents["planner"].tools, ToolSelection::Inherit);
}

#[test]
fn every_problem_is_reported_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    // Unknown key on line 4, column 1.
    write(
        dir.path(),
        "agents/typo.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [http_fetch]\ntool: current_time\n",
    );
    // Unknown key nested in limits.
    write(
        dir.path(),
        "agents/nested.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\nlimits:\n  max_turns: 3\n  max_tokens: 5\n",
    );
    // Malformed YAML.
    write(
        dir.path(),
        "agents/broken.yaml",
        "model: openai/gpt-4.1\nprompt: [unclosed\n",
    );
    // Semantic problems: bad model, missing prompt, unknown tool, unknown subagent, bad duration.
    write(
        dir.path(),
        "agents/semantic.yaml",
        "model: gpt-4.1\nprompt: prompts/missing.md\ntools:\n  - http_fetch\n  - send_email\nsubagents: [ghost]\n",
    );
    write(
        dir.path(),
        "agents/duration.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\nlimits: { timeout: ten minutes }\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err();
    let lines: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    let all = lines.join("\n");
    let expect = [
        "agents/broken.yaml:2:9: a flow sequence opened here is not closed",
        "agents/duration.yaml:3:20: invalid duration 'ten minutes', expected a duration like 30s, 10m or 1h for 'limits.timeout'",
        "agents/nested.yaml:5:3: unknown key 'max_tokens' in 'limits'; expected one of: max_tool_calls, max_turns, timeout, tool_timeout, max_cost_usd",
        "agents/semantic.yaml:1:1: invalid model name 'gpt-4.1', expected provider/model",
        "agents/semantic.yaml:2:1: cannot read prompt file 'prompts/missing.md'",
        "agents/semantic.yaml:5:5: unknown tool 'send_email', expected one of current_time, http_fetch",
        "agents/semantic.yaml:6:13: unknown subagent 'ghost'",
        "agents/typo.yaml:4:1: unknown key 'tool'; did you mean 'tools'?",
    ];
    for e in expect {
        assert!(all.contains(e), "missing `{e}` in:\n{all}");
    }
    assert_eq!(lines.len(), expect.len(), "{all}");
}

/// One team's agent file cannot make steward read a file outside the config folder
/// (its `.env`, a service account token) into a prompt or a script, nor a device, nor
/// a YAML file whose aliases expand it a thousandfold.
#[test]
fn files_a_config_names_stay_inside_the_config_folder() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join(".env"), "SLACK_BOT_TOKEN=xoxb-real").unwrap();
    let dir = outer.path().join("config");
    write(&dir, "prompts/p.md", "Prompt.");
    let agent = |prompt: &str| format!("model: openai/gpt-4.1\nprompt: {prompt}\n");
    write(&dir, "agents/dotdot.yaml", &agent("../.env"));
    write(
        &dir,
        "agents/absolute.yaml",
        &agent(&outer.path().join(".env").display().to_string()),
    );
    std::os::unix::fs::symlink(outer.path().join(".env"), dir.join("prompts/linked.md")).unwrap();
    write(&dir, "agents/linked.yaml", &agent("prompts/linked.md"));
    write(&dir, "agents/device.yaml", &agent("/dev/zero"));
    write(
        &dir,
        "agents/script.yaml",
        "coordinator: script\nscript: ../.env\n",
    );
    let items = vec!["0"; 1000].join(",");
    let aliases = vec!["*a"; 1000].join(",");
    write(
        &dir,
        "agents/laughs.yaml",
        &format!("model: openai/gpt-4.1\nprompt: prompts/p.md\nvars: {{a: &a [{items}], b: [{aliases}]}}\n"),
    );
    let err = Config::load(&dir, &tools()).unwrap_err();
    let all = err
        .0
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    for agent in ["dotdot", "absolute", "linked", "device"] {
        assert!(
            all.contains(&format!("agents/{agent}.yaml:2:1: prompt file: '"))
                && all.contains("is outside the config folder"),
            "{agent}: {all}"
        );
    }
    assert!(
        all.contains("agents/script.yaml:2:1: script file: '../.env' is outside the config folder"),
        "{all}"
    );
    assert!(
        all.contains("agents/laughs.yaml") && all.contains("more than 100000 values"),
        "{all}"
    );
    assert!(!all.contains("xoxb-real"), "{all}");
}

#[test]
fn bad_triggers_and_values_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - slack_reaction: { emoji: jira }\n",
    );
    write(
        dir.path(),
        "agents/b.yaml",
        "model: anthropic/claude-sonnet-4-5\nprompt: prompts/p.md\ntriggers:\n  - carrier_pigeon: {}\n",
    );
    write(
        dir.path(),
        "agents/c.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ncontext: { compact_at: 1.5 }\n",
    );
    write(dir.path(), "agents/d.yaml", "coordinator: script\n");
    write(dir.path(), "scripts/bad.rhai", "let x = ;\n");
    write(
        dir.path(),
        "agents/e.yaml",
        "coordinator: script\nscript: scripts/bad.rhai\n",
    );
    write(
        dir.path(),
        "scripts/sneaky.rhai",
        "let h = tool(\"current_time\");\n// tool(\"ignored_in_comment\")\ntool(\"http_fetch\", #{ url: \"x\" });\n",
    );
    write(
        dir.path(),
        "agents/f.yaml",
        "coordinator: script\nscript: scripts/sneaky.rhai\ntools: [current_time]\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(err.contains("agents/a.yaml:4:23: unknown key 'emoji' in 'triggers.slack_reaction'; expected one of: reaction, channels"), "{err}");
    assert!(
        err.contains("agents/b.yaml:4:5: unknown kind 'carrier_pigeon' in 'triggers'; expected one of: slack_reaction, slack_mention"),
        "{err}"
    );
    assert!(
        err.contains("agents/c.yaml:3:12: compact_at must be a fraction in (0, 1]"),
        "{err}"
    );
    assert!(
        err.contains("agents/d.yaml:1:1: 'coordinator: script' needs 'script: scripts/<name>.rhai'"),
        "{err}"
    );
}

#[test]
fn approvals_are_checked_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(
        dir.path(),
        "agents/ok.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [http_fetch, {name: current_time, approval: required}]\napproval: {approvers: [U0ADMIN], timeout: 2h}\n",
    );
    let config = Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    let ok = config.agent("ok").unwrap();
    assert_eq!(ok.approval.tools.iter().collect::<Vec<_>>(), ["current_time"]);
    assert_eq!(ok.approval.approvers, ["U0ADMIN"]);
    assert_eq!(ok.approval.timeout, Duration::from_secs(7200));
    assert_eq!(ok.tool_names(), ["http_fetch", "current_time"]);

    write(dir.path(), "scripts/s.rhai", "tool(\"current_time\", #{});\n");
    write(
        dir.path(),
        "agents/script.yaml",
        "coordinator: script\nscript: scripts/s.rhai\ntools:\n  - name: current_time\n    approval: required\n",
    );
    write(
        dir.path(),
        "agents/who.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\napproval: {approvers: [ada]}\n",
    );
    write(
        dir.path(),
        "agents/typo.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [{name: current_time, approval: maybe}]\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(
        err.contains("agents/script.yaml:5:5: 'approval: required' works with LLM coordinators only"),
        "{err}"
    );
    assert!(
        err.contains("agents/who.yaml:4:24: approver 'ada' is not a Slack user id (U… or W…)"),
        "{err}"
    );
    assert!(
        err.contains("agents/typo.yaml:3:")
            && err.contains("unknown variant 'maybe', expected 'none' or 'required'"),
        "{err}"
    );
}

/// A judge model with nothing to judge would be read by nothing: an error, not silence.
#[test]
fn an_evals_model_without_post_run_criteria_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\nevals:\n  model: anthropic/claude-haiku-4-5\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(
        err.contains("agents/a.yaml:4:10: evals 'model' judges the 'post_run' criteria, and there are none: add criteria or remove it"),
        "{err}"
    );
}

#[test]
fn limits_and_owner_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(
        dir.path(),
        "agents/ok.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\nowner: U0OWNER\nlimits: {concurrency: 2, per_user_per_minute: 5, daily_cost_usd: 20}\n",
    );
    let config = Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    let ok = config.agent("ok").unwrap();
    assert_eq!(ok.owner.as_deref(), Some("U0OWNER"));
    assert_eq!(
        (
            ok.limits.concurrency,
            ok.limits.per_user_per_minute,
            ok.limits.daily_cost_usd
        ),
        (Some(2), 5, Some(20.0))
    );
    write(
        dir.path(),
        "agents/bad.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\nlimits: {concurrency: 0, per_user_per_minute: 0, daily_cost_usd: -1}\n",
    );
    write(
        dir.path(),
        "subagents/helper.yaml",
        "description: Helps.\nprompt: prompts/p.md\nlimits:\n  concurrency: 2\n  subagent_depth: 2\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    for want in [
        "agents/bad.yaml:3:10: concurrency must be at least 1",
        "agents/bad.yaml:3:26: per_user_per_minute must be at least 1",
        "agents/bad.yaml:3:50: daily_cost_usd must be a positive number",
        "subagents/helper.yaml:4:3: 'concurrency' applies to agents (what triggers start), not to subagents",
        "subagents/helper.yaml:5:3: 'subagent_depth' applies to agents (what triggers start), not to subagents",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
}

#[test]
fn slack_overlaps_precedence_cannot_order_name_both_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    let agent =
        |triggers: &str| format!("model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n{triggers}");
    write(
        dir.path(),
        "agents/helpdesk.yaml",
        &agent("  - slack_mention: {}\n  - slack_dm: {}\n"),
    );
    // Equal specificity (no channels, no filter) and priority: ambiguous.
    write(
        dir.path(),
        "agents/second.yaml",
        &agent("  - slack_mention: {}\n"),
    );
    // Ordered: names a channel, has a filter, has a priority, or runs beside.
    write(
        dir.path(),
        "agents/infra.yaml",
        &agent("  - slack_mention: { channels: [C0INFRA] }\n"),
    );
    write(
        dir.path(),
        "agents/links.yaml",
        &agent("  - slack_mention: { when: 'text.contains(\"https://\")' }\n"),
    );
    write(
        dir.path(),
        "agents/urgent.yaml",
        &agent("  - slack_dm: { priority: 5 }\n"),
    );
    write(
        dir.path(),
        "agents/logger.yaml",
        &agent("  - slack_mention: { also: true }\n  - slack_dm: { also: true }\n"),
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err();
    let lines: Vec<String> = err.0.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 1, "only the ambiguous pair: {lines:#?}");
    assert!(
        lines[0].starts_with(
            "agents/helpdesk.yaml:4:5: agent 'helpdesk' and agent 'second' (agents/second.yaml:4:5)"
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("priority"), "says how to fix it: {}", lines[0]);
    // With a priority the pair is ordered, and the tree loads.
    write(
        dir.path(),
        "agents/second.yaml",
        &agent("  - slack_mention: { priority: -1 }\n"),
    );
    let config = Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    // Jira, Notion and webhooks fan out: their overlaps are listed, never errors.
    let overlaps = steward::config::overlap::overlaps(&config.agents, &Default::default());
    assert!(overlaps.iter().all(|o| o.ordered), "{overlaps:?}");
}

#[test]
fn filters_are_compiled_at_load_with_their_position() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - jira: { events: [jira:issue_created], when: 'labels.contains(\"infra\") && priorty == \"High\"' }\n  - webhook: { name: x, when: 'kind ==' }\n  - slack_dm: { also: true, when: 'user == \"U1\"' }\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(
        err.contains(
            "agents/a.yaml:4:78: unknown field 'priorty' in when:, expected one of text, user, channel"
        ),
        "{err}"
    );
    assert!(err.contains("agents/a.yaml:5:"), "the syntax error's line: {err}");
    assert_eq!(err.lines().count(), 2, "{err}");
    // `also` and `priority` belong to Slack rules, which compete for a conversation.
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - webhook: { name: x, also: true }\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(err.contains("unknown key 'also'"), "{err}");
}

#[test]
fn misspelt_tool_subagent_and_agent_names_get_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    write(dir.path(), "subagents/planner.yaml", "prompt: prompts/p.md\n");
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [http_fech]\nsubagents: [planer]\n",
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert!(
        err.contains("unknown tool 'http_fech' (did you mean 'http_fetch'?)"),
        "{err}"
    );
    assert!(
        err.contains("unknown subagent 'planer' (did you mean 'planner'?)"),
        "{err}"
    );
    write(
        dir.path(),
        "agents/a.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [http_fetch]\n",
    );
    let config = Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        config.agent("reviewer").unwrap_err(),
        "unknown agent 'reviewer', expected one of: a",
        "no suggestion when nothing is close"
    );
    assert!(config.agent("aa").unwrap_err().contains("(did you mean 'a'?)"));
}

#[test]
fn a_duplicate_name_is_reported_on_the_file_that_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\n";
    write(dir.path(), "agents/helpdesk.yaml", agent);
    // Added later, sorted first: the error is still on the new file's `name:`.
    write(
        dir.path(),
        "agents/a-copy.yaml",
        &format!("{agent}name: helpdesk\n"),
    );
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert_eq!(
        err,
        "agents/a-copy.yaml:3:1: duplicate name 'helpdesk': agents/helpdesk.yaml is called that too; rename one (name: or the file name)"
    );
}

/// Hook names that differ only in case and `-`/`_` would open with one token variable:
/// refused, pointing at the second and naming the first and the variable. The same
/// name twice (two agents on one hook) is fine.
#[test]
fn webhooks_that_would_share_a_token_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "Prompt.");
    let hook = |name: &str| {
        format!("model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - webhook: {{name: {name}}}\n")
    };
    write(dir.path(), "agents/a.yaml", &hook("deploy-prod"));
    write(dir.path(), "agents/b.yaml", &hook("deploy-prod"));
    Config::load(dir.path(), &tools()).unwrap_or_else(|d| panic!("{d}"));
    write(dir.path(), "agents/c.yaml", &hook("DEPLOY_prod"));
    let err = Config::load(dir.path(), &tools()).unwrap_err().to_string();
    assert_eq!(
        err,
        "agents/c.yaml:4:5: webhook 'DEPLOY_prod' and webhook 'deploy-prod' (agents/a.yaml:4:5) would share one token, \
         STEWARD_HOOK_DEPLOY_PROD_TOKEN; give one a name that differs in more than case and '-'/'_'"
    );
}
