//! Agent Skills specification conformance (agentskills.io): each rule's diagnostic with
//! its exact message, what the model is shown when it loads skills, and skill search
//! over a catalog of 200 skills.

mod support;

use std::path::Path;
use std::sync::Arc;

use steward::config::SkillsSpec;
use steward::skills::search::SkillIndex;
use steward::skills::{Level, RunSkills, SkillSet};
use support::write;

fn skill(root: &Path, folder: &str, front: &str, body: &str) {
    write(
        root,
        &format!("prompts/skills/{folder}/SKILL.md"),
        &format!("---\n{front}\n---\n{body}"),
    );
}

/// `(file, level, message)` of every diagnostic, in order.
fn diagnostics(set: &SkillSet) -> Vec<(String, Level, String)> {
    set.diagnostics
        .iter()
        .map(|d| (d.file.display().to_string(), d.level, d.message.clone()))
        .collect()
}

#[test]
fn every_specification_rule_has_its_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    skill(root, "Bad--Name-", "name: Bad--Name-\ndescription: d", "");
    let long = "a".repeat(65);
    skill(root, &long, &format!("name: {long}\ndescription: d"), "");
    skill(root, "under_score", "name: under_score\ndescription: d", "");
    // NFKC: the full-width "ａ" is "a" once normalized, so it matches its folder.
    skill(root, "caf-a", "name: caf-ａ\ndescription: d", "");
    let description = "word ".repeat(300);
    skill(
        root,
        "wordy",
        &format!(
            "name: wordy\ndescription: {description}\ncompatibility: {}\nmetadata:\n  version: 2\n  tags: [a, b]\n  author: me",
            "c".repeat(501)
        ),
        "",
    );
    write(
        root,
        "prompts/skills/lower/skill.md",
        "---\nname: lower\ndescription: Lower-case file name.\n---\nbody",
    );
    std::fs::create_dir_all(root.join("prompts/skills/latin1")).unwrap();
    std::fs::write(
        root.join("prompts/skills/latin1/SKILL.md"),
        b"---\nname: latin1\ndescription: caf\xe9\n---\n",
    )
    .unwrap();
    write(
        root,
        "prompts/skills/group/inner/SKILL.md",
        "---\nname: inner\ndescription: Nested.\n---\n",
    );
    write(
        root,
        "prompts/skills/unclosed/SKILL.md",
        "---\nname: unclosed\ndescription: never closed\n",
    );
    write(root, "prompts/skills/empty-folder/notes.txt", "no skill here");
    skill(root, "dup-a", "name: same\ndescription: first", "");
    skill(root, "dup-b", "name: same\ndescription: second", "");

    let set = SkillSet::load(root, &[]);
    let d = diagnostics(&set);
    let w = |file: &str, message: &str| {
        (
            format!("prompts/skills/{file}"),
            Level::Warning,
            message.to_string(),
        )
    };
    let e = |file: &str, message: &str| {
        (
            format!("prompts/skills/{file}"),
            Level::Error,
            message.to_string(),
        )
    };
    let expected = vec![
        w("Bad--Name-/SKILL.md", "name 'Bad--Name-' must be lower case"),
        w(
            "Bad--Name-/SKILL.md",
            "name 'Bad--Name-' must not start or end with a hyphen",
        ),
        w(
            "Bad--Name-/SKILL.md",
            "name 'Bad--Name-' must not contain two hyphens in a row",
        ),
        w(
            &format!("{long}/SKILL.md"),
            &format!("name '{long}' is 65 characters, over the 64 allowed"),
        ),
        w("dup-a/SKILL.md", "name 'same' does not match its folder 'dup-a'"),
        w("dup-b/SKILL.md", "name 'same' does not match its folder 'dup-b'"),
        w(
            "dup-b/SKILL.md",
            "skill 'same' is already defined in prompts/skills/dup-a/SKILL.md; the first one is used and this one is not loaded",
        ),
        w("empty-folder", "folder has no SKILL.md, so it is not a skill"),
        w(
            "group",
            "folder has no SKILL.md but holds skills one level down (inner); skills must sit directly in the skills folder, so these are not loaded",
        ),
        e(
            "latin1/SKILL.md",
            "not UTF-8 text (invalid byte at offset 33); skipped",
        ),
        w(
            "under_score/SKILL.md",
            "name 'under_score' may hold only letters, digits and hyphens, not '_'",
        ),
        e(
            "unclosed/SKILL.md",
            "front matter is not closed (no line '---' after it); skipped",
        ),
        w(
            "wordy/SKILL.md",
            "description is 1499 characters, over the 1024 allowed; the catalog shows it shortened",
        ),
        w(
            "wordy/SKILL.md",
            "compatibility is 501 characters, over the 500 allowed",
        ),
        w(
            "wordy/SKILL.md",
            "metadata 'tags' is not a string (the specification maps strings to strings); read as text",
        ),
        w(
            "wordy/SKILL.md",
            "metadata 'version' is not a string (the specification maps strings to strings); read as text",
        ),
    ];
    let mut sorted = d.clone();
    sorted.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
    let mut want = expected.clone();
    want.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
    assert_eq!(sorted, want, "{d:#?}");
    // Lenient where the specification allows: these loaded.
    for name in ["Bad--Name-", "caf-ａ", "lower", "same", "under_score", "wordy"] {
        assert!(set.skills.contains_key(name), "{name} should load");
    }
    assert_eq!(set.skills["same"].description, "first", "the first one wins");
    assert!(!set.skills.contains_key("inner") && !set.skills.contains_key("unclosed"));

    // The catalog shortens an over-long description.
    let run = RunSkills::new(Arc::new(set), &SkillsSpec::default());
    let catalog = run.catalog().unwrap_or_default();
    let line = catalog.lines().find(|l| l.starts_with("- wordy: ")).unwrap();
    assert!(
        line.ends_with('…') && line.chars().count() <= 1024 + "- wordy: ".len(),
        "{line}"
    );
}

fn loaded_set(root: &Path) -> Arc<SkillSet> {
    skill(
        root,
        "guide",
        "name: guide\ndescription: A guide.\nlicense: MIT\ncompatibility: Any host.",
        "# Guide\nGUIDE BODY\n",
    );
    let mut big = String::from("# Handbook\nRead the section you need.\n");
    for i in 0..40 {
        big.push_str(&format!("\n## Part {i}\n"));
        for _ in 0..200 {
            big.push_str("Policy words for this part of the handbook. ");
        }
    }
    skill(
        root,
        "handbook",
        "name: handbook\ndescription: A very long handbook.",
        &big,
    );
    write(root, "prompts/skills/guide/assets/logo.png", "\u{0}PNG");
    for i in 0..45 {
        write(
            root,
            &format!("prompts/skills/guide/references/r{i:02}.md"),
            "ref",
        );
    }
    Arc::new(SkillSet::load(root, &[]))
}

#[test]
fn loading_is_whole_once_counted_only_on_success_and_binary_files_are_listed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let set = loaded_set(dir.path());
    let run = RunSkills::new(set, &SkillsSpec::default());

    // A call naming an unknown skill loads nothing, not even the good names.
    let err = run.load_many(&["guide".into(), "nope".into()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown skill 'nope'; available skills: guide, handbook"
    );
    assert!(run.loads().is_empty());

    let first = run.load_many(&["guide".into()]).unwrap();
    assert!(
        first.starts_with("# Skill: guide\nLicense: MIT\nCompatibility: Any host.\n\n# Guide\nGUIDE BODY"),
        "{first}"
    );
    assert!(
        first.contains("assets/logo.png (binary, 4 bytes; not readable as text)"),
        "{first}"
    );
    assert!(first.contains("references/r38.md, and 6 more)"), "{first}");
    let again = run.load_many(&["guide".into()]).unwrap();
    assert_eq!(
        again,
        "# Skill: guide\n\n(already loaded above in this run; its instructions are unchanged)"
    );
    assert_eq!(run.loads()["guide"], 1);
    assert_eq!(
        run.load_sub("guide", "assets/logo.png", None)
            .unwrap_err()
            .to_string(),
        "'assets/logo.png' is a binary file (a font, image or archive), not text"
    );

    // Over the cap, a skill gives its opening and its sections, loaded one at a time.
    let big = run.load_many(&["handbook".into()]).unwrap();
    assert!(big.contains("Read the section you need."), "{}", &big[..200]);
    assert!(big.contains("over the 16000-token limit for loading a skill whole"));
    assert!(big.contains("- Part 39 (~"));
    assert!(!big.contains("## Part 1\n"));
    let part = run.load_sub("handbook", "SKILL.md", Some("Part 7")).unwrap();
    assert!(part.starts_with("# handbook/SKILL.md § Part 7\n\n## Part 7\nPolicy words"));
    assert!(!part.contains("Part 8"));
    assert!(
        run.load_sub("handbook", "SKILL.md", Some("Part 99"))
            .unwrap_err()
            .to_string()
            .starts_with("SKILL.md has no section 'Part 99'; sections: Part 0; Part 1;")
    );

    // After a compaction, the loaded skills come back whole (not counted again).
    let back = run.reinjection().unwrap();
    assert!(back.starts_with("[steward: skills loaded earlier in this run, kept through compaction]"));
    assert!(back.contains("GUIDE BODY") && back.contains("# Skill: handbook"));
    assert_eq!(run.loads()["guide"], 1);
}

/// 200 skills in 20 areas with 10 kinds of task each, described the way skill authors
/// write them.
fn catalog_of_200() -> Vec<(String, String)> {
    let areas = [
        ("pdf", "PDF documents", "pages, forms and annotations"),
        ("spreadsheet", "spreadsheets", "formulas, pivot tables and charts"),
        ("slack", "Slack channels", "threads, reactions and canvases"),
        ("jira", "Jira tickets", "epics, sprints and workflows"),
        ("notion", "Notion pages", "databases, properties and templates"),
        ("github", "GitHub pull requests", "reviews, checks and branches"),
        (
            "kubernetes",
            "Kubernetes clusters",
            "pods, deployments and helm charts",
        ),
        ("terraform", "Terraform modules", "state, providers and plans"),
        (
            "postgres",
            "PostgreSQL databases",
            "queries, indexes and migrations",
        ),
        (
            "invoice",
            "customer invoices",
            "line items, taxes and payment terms",
        ),
        (
            "onboarding",
            "new-hire onboarding",
            "accounts, laptops and first-week plans",
        ),
        (
            "incident",
            "production incidents",
            "timelines, severity and postmortems",
        ),
        ("release", "software releases", "changelogs, versions and rollout"),
        (
            "translation",
            "product copy translation",
            "locales, glossaries and tone",
        ),
        ("calendar", "meeting calendars", "invites, time zones and rooms"),
        (
            "expense",
            "expense reports",
            "receipts, mileage and reimbursements",
        ),
        (
            "security",
            "security reviews",
            "threat models, secrets and permissions",
        ),
        (
            "accessibility",
            "web accessibility",
            "contrast, screen readers and ARIA",
        ),
        ("dashboard", "metrics dashboards", "panels, queries and alerts"),
        ("email", "customer emails", "replies, tone and follow-ups"),
    ];
    let tasks = [
        ("format", "Format and tidy"),
        ("review", "Review"),
        ("summarize", "Summarize"),
        ("migrate", "Migrate"),
        ("validate", "Validate and lint"),
        ("generate", "Generate drafts of"),
        ("debug", "Debug problems in"),
        ("audit", "Audit compliance of"),
        ("convert", "Convert between formats for"),
        ("schedule", "Plan and schedule work on"),
    ];
    let mut out = Vec::new();
    for (area, noun, detail) in areas {
        for (task, verb) in tasks {
            out.push((
                format!("{area}-{task}"),
                format!("{verb} {noun}, covering {detail}. Use when a request concerns {noun}."),
            ));
        }
    }
    out
}

#[test]
fn skill_search_finds_the_right_skill_in_the_top_3_over_200_skills() {
    let skills = catalog_of_200();
    let index = SkillIndex::new(skills.iter().map(|(n, d)| (n.as_str(), d.as_str())));
    let queries = [
        (
            "fill in the fields of a PDF form and check the annotations",
            "pdf-",
        ),
        (
            "our pivot table formulas are broken, debug them",
            "spreadsheet-debug",
        ),
        ("summarize this long Slack thread", "slack-summarize"),
        (
            "move our Jira epics to the new workflow (migration)",
            "jira-migrate",
        ),
        (
            "generate a Notion page template for the team database",
            "notion-generate",
        ),
        ("review this GitHub pull request", "github-review"),
        (
            "the deployment pods keep crashing, debug the cluster",
            "kubernetes-debug",
        ),
        ("lint and validate the terraform plan", "terraform-validate"),
        (
            "which PostgreSQL indexes should we add? review the queries",
            "postgres-review",
        ),
        ("audit the taxes on these customer invoices", "invoice-audit"),
        (
            "schedule the first-week plans for a new hire",
            "onboarding-schedule",
        ),
        (
            "write the postmortem summary of yesterday's incident",
            "incident-summarize",
        ),
        ("generate the changelog for the next release", "release-generate"),
        (
            "translate the product copy into the German locale, keep the glossary",
            "translation-",
        ),
        ("convert meeting invites between time zones", "calendar-convert"),
        ("validate the receipts in my expense report", "expense-validate"),
        (
            "audit secrets and permissions: a security review",
            "security-audit",
        ),
        (
            "check color contrast and ARIA labels for accessibility",
            "accessibility-",
        ),
        ("migrate the dashboard panels and alerts", "dashboard-migrate"),
        (
            "draft polite replies to customer emails (generate)",
            "email-generate",
        ),
    ];
    let mut misses = Vec::new();
    for (query, want) in queries {
        let top: Vec<String> = index.search(query, 3).into_iter().map(|(n, _)| n).collect();
        if !top.iter().any(|n| n.starts_with(want)) {
            misses.push(format!("{query:?} -> {top:?}, wanted {want}"));
        }
    }
    assert!(misses.is_empty(), "{misses:#?}");
}

#[test]
fn a_large_catalog_lists_names_only_and_offers_search() {
    let dir = tempfile::tempdir().unwrap();
    for (name, description) in catalog_of_200() {
        skill(
            dir.path(),
            &name,
            &format!("name: {name}\ndescription: {description}"),
            "body",
        );
    }
    let set = Arc::new(SkillSet::load(dir.path(), &[]));
    assert_eq!(set.skills.len(), 200);
    let full = RunSkills::new(
        set.clone(),
        &SkillsSpec {
            catalog_tokens: 1_000_000,
            ..SkillsSpec::default()
        },
    );
    let budgeted = RunSkills::new(set, &SkillsSpec::default());
    assert!(!full.searchable() && budgeted.searchable());
    let (full_catalog, short) = (full.catalog().unwrap(), budgeted.catalog().unwrap());
    let tokens = steward::tokens::quick_estimate;
    assert!(tokens(&full_catalog) > 2000 && tokens(&short) < tokens(&full_catalog) / 3);
    assert!(
        short.contains("There are 200 skills, listed by name only.") && short.contains("\n- pdf-review\n")
    );
    let found = budgeted.search("review a GitHub pull request");
    assert!(
        found.starts_with("Skills matching 'review a GitHub pull request', best first:\n\n- github-review: Review GitHub pull requests"),
        "{found}"
    );
    assert_eq!(
        budgeted.search("zzz"),
        "No skill matches 'zzz'. Try other words, or go on without a skill."
    );
}
