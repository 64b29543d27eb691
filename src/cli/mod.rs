//! The `steward` command line. Errors surface as one line and exit code 1.

mod eval;
mod events;
mod improve;
mod otlp;
mod plain;
mod replayer;
mod runs;
mod skills;
mod triggers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Known, Settings};
use crate::files::NewFile;
use crate::integrations::mcp;
use crate::metrics::Metrics;
use crate::provider::ProviderSet;
use crate::run::Runner;
use crate::run::report::RunReport;
use crate::server::{self, DispatchSettings, Secrets, Service};
use crate::skills::{Level as SkillLevel, SkillSet};
use crate::store::{RunStatus, SqliteStore, Store};
use crate::tools::ToolRegistry;
use crate::triggers::TriggerEvent;

/// Default model request timeout.
const MODEL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Parser, Debug)]
#[command(
    name = "steward",
    version,
    about = "A company's internal agent: triggers, tools, LLM and script coordinators"
)]
struct Cli {
    /// Folder holding agents/, subagents/, prompts/ and scripts/ (default: current directory).
    #[arg(long, env = "STEWARD_ROOT", global = true)]
    root: Option<PathBuf>,
    /// The run store: sqlite://PATH (created on first start of serve or run) or
    /// postgres://user@host/db.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://data/steward.db",
        global = true
    )]
    database_url: String,
    /// How `database_url` was chosen (flag, environment, default).
    #[arg(skip)]
    database_url_from: &'static str,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the HTTP server.
    Serve {
        /// Address to listen on; use 0.0.0.0:8080 to accept connections from other hosts (containers).
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: SocketAddr,
        /// How long in-flight work may continue after SIGTERM.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        grace: Duration,
        /// How long a run's lease lasts without renewal; a run whose process died is
        /// resumed (or reported) once its lease runs out.
        #[arg(long, default_value = "60s", value_parser = parse_lease)]
        lease: Duration,
        /// After SIGTERM, how long to keep serving with /readyz answering 503 before
        /// stopping (give a load balancer time to notice; 5s under Kubernetes).
        #[arg(long, default_value = "0s", value_parser = parse_duration)]
        drain: Duration,
        /// How long an idle keep-alive connection stays open. Keep it longer than the
        /// upstream keep-alive of any proxy in front (60s for nginx, ingress-nginx and AWS
        /// load balancers; 600s for Google Cloud's), or that proxy answers 502 now and then.
        #[arg(long, default_value = "75s", value_parser = parse_duration)]
        keep_alive: Duration,
        /// Runs at once in this process, across all agents: an upper bound. A run
        /// waiting on a model holds no thread, and the calls to each model adapt to
        /// what its provider allows (see docs/configuration.md), so a burst of
        /// mentions goes at the provider's pace, not this cap's.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
        concurrency: u32,
        /// Runs at once per agent, at most (within --concurrency); an agent's own
        /// `limits.concurrency` caps it further across replicas.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
        agent_concurrency: u32,
        /// Refuse to start when a setting a configured agent needs is missing (without
        /// it, the start-up summary warns and names the agents it breaks).
        #[arg(long)]
        strict: bool,
    },
    /// Run one event through one agent and print the answer.
    Run {
        /// The agent to run (a file under agents/, by name).
        agent: String,
        /// Event JSON file, or - for standard input.
        #[arg(long)]
        event: String,
        /// Use every tool's mock instead of the real implementation.
        #[arg(long)]
        mock_tools: bool,
        /// Use the mock of this tool only (repeatable), e.g. --mock slack_post_message.
        #[arg(long = "mock")]
        mock: Vec<String>,
        /// Print the whole run record as JSON.
        #[arg(long)]
        json: bool,
        /// Attach a file to the run (repeatable); it becomes a virtual file.
        #[arg(long = "file")]
        files: Vec<PathBuf>,
    },
    /// Check the whole config tree and print every problem.
    Validate {
        /// Also list where agents' triggers overlap: which agent answers a Slack
        /// message both could take, and which Jira, Notion and webhook events start
        /// several agents.
        #[arg(long)]
        explain: bool,
        /// Also check the environment: the keys and secrets each agent needs, set or
        /// missing (as `serve` prints at start).
        #[arg(long)]
        env: bool,
        /// With --env, a missing setting is a problem (exit 1), not a warning.
        #[arg(long, requires = "env")]
        strict: bool,
    },
    /// Run eval cases (evals/<agent>/<case>.yaml): replay recorded model answers
    /// (default), record them, or run live.
    #[command(args_conflicts_with_subcommands = true)]
    Eval {
        #[command(subcommand)]
        command: Option<EvalCommand>,
        /// Agents, case ids (helpdesk/vpn-question) or paths; default every case.
        targets: Vec<String>,
        /// Answer model calls from the cassettes in evals/cassettes/ (the default).
        #[arg(long, conflicts_with_all = ["record", "live"])]
        replay: bool,
        /// Call the real models and write their answers to the cassettes.
        #[arg(long, conflicts_with = "live")]
        record: bool,
        /// Call the real models; write nothing.
        #[arg(long)]
        live: bool,
        /// Run each case this many times (its min_pass scales to the same share).
        #[arg(long)]
        trials: Option<u32>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Also write JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// An earlier --json result: fail on lower pass rates, or tokens or cost per
        /// trial up by more than --threshold.
        #[arg(long)]
        compare: Option<PathBuf>,
        /// How much tokens or cost per trial may grow before --compare fails (0.2: 20%).
        #[arg(long, default_value_t = 0.2)]
        threshold: f64,
    },
    /// Internal: extract one document from stdin to stdout (run by steward itself in a
    /// memory-capped child process).
    #[command(hide = true)]
    ExtractWorker { kind: String },
    /// Once, after upgrading from a steward of before 2026-11-27: seal again, bound to
    /// its row, every value sealed before values were bound (queued private events,
    /// parked runs' checkpoints). Needs STEWARD_DATA_KEY. `serve` never binds them.
    Reseal,
    /// Tokens, prompt-cache hits and cost per agent over a recent period.
    Stats {
        /// How far back (runs created since then), e.g. 24h, 7d.
        #[arg(long, default_value = "24h", value_parser = parse_duration)]
        since: Duration,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What became of each delivery (Slack, Jira, Notion, webhooks, cron): "why
    /// didn't it answer?".
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// An agent's problems over a recent period: how runs ended, failed tool calls,
    /// failed judge criteria and people's 👎, grouped and ranked, with example runs and
    /// where the fix likely lies.
    Review {
        /// The agent to review.
        agent: String,
        /// How far back, e.g. 24h, 7d.
        #[arg(long, default_value = "7d", value_parser = parse_duration)]
        since: Duration,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Do not ask the reviewer subagent (subagents/reviewer.yaml) to name the
        /// problems: only the grouping keys, no model call.
        #[arg(long)]
        no_model: bool,
    },
    /// Propose a fix for one of an agent's problems and check it with evals: the
    /// problem's runs become eval cases, the improver subagent proposes one change,
    /// and the agent's suite plus the new cases run live before and after it. Writes
    /// improvements/AGENT/ID/; exits 1 when the gate rejects the change.
    Improve {
        /// The agent to improve.
        agent: String,
        /// Which problem of `steward review AGENT` (its rank; default 1, the most runs).
        #[arg(long, conflicts_with = "runs")]
        problem: Option<usize>,
        /// Runs to improve from instead of a problem (ids or unique prefixes,
        /// comma-separated).
        #[arg(long, value_delimiter = ',')]
        runs: Vec<String>,
        /// How far back the review looks, e.g. 24h, 7d.
        #[arg(long, default_value = "7d", value_parser = parse_duration)]
        since: Duration,
        /// Live trials per case, on each side of the gate.
        #[arg(long, default_value_t = 3)]
        trials: u32,
        /// Share of an existing case's trials the change may lose (0 to 1).
        #[arg(long, default_value_t = crate::evals::improve::gate::DEFAULT_TOLERANCE)]
        tolerance: f64,
        /// Write an accepted change, its cases and recordings into the tree (a prompt
        /// hosted in Notion gets the proposed text as a comment instead).
        #[arg(long)]
        apply: bool,
        /// Open a pull request with an accepted change (needs GITHUB_TOKEN and the
        /// repository: --repo or STEWARD_CONFIG_REPO).
        #[arg(long)]
        github_pr: bool,
        /// The config tree's GitHub repository (owner/name), for --github-pr.
        #[arg(long)]
        repo: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve steward as an MCP server on stdin/stdout (for a coding agent in the config
    /// repository): list_agents, list_runs, get_run, list_events, review_agent,
    /// draft_eval_case, run_evals, propose_improvement.
    Mcp {
        /// Allow tools that call the real models (live run_evals, propose_improvement),
        /// which cost money; without it run_evals only replays recordings.
        #[arg(long)]
        allow_live: bool,
    },
    /// Check an agent's triggers against an event, or against recent stored deliveries.
    Triggers {
        #[command(subcommand)]
        command: TriggersCommand,
    },
    /// Inspect recorded runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Inspect Agent Skills.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Set up a Notion webhook subscription: opens a setup window, waits for the
    /// verification token Notion sends, and prints it (paste it into Notion's "Verify"
    /// dialog and into NOTION_WEBHOOK_TOKEN).
    NotionToken {
        /// Open the setup window and wait for the token (without it: print a token
        /// that already arrived).
        #[arg(long)]
        listen: bool,
        /// How long the window stays open.
        #[arg(long = "for", default_value = "15m", value_parser = parse_duration)]
        window: Duration,
    },
}

#[derive(Subcommand, Debug)]
enum EvalCommand {
    /// Write a draft case from a recorded run: its trigger, its tool results as mocks,
    /// its model calls as a cassette.
    New {
        /// The run to turn into a case (an id or a unique prefix, from `steward runs list`).
        #[arg(long = "from-run")]
        from_run: String,
    },
}

#[derive(Subcommand, Debug)]
enum SkillsCommand {
    /// Every skill with its description, its scripts' requirements and whether they
    /// are installed, and any loading problems.
    List {
        /// One JSON object: skills (name, description, file, scripts, requirements) and
        /// diagnostics.
        #[arg(long)]
        json: bool,
    },
    /// Install skills' declared Python and Node requirements now (wheels only, into the cache
    /// STEWARD_SKILL_DEPS_DIR), rather than at their first script run.
    Install {
        /// Only this skill (default: every skill that declares requirements).
        name: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum TriggersCommand {
    /// Per trigger of AGENT, whether it takes the event and which condition decided
    /// (with --event or --event-id); or, with --last N, how many of the last N stored
    /// deliveries each trigger would have taken under the config as it is now.
    Test {
        /// The agent whose triggers to ask.
        agent: String,
        /// An event file (JSON: a Slack, Jira or Notion delivery, or a stored trigger),
        /// or - for standard input.
        #[arg(long, group = "target")]
        event: Option<String>,
        /// A stored delivery's id (`steward events list`).
        #[arg(long, group = "target")]
        event_id: Option<String>,
        /// The last N stored deliveries.
        #[arg(long, group = "target")]
        last: Option<u32>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum EventsCommand {
    /// Most recent deliveries first, with their outcome and why.
    List {
        /// Only this source: slack, jira, notion, webhook, cron.
        #[arg(long)]
        source: Option<String>,
        /// Only this outcome: started, handed_to_run, follow_up, no_agent, filtered,
        /// duplicate, rate_limited, over_budget, ignored, refused, handled.
        #[arg(long, value_parser = parse_outcome)]
        outcome: Option<crate::types::event_outcome::OutcomeKind>,
        /// Only events whose outcome names this agent (a run it started, a reason it
        /// did not).
        #[arg(long)]
        agent: Option<String>,
        /// How far back, e.g. 1h, 7d.
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One delivery: its outcome, each agent's reason, the runs it started.
    Show {
        /// The event id (from `events list`, or a run's `event_id`).
        id: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_run_status(s: &str) -> Result<crate::store::RunStatus, String> {
    crate::store::RunStatus::parse(s).ok_or_else(|| {
        format!("unknown status '{s}', expected one of: queued, running, waiting, succeeded, failed, cancelled, interrupted")
    })
}

fn parse_outcome(s: &str) -> Result<crate::types::event_outcome::OutcomeKind, String> {
    crate::types::event_outcome::OutcomeKind::parse(s).ok_or_else(|| {
        let all: Vec<&str> = crate::types::event_outcome::OutcomeKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        format!("unknown outcome {s:?}; one of {}", all.join(", "))
    })
}

#[derive(Subcommand, Debug)]
enum RunsCommand {
    /// Most recent runs first.
    List {
        /// Only this agent's runs.
        #[arg(long)]
        agent: Option<String>,
        /// Only runs in this status: queued, running, waiting, succeeded, failed,
        /// cancelled, interrupted.
        #[arg(long, value_parser = parse_run_status)]
        status: Option<crate::store::RunStatus>,
        /// Only runs started by this trigger source: slack, jira, notion, webhook, cron, cli.
        #[arg(long)]
        trigger: Option<String>,
        /// How far back, e.g. 1h, 7d.
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// Subagent and judge runs too (default: the runs triggers started).
        #[arg(long)]
        all: bool,
        /// Print the runs as JSON.
        #[arg(long)]
        json: bool,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// One run with its events.
    Show {
        /// The run id, or a unique prefix of it (from `steward runs list`).
        id: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which tools a CLI run mocks.
struct Mocks {
    all: bool,
    only: Vec<String>,
}

/// How `steward run` runs and reports.
struct RunOptions {
    mocks: Mocks,
    /// Print the whole run record as JSON instead of the answer.
    json: bool,
    /// Where the run is counted (and dropped spans with it).
    metrics: Arc<Metrics>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::types::duration::parse_duration(text).map_err(|e| e.to_string())
}

/// A lease is renewed every third of its length: under a second would hammer the store.
fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = parse_duration(text)?;
    if lease < Duration::from_secs(1) {
        return Err("a lease must be at least 1s".into());
    }
    Ok(lease)
}

/// The process sandbox of skill scripts and command MCP servers, probed once per use.
fn script_sandbox() -> crate::sandbox::process::ProcessSandbox {
    let sandbox =
        crate::sandbox::process::ProcessSandbox::detect(std::env::temp_dir().join("steward-scripts"));
    // Scripts with egress relay through this executable inside the sandbox.
    match std::env::current_exe() {
        Ok(exe) => sandbox.with_forwarder(exe),
        Err(_) => sandbox,
    }
}

/// Loads `path` (a `.env` file) into the environment when it exists. Variables already
/// set win, so the real environment always overrides the file.
fn load_dotenv(path: &Path) -> Result<(), String> {
    if !path.exists() {
        return Ok(());
    }
    dotenvy::from_path(path).map_err(|e| match e {
        dotenvy::Error::LineParse(line, at) => format!(
            "cannot read {}: cannot parse '{}' (at character {at})",
            path.display(),
            line.trim_end()
        ),
        e => format!("cannot read {}: {e}", path.display()),
    })
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let mut raw = std::env::args();
    let worker = match (raw.next(), raw.next(), raw.next(), raw.next()) {
        (Some(_), Some(sub), Some(kind), None) if sub == "extract-worker" => Some(kind),
        _ => None,
    };
    if worker.is_some() {
        // Still dumpable (as exec left it), so its /proc file is its own to write;
        // nothing private is in memory yet (no document read, no environment).
        crate::sandbox::process::die_first_on_oom();
    }
    // Processes of the same user (an MCP server run with `sandbox: false`, anything
    // else on the host) cannot read steward's memory or /proc/<pid>/environ, nor the
    // extraction worker's, which holds a private document and its text.
    // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // The extraction worker starts from an empty environment and must stay without
    // one: it reads no `.env` (which would load steward's secrets into it).
    if let Some(kind) = worker {
        return crate::files::extractor::worker_main(&kind);
    }
    crate::http::install_crypto_provider();
    // Before parsing: flags such as --root and --database-url default from it.
    if let Err(e) = load_dotenv(Path::new(".env")) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Where the store's address came from, for errors that name it.
    cli.database_url_from = match matches.value_source("database_url") {
        Some(clap::parser::ValueSource::CommandLine) => "--database-url",
        Some(clap::parser::ValueSource::EnvVariable) => "DATABASE_URL",
        _ => "the default, relative to the current folder",
    };
    // The server logs its work; one-shot commands print their result and one-line
    // errors, so they log only errors unless RUST_LOG asks for more.
    let default_log = match cli.command {
        Command::Serve { .. } => "warn,steward=info",
        _ => "error",
    };
    // The environment is read here, once; everything below gets its part of it.
    let mut env = match Settings::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let otlp = match otlp::config(&env) {
        Ok(otlp) => otlp,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Arc::new(Metrics::new());
    let counted = metrics.clone();
    let dropped: crate::telemetry::DropSink = Arc::new(move |n| counted.spans_dropped(n));
    let telemetry = match crate::telemetry::init(cli.log_json, default_log, otlp, Some(dropped)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    env.log_spans = telemetry.logs_spans();
    // The server spreads requests and runs over every core. A one-shot command runs one
    // run: on a single thread its model calls, tool fetches and store writes need no
    // cross-thread wake-ups, which were most of a turn's CPU (see benches/run_cpu.rs).
    let mut builder = match cli.command {
        Command::Serve { .. } => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(dispatch(cli, env, metrics)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    // Tasks still alive end first, so the spans they close are queued before the
    // exporter's last flush.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    telemetry.shutdown();
    code
}

async fn dispatch(cli: Cli, env: Settings, metrics: Arc<Metrics>) -> anyhow::Result<ExitCode> {
    let root = match &cli.root {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    match cli.command {
        Command::ExtractWorker { kind } => Ok(crate::files::extractor::worker_main(&kind)),
        Command::Validate {
            explain,
            env: check_env,
            strict,
        } => validate(
            &root,
            &env,
            explain,
            check_env.then_some(strict),
            &cli.database_url,
        ),
        Command::Eval {
            command: Some(EvalCommand::New { from_run }),
            ..
        } => {
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            eval::new_from_run(&root, &env, store.as_ref(), &from_run).await
        }
        Command::Eval {
            command: None,
            targets,
            replay: _,
            record,
            live,
            trials,
            json,
            junit,
            compare,
            threshold,
        } => {
            let mode = match (record, live) {
                (true, _) => crate::evals::EvalMode::Record,
                (_, true) => crate::evals::EvalMode::Live,
                _ => crate::evals::EvalMode::Replay,
            };
            let args = eval::EvalArgs {
                targets,
                mode,
                trials,
                json,
                junit,
                compare,
                threshold,
            };
            eval::eval(&root, &env, args).await
        }
        Command::Run {
            agent,
            event,
            mock_tools,
            mock,
            json,
            files,
        } => {
            let mocks = Mocks {
                all: mock_tools,
                only: mock,
            };
            let opts = RunOptions { mocks, json, metrics };
            run(&root, &cli.database_url, &agent, &event, &files, opts, &env).await
        }
        Command::Serve {
            addr,
            grace,
            lease,
            drain,
            keep_alive,
            concurrency,
            agent_concurrency,
            strict,
        } => {
            let opts = ServeOptions {
                addr,
                grace,
                drain,
                keep_alive,
                strict,
                dispatch: DispatchSettings {
                    lease,
                    data_key: env.data_key.clone(),
                    event_retention: env
                        .event_retention
                        .unwrap_or(crate::server::dispatch::DEFAULT_EVENT_RETENTION),
                    run_retention: env.run_retention,
                    global_concurrency: concurrency as usize,
                    agent_concurrency: agent_concurrency as usize,
                    // Digests' "Propose a fix" runs `steward improve` on this tree (the
                    // owner's click is the consent to live model calls).
                    improver: Some(crate::server::digest::Improver(Arc::new(replayer::Replayer {
                        root: root.clone(),
                        env: env.clone(),
                        allow_live: true,
                        database_url: cli.database_url.clone(),
                        database_url_from: cli.database_url_from,
                    }))),
                },
            };
            serve(&root, &cli.database_url, opts, &env, metrics).await
        }
        Command::Skills {
            command: SkillsCommand::List { json },
        } => skills::list(&root, &env, json),
        Command::Skills {
            command: SkillsCommand::Install { name },
        } => skills::install(&root, &env, name.as_deref()).await,
        Command::NotionToken { listen, window } => {
            let store = open_store(&cli.database_url).await?;
            notion_token(store.as_ref(), listen, window).await
        }
        Command::Reseal => {
            let Some(key) = &env.data_key else {
                anyhow::bail!("steward reseal needs STEWARD_DATA_KEY: values are sealed and bound under it");
            };
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            let done = crate::server::reseal::bind_unbound(store.as_ref(), key).await?;
            println!(
                "bound {} sealed values to their rows; {} open under no binding and no key here (sealed under another key, or damaged)",
                done.bound, done.unreadable
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { since, json } => {
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            runs::stats(store.as_ref(), since, json).await
        }
        Command::Events { command } => {
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            match command {
                EventsCommand::List {
                    source,
                    outcome,
                    agent,
                    since,
                    limit,
                    json,
                } => {
                    let filter = crate::store::EventFilter {
                        source,
                        outcome,
                        agent,
                        since: since.map(crate::store::ago),
                        limit,
                    };
                    events::list(store.as_ref(), &filter, json).await
                }
                EventsCommand::Show { id, json } => events::show(store.as_ref(), &id, json).await,
            }
        }
        Command::Mcp { allow_live } => {
            let outside = Outside::new(env.clone(), metrics)?;
            let skills = outside.skills(&root);
            let config = Arc::new(load_config(&root, &outside.tools(), &skills)?);
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            let evals = Arc::new(replayer::Replayer {
                root: root.clone(),
                env: env.clone(),
                allow_live,
                database_url: cli.database_url.clone(),
                database_url_from: cli.database_url_from,
            });
            crate::server::mcp::serve_stdio(store, config, evals).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Review {
            agent,
            since,
            json,
            no_model,
        } => {
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            let mut review =
                crate::evals::review::review(store.as_ref(), &agent, crate::store::ago(since)).await?;
            if !no_model
                && !review.problems.is_empty()
                && let Err(e) =
                    improve::name_problems(&root, &env, metrics, store.as_ref(), &mut review).await
            {
                eprintln!(
                    "note: the reviewer did not name the problems ({e:#}); they keep their grouping keys"
                );
            }
            runs::print_review(&review, json)
        }
        Command::Improve {
            agent,
            problem,
            runs,
            since,
            trials,
            tolerance,
            apply,
            github_pr,
            repo,
            json,
        } => {
            let pr_repo = match (github_pr, repo.or_else(|| env.config_repo.clone())) {
                (false, _) => None,
                (true, Some(r)) => Some(r),
                (true, None) => anyhow::bail!(
                    "--github-pr needs the config tree's repository: --repo owner/name or STEWARD_CONFIG_REPO"
                ),
            };
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            let args = improve::ImproveArgs {
                agent,
                problem,
                runs,
                since,
                trials,
                tolerance,
            };
            let output = improve::Output { apply, pr_repo, json };
            improve::improve(&root, &env, store.as_ref(), metrics, args, output).await
        }
        Command::Triggers {
            command:
                TriggersCommand::Test {
                    agent,
                    event,
                    event_id,
                    last,
                    json,
                },
        } => {
            let outside = Outside::new(env.clone(), metrics)?;
            let skills = outside.skills(&root);
            let config = load_config(&root, &outside.tools(), &skills)?;
            let agent = config.agent(&agent).map_err(anyhow::Error::msg)?;
            let target = match (event, event_id, last) {
                (Some(file), _, _) => triggers::Target::File(file),
                (_, Some(id), _) => triggers::Target::Stored(id),
                (_, _, Some(n)) => triggers::Target::Last(n),
                _ => anyhow::bail!("say what to test against: --event FILE, --event-id ID or --last N"),
            };
            let store = match target {
                triggers::Target::File(_) => None,
                _ => Some(open_existing_store(&cli.database_url, cli.database_url_from).await?),
            };
            triggers::test(&config, store.as_deref(), &agent, target, json).await
        }
        Command::Runs { command } => {
            let store = open_existing_store(&cli.database_url, cli.database_url_from).await?;
            match command {
                RunsCommand::List {
                    agent,
                    status,
                    trigger,
                    since,
                    all,
                    json,
                    limit,
                } => {
                    let filter = crate::store::RunFilter {
                        agent,
                        status,
                        source: trigger,
                        since: since.map(crate::store::ago),
                        top_level: !all,
                        limit,
                        ..Default::default()
                    };
                    runs::list(store.as_ref(), &filter, json).await
                }
                RunsCommand::Show { id, json } => runs::show(store.as_ref(), &id, json).await,
            }
        }
    }
}

/// How long `notion-token --listen` waits after a token arrives, for any other.
const NOTION_SETTLE: Duration = Duration::from_secs(2);

/// `steward notion-token`: the one way a verification token leaves the setup window.
async fn notion_token(store: &dyn Store, listen: bool, window: Duration) -> anyhow::Result<ExitCode> {
    use crate::server::handlers::{NOTION_PENDING_KEY, NOTION_SETUP_UNTIL_KEY};
    let lines = |tokens: Option<String>| -> Vec<String> {
        tokens
            .unwrap_or_default()
            .lines()
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let pending = || async { anyhow::Ok(lines(store.get_setting(NOTION_PENDING_KEY).await?)) };
    // Closes the window and shows the token, unless several arrived: the handshake is
    // unsigned, so a second token means someone besides Notion posted one, and picking
    // either could make steward trust a stranger's signing key. The tokens are taken
    // and the window closed before they are looked at, so none arriving in between is
    // lost: it would be refused as outside the window.
    let take = || async {
        store.set_setting(NOTION_SETUP_UNTIL_KEY, "").await?;
        let tokens = lines(store.take_setting(NOTION_PENDING_KEY).await?);
        if tokens.is_empty() {
            bail!("another `steward notion-token` took the verification token first");
        }
        if tokens.len() > 1 {
            bail!(
                "{} different verification tokens arrived at /notion/webhook during the setup window: someone besides Notion is posting to it, so none is shown. Find out who can reach the endpoint, delete the subscription in Notion, and run `steward notion-token --listen` again",
                tokens.len()
            );
        }
        let token = tokens.into_iter().next().unwrap_or_default();
        println!("{token}");
        eprintln!(
            "Paste this token into Notion's Verify dialog. Only once Notion accepts it, set NOTION_WEBHOOK_TOKEN to it and restart steward (a token Notion rejects was not Notion's: someone else posted it)."
        );
        Ok(ExitCode::SUCCESS)
    };
    if !pending().await?.is_empty() {
        return take().await;
    }
    if !listen {
        bail!(
            "no Notion verification token has arrived: run `steward notion-token --listen`, then create the subscription in Notion"
        );
    }
    let until = chrono::Utc::now() + chrono::Duration::from_std(window)?;
    store
        .set_setting(NOTION_SETUP_UNTIL_KEY, &until.to_rfc3339())
        .await?;
    eprintln!(
        "Setup window open until {}: create the webhook subscription in Notion now (endpoint https://<your host>/notion/webhook).",
        until.to_rfc3339()
    );
    while chrono::Utc::now() < until {
        if !pending().await?.is_empty() {
            // Notion sends one handshake; anything else arriving just after it is
            // someone else's, and is seen before a token is shown.
            tokio::time::sleep(NOTION_SETTLE).await;
            return take().await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    store.set_setting(NOTION_SETUP_UNTIL_KEY, "").await?;
    bail!(
        "no verification token arrived within {}; the setup window is closed",
        crate::types::duration::format_duration(window)
    )
}

/// Documents are extracted in memory-capped child processes of this executable.
fn extractor() -> crate::files::extractor::Extractor {
    match std::env::current_exe() {
        Ok(exe) => crate::files::extractor::Extractor::with_worker(exe),
        Err(e) => {
            tracing::warn!(error = %e, "cannot find this executable; documents are extracted in-process");
            Default::default()
        }
    }
}

/// What a command talks to the outside with, built once per process: one HTTP client
/// (one connection pool, one certificate load), the checked client for untrusted URLs,
/// and the service clients.
struct Outside {
    /// The environment, read once.
    settings: crate::config::Settings,
    /// The process's metrics (`/metrics`), shared with the trace exporter.
    metrics: Arc<Metrics>,
    http: reqwest::Client,
    egress: crate::http::Egress,
    /// What sandboxes' egress proxies share (the same internal-address policy; secret
    /// values read from the environment; the CA, made on first use).
    proxies: Arc<crate::http::proxy::EgressHub>,
    clients: crate::integrations::Clients,
    /// For model providers: redirects are not followed, since reqwest would carry a
    /// custom key header (Anthropic's `x-api-key`) to whatever host a gateway names.
    models_http: reqwest::Client,
}

impl Outside {
    fn new(settings: Settings, metrics: Arc<Metrics>) -> anyhow::Result<Outside> {
        let http = crate::http::client().context("cannot build the HTTP client")?;
        // The checked client for untrusted URLs, opened by `STEWARD_HTTP_ALLOW`.
        let policy = crate::http::EgressPolicy::parse(&settings.http_allow)?;
        let named = settings.clone();
        let proxies = crate::http::proxy::EgressHub::new(policy.clone())
            .with_secrets(move |name| named.named_var(name))
            .with_host_bundle(settings.ssl_cert_file.clone());
        let models_http = crate::http::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Outside {
            models_http,
            egress: crate::http::Egress::new(policy),
            proxies: Arc::new(proxies),
            clients: crate::integrations::Clients::from_settings(http.clone(), &settings),
            http,
            settings,
            metrics,
        })
    }

    /// A runner over `store` with everything the environment configures: providers,
    /// reply sources, the extractor, content capture on spans.
    fn runner(
        &self,
        store: Arc<dyn crate::store::Store>,
        tools: ToolRegistry,
        skills: SkillSet,
        config: &Config,
    ) -> crate::run::builder::RunnerBuilder {
        Runner::builder(store)
            .extractor(extractor())
            .providers(self.providers().with_prices(config.prices.clone()))
            .tools(tools)
            .subagents(config.subagents.clone())
            .skills(skills)
            .sources(self.sources())
            .capture_content(self.settings.otel_capture_content)
            .instrument_runs(self.settings.log_spans)
            .metrics(self.metrics.clone())
            .data_key(self.settings.data_key.clone())
    }

    /// Connects to the config's MCP servers and registers their tools; a server that
    /// cannot be used is skipped with a warning, and steward starts without it. With
    /// `recordings`, mock calls use the servers' cassettes as its mode says.
    async fn connect_mcp(
        &self,
        tools: &mut ToolRegistry,
        config: &Config,
        recordings: Option<&mcp::Recordings>,
    ) -> Option<Arc<mcp::McpHub>> {
        if config.mcp.is_empty() {
            return None;
        }
        // Command servers run in the script sandbox unless their file opts out.
        let sandboxed = config.mcp.values().any(|s| {
            matches!(
                &s.transport,
                crate::config::mcp::McpTransport::Stdio { sandbox: Some(_), .. }
            )
        });
        let jail = sandboxed.then(script_sandbox);
        let (hub, warnings) = mcp::connect_all(
            &config.mcp,
            &|name| self.settings.named_var(name),
            tools.names(),
            recordings,
            jail.as_ref().map(|sandbox| mcp::Jail {
                sandbox,
                egress: &self.proxies,
            }),
        )
        .await;
        for w in warnings {
            tracing::warn!("{w}");
        }
        use crate::tools::registry::ToolSource;
        tracing::info!(
            tools = hub.all().len(),
            servers = config.mcp.len(),
            "MCP servers connected"
        );
        tools.add_source(hub.clone());
        Some(hub)
    }

    fn providers(&self) -> ProviderSet {
        ProviderSet::from_settings(&self.settings, self.models_http.clone(), MODEL_TIMEOUT)
    }

    /// The skills under `root`, with the script sandbox probed when any skill ships
    /// Python, shell or Node scripts.
    fn skills(&self, root: &Path) -> SkillSet {
        let deps = crate::skills::deps::DepsCache::new(
            self.settings.skill_deps_dir.clone(),
            self.settings.package_index.clone(),
        )
        .with_egress(self.proxies.clone());
        let set = SkillSet::load(root, &self.settings.skill_dirs)
            .with_deps(Arc::new(deps))
            .with_egress(self.proxies.clone());
        if !set.skills.values().any(|s| s.has_process_scripts()) {
            return set;
        }
        set.with_sandbox(Arc::new(script_sandbox()))
    }

    fn tools(&self) -> ToolRegistry {
        crate::integrations::builtin_tools(&self.clients, self.egress.clone())
    }

    fn sources(&self) -> crate::triggers::Sources {
        crate::triggers::Sources::new(crate::triggers::source::SourceSettings {
            egress: self.egress.clone(),
            prompt_base_url: self.settings.prompt_base_url.clone(),
            public_url: self.settings.public_url.clone(),
            log_channel: self.settings.log_channel.clone(),
            attachment_cap: self.settings.max_attachment_bytes,
            ..crate::triggers::source::SourceSettings::from_clients(&self.clients)
        })
    }
}

/// The config's MCP tools from their cassettes under `root` (`evals/mcp`), answering
/// from recorded results; no server is reached. The warnings (servers never recorded)
/// are returned for the caller to show or not.
fn replay_mcp(root: &Path, tools: &mut ToolRegistry, config: &Config) -> Vec<String> {
    if config.mcp.is_empty() {
        return Vec::new();
    }
    let (hub, warnings) = mcp::replay_all(&config.mcp, tools.names(), &mcp_dir(root));
    tools.add_source(hub);
    warnings
}

/// Where MCP cassettes live.
fn mcp_dir(root: &Path) -> PathBuf {
    root.join(crate::evals::MCP_CASSETTES)
}

fn known(tools: &ToolRegistry, skills: &SkillSet) -> Known {
    Known {
        tools: tools.names(),
        skills: skills.names(),
    }
}

fn load_config(root: &Path, tools: &ToolRegistry, skills: &SkillSet) -> anyhow::Result<Config> {
    Config::load(root, &known(tools, skills)).map_err(|diags| {
        let n = diags.0.len();
        anyhow::anyhow!(
            "{diags}\n{n} problem{} in the config",
            if n == 1 { "" } else { "s" }
        )
    })
}

/// Whether `url` names PostgreSQL (`postgres://` or `postgresql://`); `sqlite:` URLs
/// and plain paths name the embedded SQLite; any other scheme is an error (it would
/// otherwise become the name of a SQLite file).
fn is_postgres(url: &str) -> anyhow::Result<bool> {
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s)
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)));
    match scheme {
        Some("postgres" | "postgresql") => Ok(true),
        Some("sqlite") | None => Ok(false),
        Some(other) => bail!(
            "DATABASE_URL {}: `{other}` is not a supported database (use sqlite://PATH or postgres://...)",
            crate::store::redact_url(url)
        ),
    }
}

/// The run store `url` names: `postgres://` (or `postgresql://`) for PostgreSQL,
/// `sqlite://` or a plain path for the embedded SQLite.
/// The store for a command that only reads it: an SQLite file that does not exist is
/// an error naming the path and where the address came from, never a new empty store
/// (which would answer "no runs" for a typo in DATABASE_URL or the wrong folder).
async fn open_existing_store(url: &str, from: &str) -> anyhow::Result<Arc<dyn Store>> {
    if !is_postgres(url)?
        && let Some(path) = crate::store::sqlite::file_of(url)
        && !path.exists()
    {
        let shown = match std::env::current_dir() {
            Ok(dir) if path.is_relative() => dir.join(&path).display().to_string(),
            _ => path.display().to_string(),
        };
        bail!(
            "no run store at {shown} (the database address came from {from}: {}); run `steward serve` or `steward run` there first, or point DATABASE_URL or --database-url at the store",
            crate::store::redact_url(url)
        );
    }
    open_store(url).await
}

async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let shown = crate::store::redact_url(url);
    if is_postgres(url)? {
        let store = crate::store::PgStore::connect(url)
            .await
            .with_context(|| format!("cannot open the run store {shown}"))?;
        return Ok(Arc::new(store));
    }
    let store = SqliteStore::connect(url)
        .await
        .with_context(|| format!("cannot open the run store {shown}"))?;
    Ok(Arc::new(store))
}

/// An event file whose message key is misspelt (`{"txt": ...}`) would run with no
/// message at all: refused with the key it probably meant.
fn check_message(trigger: &TriggerEvent) -> anyhow::Result<()> {
    if trigger.text.is_some() {
        return Ok(());
    }
    let Some(obj) = trigger.payload.as_object() else {
        return Ok(());
    };
    for key in obj.keys() {
        let hint = crate::config::parse::did_you_mean(key, ["text", "prompt"]);
        if !hint.is_empty() && obj[key].is_string() {
            bail!(
                "the event has no \"text\" (or \"prompt\") string, so the agent would get no message: its key '{key}'{hint}"
            );
        }
    }
    if obj.is_empty() {
        bail!("the event is empty: give the message as {{\"text\": \"...\"}}");
    }
    Ok(())
}

/// `validate --explain`: every pair of triggers of two agents that can take one event.
fn explain_overlaps(root: &Path, config: &Config) {
    let texts: crate::config::overlap::Texts = config
        .agents
        .values()
        .filter_map(|a| {
            let text = std::fs::read_to_string(root.join(&a.file)).ok()?;
            Some((a.name.clone(), (a.file.clone(), text)))
        })
        .collect();
    let overlaps = crate::config::overlap::overlaps(&config.agents, &texts);
    if overlaps.is_empty() {
        println!("overlaps: none (every event starts at most one agent)");
    }
    for o in overlaps {
        println!("overlap: {}", o.describe());
    }
}

fn validate(
    root: &Path,
    env: &Settings,
    explain: bool,
    check_env: Option<bool>,
    database_url: &str,
) -> anyhow::Result<ExitCode> {
    let outside = Outside::new(env.clone(), Arc::default())?;
    let tools = outside.tools();
    let skills = outside.skills(root);
    let mut problems = 0;
    for d in &skills.diagnostics {
        eprintln!("{d}");
        if d.level == SkillLevel::Error {
            problems += 1;
        }
    }
    if let Some(line) = scripts_unavailable_line(&skills) {
        eprintln!("warning: {line}");
    }
    match Config::load(root, &known(&tools, &skills)) {
        Ok(config) if config.agents.is_empty() => {
            eprintln!("{}", no_agents(root));
            problems += 1;
        }
        Ok(config) => {
            // Not a problem, but worth knowing: these runs' costs will read unknown.
            for (agent, model) in config.unpriced() {
                eprintln!(
                    "warning: agent {agent} uses {model}, which has no price: its cost will show as unknown (add it to {} at the config root)",
                    crate::config::prices::FILE
                );
            }
            for w in config.reasoning_warnings() {
                eprintln!("warning: {w}");
            }
            let (retiring, retired) = config.lifecycle_findings(chrono::Utc::now().date_naive());
            for w in retiring {
                eprintln!("warning: {w}");
            }
            for r in &retired {
                eprintln!("{r}");
            }
            problems += retired.len();
            // Cases may mock MCP tools: their names come from the servers' cassettes.
            let mut tools = tools;
            replay_mcp(root, &mut tools, &config);
            let names: Vec<String> = tools.names().into_iter().collect();
            let case_problems = eval::validate_cases(root, &config, &names);
            for p in &case_problems {
                eprintln!("{p}");
            }
            problems += case_problems.len();
            if explain {
                explain_overlaps(root, &config);
            }
            if let Some(strict) = check_env {
                let summary = crate::config::needs::summarize(&config, env, is_postgres(database_url)?);
                for line in summary.lines() {
                    println!("{line}");
                }
                if strict {
                    problems += summary.missing().count();
                }
            }
            if problems == 0 {
                let cases = crate::evals::case::case_files(&root.join("evals")).len();
                println!(
                    "ok: {} agent{}, {} subagent{}, {} skill{}, {} eval case{} in {}",
                    config.agents.len(),
                    plural(config.agents.len()),
                    config.subagents.len(),
                    plural(config.subagents.len()),
                    skills.skills.len(),
                    plural(skills.skills.len()),
                    cases,
                    plural(cases),
                    root.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
        Err(diags) => {
            for d in &diags.0 {
                eprintln!("{d}");
            }
            problems += diags.0.len();
        }
    }
    eprintln!("{problems} problem{} found", plural(problems));
    Ok(ExitCode::FAILURE)
}

/// One line about a finished run: id, how it ended, turns, tool calls, tokens, cost, time.
fn summary_line(o: &crate::run::RunOutcome, took: Duration) -> String {
    let cost = if o.cost_unknown {
        format!("cost unknown (priced calls ${:.4})", o.cost_usd)
    } else {
        format!("${:.4}", o.cost_usd)
    };
    format!(
        "run {} {} ({}) · {} turn{} · {} tool call{} · {} tokens in ({}% cached), {} out · {cost} · {:.1}s",
        o.run_id,
        o.status().as_str(),
        o.termination.as_str(),
        o.turns,
        plural(o.turns as usize),
        o.tool_calls,
        plural(o.tool_calls as usize),
        o.usage.input_tokens,
        (crate::run::bill::ratio(o.usage.cached_input_tokens, o.usage.input_tokens) * 100.0).round(),
        o.usage.output_tokens,
        took.as_secs_f64()
    )
}

/// Why a root without agents is refused (a typo in `--root` should not look healthy).
fn no_agents(root: &Path) -> String {
    if root.is_dir() {
        format!(
            "{}: no agents (expected YAML files in {}); pass --root or set STEWARD_ROOT to the folder that holds agents/",
            root.display(),
            root.join("agents").display()
        )
    } else {
        format!(
            "{}: no such directory; pass --root or set STEWARD_ROOT to the folder that holds agents/",
            root.display()
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Every skill diagnostic, one log line each, and once whether script skills are
/// unavailable: what `serve` and `run` say at start.
fn report_skills(skills: &SkillSet) {
    for d in &skills.diagnostics {
        match d.level {
            SkillLevel::Warning => tracing::warn!("{d}"),
            SkillLevel::Error => tracing::error!("{d}"),
        }
    }
    if let Some(line) = scripts_unavailable_line(skills) {
        tracing::warn!("{line}");
    }
}

/// The one warning about skills whose scripts cannot run on this host.
pub(super) fn scripts_unavailable_line(skills: &SkillSet) -> Option<String> {
    let (why, names) = skills.scripts_unavailable()?;
    Some(format!(
        "script skills are unavailable: {why}; these skills' Python, shell and Node scripts will be refused: {}",
        names.join(", ")
    ))
}

fn read_event(path: &str) -> anyhow::Result<serde_json::Value> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the event from standard input")?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read event file {path}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("event file {path} is not valid JSON"))
}

async fn run(
    root: &Path,
    database_url: &str,
    agent: &str,
    event: &str,
    attach: &[PathBuf],
    opts: RunOptions,
    env: &Settings,
) -> anyhow::Result<ExitCode> {
    let RunOptions { mocks, json, metrics } = opts;
    let outside = Outside::new(env.clone(), metrics)?;
    let mut tools = outside.tools();
    let skills = outside.skills(root);
    report_skills(&skills);
    let config = load_config(root, &tools, &skills)?;
    // With --mock-tools no MCP server is reached: its tools answer from their cassettes
    // (or with a clear "no mock recorded" error); a single --mock answers from them too.
    if mocks.all {
        for w in replay_mcp(root, &mut tools, &config) {
            tracing::warn!("{w}");
        }
    } else {
        let recordings = mcp::Recordings {
            dir: mcp_dir(root),
            mode: mcp::Recording::Replay,
        };
        outside.connect_mcp(&mut tools, &config, Some(&recordings)).await;
    }
    tools.mock_only(&mocks.only).map_err(anyhow::Error::msg)?;
    let mock_tools = mocks.all;
    let agent = config.agent(agent).map_err(anyhow::Error::msg)?;
    let mut trigger = TriggerEvent::from_cli(read_event(event)?);
    check_message(&trigger)?;
    for path in attach {
        let content =
            std::fs::read(path).with_context(|| format!("cannot read attachment {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        trigger.attachments.push(NewFile {
            mime: crate::files::mime::from_name(&name).to_string(),
            name,
            content,
        });
    }
    let store = open_store(database_url).await?;
    let runner = outside
        .runner(store.clone(), tools, skills, &config)
        .mock_tools(mock_tools)
        .build();
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let started = std::time::Instant::now();
    let at_terminal = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    if at_terminal {
        eprintln!("running {}… (ctrl-c stops it)", agent.name);
    }
    let outcome = runner.run(&agent, &trigger, None, cancel).await;
    watcher.abort();
    let outcome = outcome?;
    // People at a terminal get the run at a glance; pipes and scripts get the answer only.
    if at_terminal {
        eprintln!("{}", summary_line(&outcome, started.elapsed()));
        // A refused or failed tool call is easy to miss in an answer that reads fine.
        if let Ok(Some(report)) = crate::run::report::RunReport::load(store.as_ref(), &outcome.run_id).await {
            let failed: Vec<&str> = report
                .tool_calls_detail
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.name.as_str())
                .collect();
            if !failed.is_empty() {
                eprintln!(
                    "note: {} tool call{} failed or {} refused ({}); `steward runs show {}` says why",
                    failed.len(),
                    if failed.len() == 1 { "" } else { "s" },
                    if failed.len() == 1 { "was" } else { "were" },
                    failed.join(", "),
                    outcome.run_id
                );
            }
        }
    }
    if !json && let Some(text) = &outcome.final_text {
        // The answer first: post-run evals never delay it.
        println!("{}", plain::plain(text));
    }
    if crate::evals::post_run::wanted(&agent) {
        let verdicts = crate::evals::post_run::evaluate(&runner, &config, &agent, &trigger, &outcome).await?;
        if !json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            for v in &verdicts {
                let verdict = match (&v.error, v.passed) {
                    (Some(e), _) => format!("error: {e}"),
                    (None, true) => format!("pass ({:.2})", v.score),
                    (None, false) => format!("fail ({:.2}): {}", v.score, v.explanation),
                };
                eprintln!("post-run eval \"{}\": {verdict}", v.criterion);
            }
        }
    }
    // The process ends with this run: freeing the tokenizer tables (over 100 MB of small
    // allocations) would cost more CPU than the run's own turns. The OS reclaims them.
    std::mem::forget(runner);
    if json {
        let report = RunReport::load(store.as_ref(), &outcome.run_id)
            .await?
            .context("the run record disappeared")?;
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if outcome.final_text.is_some() {
        // Printed above.
    } else if outcome.status() == RunStatus::Succeeded {
        println!(
            "(no answer kept: output.reply is false for agent '{}')",
            agent.name
        );
    }
    if outcome.status() != RunStatus::Succeeded {
        bail!(
            "run {} {} ({}): {}",
            outcome.run_id,
            outcome.status().as_str(),
            outcome.termination.as_str(),
            outcome.error.as_deref().unwrap_or("no details")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How `steward serve` listens and stops.
struct ServeOptions {
    addr: SocketAddr,
    grace: Duration,
    drain: Duration,
    /// How long an idle keep-alive connection stays open.
    keep_alive: Duration,
    dispatch: DispatchSettings,
    /// A missing setting an agent needs stops the start.
    strict: bool,
}

async fn serve(
    root: &Path,
    database_url: &str,
    opts: ServeOptions,
    env: &Settings,
    metrics: Arc<Metrics>,
) -> anyhow::Result<ExitCode> {
    let ServeOptions {
        addr,
        grace,
        drain,
        keep_alive,
        dispatch: settings,
        strict,
    } = opts;
    let outside = Outside::new(env.clone(), metrics)?;
    let mut tools = outside.tools();
    let skills = outside.skills(root);
    report_skills(&skills);
    let config = Arc::new(load_config(root, &tools, &skills)?);
    if config.agents.is_empty() {
        bail!("{}", no_agents(root));
    }
    // What each agent needs from the environment, said once at start.
    let summary = crate::config::needs::summarize(&config, env, is_postgres(database_url)?);
    for (kind, agents) in &summary.by_trigger {
        tracing::info!("{kind}: {}", agents.join(", "));
    }
    for need in &summary.needs {
        if need.set {
            tracing::info!(setting = %need.setting, agents = %need.agents.join(", "), "set");
        } else {
            tracing::warn!(
                "{} is not set ({}): {} will fail until it is",
                need.setting,
                need.purpose,
                need.agents.join(", ")
            );
        }
    }
    let missing: Vec<&str> = summary.missing().map(|n| n.setting.as_str()).collect();
    if strict && !missing.is_empty() {
        bail!(
            "--strict: not set: {} (steward validate --env lists who needs each)",
            missing.join("; ")
        );
    }
    // Said at start, not refused: a retired model fails only its own runs.
    let (retiring, retired) = config.lifecycle_findings(chrono::Utc::now().date_naive());
    for w in retiring {
        tracing::warn!("{w}");
    }
    for r in retired {
        tracing::error!("{r}");
    }
    // On PostgreSQL (the store replicas share) private Slack input waits sealed in the
    // database, so whichever replica claims the run can read it: the key is required.
    if is_postgres(database_url)? && settings.data_key.is_none() && takes_slack(&config) {
        bail!(
            "STEWARD_DATA_KEY is not set: on PostgreSQL private Slack messages are sealed with it so any replica can answer them (create one with `openssl rand -base64 32`)"
        );
    }
    outside.connect_mcp(&mut tools, &config, None).await;
    let store = open_store(database_url).await?;
    let http = outside.http.clone();
    let installing = skills.clone();
    let runner = outside.runner(store, tools, skills, &config).build();
    let mut secrets = Secrets::new(&config, &outside.settings);
    secrets.admin.open = inspector_open(&secrets.admin, addr);
    secrets.admin.metrics_open = metrics_open(&secrets.admin, addr);
    secrets.admin.hosts.bind = Some(addr.ip());
    let mut service = Service::start(
        runner,
        config.clone(),
        secrets,
        outside.clients.slack.clone(),
        outside.clients.notion.clone(),
        settings,
    );
    // Skills' requirements install in the background; until done a script run waits
    // for its skill's install, and the catalog says "installing".
    let stop = service.shutdown.clone();
    service.tracker.spawn(async move {
        tokio::select! {
            () = skills::install_in_background(&installing) => {}
            () = stop.cancelled() => {}
        }
    });
    if let Some(socket) = crate::server::socket_mode::SocketModeConfig::from_settings(&outside.settings) {
        tracing::info!("SLACK_APP_TOKEN is set: receiving Slack events over Socket Mode too");
        service = service.with_socket_mode(socket, http);
    }
    server::serve(addr, service, grace, drain, keep_alive)
        .await
        .with_context(|| format!("cannot serve on {addr}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Whether any agent takes Slack events (the only triggers whose input can be private).
fn takes_slack(config: &Config) -> bool {
    use crate::config::TriggerSpec;
    config.agents.values().any(|a| {
        a.triggers.iter().any(|t| {
            matches!(
                t,
                TriggerSpec::SlackReaction(_)
                    | TriggerSpec::SlackMention(_)
                    | TriggerSpec::SlackMessage(_)
                    | TriggerSpec::SlackDm(_)
            )
        })
    })
}

/// Whether the run inspector may answer without authentication: only when none is
/// configured and steward listens on loopback (so only this machine can connect).
fn inspector_open(admin: &crate::server::access::AdminAccess, addr: SocketAddr) -> bool {
    if admin.configured() {
        return false;
    }
    if let Some(host) = proxied_host(admin) {
        tracing::warn!(
            %host,
            "the run inspector is closed: STEWARD_PUBLIC_URL names {host}, so requests come through a proxy; set STEWARD_ADMIN_TOKEN or STEWARD_TRUSTED_USER_HEADER to use it"
        );
        return false;
    }
    if addr.ip().is_loopback() {
        tracing::info!(
            "run inspector open at /runs (loopback only; set STEWARD_ADMIN_TOKEN to listen elsewhere)"
        );
        true
    } else {
        tracing::warn!(
            %addr,
            "the run inspector is closed: set STEWARD_ADMIN_TOKEN or STEWARD_TRUSTED_USER_HEADER to use it on a non-loopback address"
        );
        false
    }
}

/// The host `STEWARD_PUBLIC_URL` names when it is not this machine: steward is then
/// reached through a proxy, which connects from loopback when it runs here too.
fn proxied_host(admin: &crate::server::access::AdminAccess) -> Option<&str> {
    let host = admin.hosts.public.as_deref()?;
    let local = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    (!local).then_some(host)
}

/// Whether `/metrics` may answer without a token: only when `STEWARD_METRICS_TOKEN` is
/// unset and steward listens on loopback. Beyond loopback without a token it is closed,
/// which is said at start (a scraper would otherwise only see 401s).
fn metrics_open(admin: &crate::server::access::AdminAccess, addr: SocketAddr) -> bool {
    if admin.metrics_token.is_some() {
        return false;
    }
    if let Some(host) = proxied_host(admin) {
        tracing::warn!(
            %host,
            "/metrics is closed: STEWARD_PUBLIC_URL names {host}, so requests come through a proxy; set STEWARD_METRICS_TOKEN and scrape with it as a bearer token"
        );
        return false;
    }
    if addr.ip().is_loopback() {
        return true;
    }
    tracing::warn!(
        %addr,
        "/metrics is closed: set STEWARD_METRICS_TOKEN and scrape with it as a bearer token to use it on a non-loopback address"
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_and_flag_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.is_hide_set() {
                return;
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&<Cli as clap::CommandFactory>::command(), "steward", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    #[test]
    fn the_summary_line_names_everything_a_person_checks() {
        let outcome = crate::run::RunOutcome {
            final_text: Some("hi".into()),
            usage: crate::types::Usage {
                input_tokens: 1200,
                output_tokens: 80,
                ..Default::default()
            },
            cost_usd: 0.0123,
            turns: 2,
            tool_calls: 1,
            ..crate::run::RunOutcome::new("0196d1c2-aaaa")
        };
        assert_eq!(
            summary_line(&outcome, Duration::from_millis(2340)),
            "run 0196d1c2-aaaa succeeded (completed) · 2 turns · 1 tool call · 1200 tokens in (0% cached), 80 out · $0.0123 · 2.3s"
        );
        let cached = crate::run::RunOutcome {
            usage: crate::types::Usage {
                input_tokens: 1200,
                cached_input_tokens: 1100,
                ..Default::default()
            },
            cost_unknown: true,
            ..outcome
        };
        assert!(
            summary_line(&cached, Duration::from_millis(100))
                .contains("1200 tokens in (92% cached), 0 out · cost unknown (priced calls $0.0123)")
        );
    }
}
