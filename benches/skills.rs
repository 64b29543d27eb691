//! Skill scripts and large skill catalogs. Run with `cargo bench --bench skills`.
//!
//! - Start-up cost of one sandboxed script run: bubblewrap with every namespace, the
//!   read-only system, a work folder and the limits, running `python3` on a script that
//!   is only `pass` (the goal is a median under 100 ms), against `python3 -c pass`
//!   started directly (`RUNS` sets the count, default 50); and the same script with
//!   installed requirements mounted at `/deps` (a package of 50 modules on
//!   `PYTHONPATH`, as a skill's requirements are; goal: within 20 ms of without).
//! - Catalog tokens with 200 skills, listed whole and names-only with `skill_search`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use steward::config::SkillsSpec;
use steward::sandbox::process::{Job, ProcessLimits, ProcessSandbox, find_program};
use steward::skills::{RunSkills, SkillSet};
use steward::tokens::{Encoding, TokenCounter};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn sandbox_start(runs: usize) {
    let sandbox = ProcessSandbox::detect(std::env::temp_dir().join("steward-scripts-bench"));
    if let Some(why) = sandbox.unavailable() {
        println!("sandbox start: skipped, the sandbox is unavailable here ({why})");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("scripts")).expect("scripts dir");
    std::fs::write(dir.path().join("scripts/pass.py"), "pass\n").expect("script");
    let python = find_program("python3").expect("python3 on the host");
    let limits = ProcessLimits::default();
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
    // Installed requirements: a site folder with one package of 50 modules.
    let site = dir.path().join("deps-site");
    std::fs::create_dir_all(site.join("benchpkg")).expect("site");
    std::fs::write(site.join("benchpkg/__init__.py"), "VERSION = '1.0'\n").expect("package");
    for n in 0..50 {
        std::fs::write(site.join(format!("benchpkg/m{n}.py")), format!("X = {n}\n")).expect("module");
    }
    let with_deps = Job {
        deps: Some(&site),
        ..job
    };
    let mut sandboxed = Vec::new();
    let mut direct = Vec::new();
    let mut deps = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let done = sandbox.run(&job, &limits).await.expect("sandboxed run");
        sandboxed.push(t.elapsed());
        assert_eq!(done.stop, steward::sandbox::process::Stop::Exited(0));
        let t = Instant::now();
        let done = sandbox
            .run(&with_deps, &limits)
            .await
            .expect("sandboxed run with deps");
        deps.push(t.elapsed());
        assert_eq!(done.stop, steward::sandbox::process::Stop::Exited(0));
        let t = Instant::now();
        let status = tokio::process::Command::new(&python)
            .args(["-c", "pass"])
            .status()
            .await
            .expect("python3");
        direct.push(t.elapsed());
        assert!(status.success());
    }
    let (s, d) = (median(sandboxed.clone()), median(direct));
    sandboxed.sort();
    println!(
        "sandbox start ({runs} runs): median {} (p90 {}), python3 -c pass directly {}; sandbox overhead {} ({:.2}x)",
        ms(s),
        ms(sandboxed[runs * 9 / 10]),
        ms(d),
        ms(s.saturating_sub(d)),
        s.as_secs_f64() / d.as_secs_f64()
    );
    let w = median(deps);
    println!(
        "sandbox start with installed requirements at /deps: median {} ({} more than without; goal: within 20 ms)",
        ms(w),
        ms(w.saturating_sub(s))
    );
}

fn catalog_tokens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let areas = [
        "pdf",
        "spreadsheet",
        "slack",
        "jira",
        "notion",
        "github",
        "kubernetes",
        "terraform",
        "postgres",
        "invoice",
        "onboarding",
        "incident",
        "release",
        "translation",
        "calendar",
        "expense",
        "security",
        "accessibility",
        "dashboard",
        "email",
    ];
    let tasks = [
        "format",
        "review",
        "summarize",
        "migrate",
        "validate",
        "generate",
        "debug",
        "audit",
        "convert",
        "schedule",
    ];
    for area in areas {
        for task in tasks {
            let name = format!("{area}-{task}");
            let path = dir.path().join(format!("prompts/skills/{name}/SKILL.md"));
            std::fs::create_dir_all(path.parent().expect("parent")).expect("skill dir");
            std::fs::write(
                &path,
                format!(
                    "---\nname: {name}\ndescription: {task} work on {area}: the checklist, the house style and the pitfalls our teams met. Use when a request is about {area} and needs {task}.\n---\nBody\n"
                ),
            )
            .expect("skill");
        }
    }
    let set = Arc::new(SkillSet::load(dir.path(), &[]));
    let counter = TokenCounter::new();
    let count = |text: &str| counter.count(Encoding::O200k, text).tokens;
    let whole = RunSkills::new(
        set.clone(),
        &SkillsSpec {
            catalog_tokens: u64::MAX,
            ..SkillsSpec::default()
        },
    );
    let searched = RunSkills::new(set, &SkillsSpec::default());
    let (a, b) = (
        count(&whole.catalog().unwrap_or_default()),
        count(&searched.catalog().unwrap_or_default()),
    );
    let hit = count(&searched.search("review the kubernetes deployment"));
    println!(
        "catalog with 200 skills (o200k tokens): whole {a}, names only {b} ({:.0}% of whole); one skill_search answer {hit}",
        b as f64 * 100.0 / a as f64
    );
}

fn main() {
    let runs = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(sandbox_start(runs));
    catalog_tokens();
}
