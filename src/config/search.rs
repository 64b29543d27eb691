//! What an agent may search (`search:`): Slack as the person who asked, and Notion,
//! Jira and GitHub with steward's own access, so each of those lists its scope and an
//! empty scope turns that source off.

use serde::Deserialize;

/// `search: {slack: {...}, notion: {roots}, jira: {projects}, github: {repos}}`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchSpec {
    pub slack: Option<SlackSearchSpec>,
    pub notion: Option<NotionSearchSpec>,
    pub jira: Option<JiraSearchSpec>,
    pub github: Option<GithubSearchSpec>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlackSearchSpec {
    /// `public_channel` (default), `private_channel`, `im`, `mpim`.
    pub channel_types: Option<Vec<String>>,
    /// Search files too (`search:read.files`).
    pub files: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotionSearchSpec {
    /// Page or database ids whose pages may be found; `"*"` for every page shared with
    /// the integration.
    #[serde(default)]
    pub roots: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JiraSearchSpec {
    /// Project keys; `"*"` for every project steward's Jira account sees.
    #[serde(default)]
    pub projects: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GithubSearchSpec {
    /// `owner/name`.
    #[serde(default)]
    pub repos: Vec<String>,
}

/// The channel types Slack's search knows.
pub const CHANNEL_TYPES: [&str; 4] = ["public_channel", "private_channel", "im", "mpim"];

/// What one agent may search, validated. An empty list: that source is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchScope {
    /// Slack channel types searched as the asker; empty: Slack search is off.
    pub slack_channel_types: Vec<String>,
    pub slack_files: bool,
    pub notion_roots: Vec<String>,
    pub jira_projects: Vec<String>,
    pub github_repos: Vec<String>,
}

impl SearchScope {
    pub fn slack(&self) -> bool {
        !self.slack_channel_types.is_empty()
    }

    /// Whether `page_or_database` is one of the Notion roots (ids compared without
    /// dashes, as Notion writes them both ways).
    pub fn notion_root(&self, id: &str) -> bool {
        let bare = |s: &str| s.replace('-', "").to_ascii_lowercase();
        let id = bare(id);
        self.notion_roots.iter().any(|r| r == "*" || bare(r) == id)
    }

    /// Whether Jira issue `key` (`OPS-12`) is in a listed project.
    pub fn jira_issue(&self, key: &str) -> bool {
        let project = key.rsplit_once('-').map_or(key, |(p, _)| p);
        self.jira_projects
            .iter()
            .any(|p| p == "*" || p.eq_ignore_ascii_case(project))
    }

    /// Whether the agent may read Jira issue `key`: it lists no projects (no scope
    /// set), or the issue's project is one of them.
    pub fn reads_jira_issue(&self, key: &str) -> bool {
        self.jira_projects.is_empty() || self.jira_issue(key)
    }

    /// Whether `owner/name` is a listed repository.
    pub fn github_repo(&self, repo: &str) -> bool {
        self.github_repos.iter().any(|r| r.eq_ignore_ascii_case(repo))
    }

    /// Sources this scope turns on, by name.
    pub fn sources(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.slack() {
            out.push("slack");
        }
        if !self.notion_roots.is_empty() {
            out.push("notion");
        }
        if !self.jira_projects.is_empty() {
            out.push("jira");
        }
        if !self.github_repos.is_empty() {
            out.push("github");
        }
        out
    }
}

/// Builds the scope, with a message for each bad value (key, value, message).
pub fn build(spec: &SearchSpec) -> (SearchScope, Vec<(&'static str, String, String)>) {
    let mut problems = Vec::new();
    let mut scope = SearchScope::default();
    if let Some(slack) = &spec.slack {
        let types = slack
            .channel_types
            .clone()
            .unwrap_or_else(|| vec!["public_channel".into()]);
        for t in &types {
            if !CHANNEL_TYPES.contains(&t.as_str()) {
                problems.push((
                    "channel_types",
                    t.clone(),
                    format!(
                        "unknown channel type '{t}', expected one of {}",
                        CHANNEL_TYPES.join(", ")
                    ),
                ));
            }
        }
        if types.is_empty() {
            problems.push((
                "channel_types",
                String::new(),
                "channel_types is empty: leave slack out to turn Slack search off".into(),
            ));
        }
        scope.slack_channel_types = types;
        scope.slack_files = slack.files.unwrap_or(false);
    }
    if let Some(n) = &spec.notion {
        scope.notion_roots = n.roots.clone();
    }
    if let Some(j) = &spec.jira {
        scope.jira_projects = j.projects.clone();
    }
    if let Some(g) = &spec.github {
        for r in &g.repos {
            let ok = r
                .split_once('/')
                .is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'));
            if !ok {
                problems.push(("repos", r.clone(), format!("'{r}' is not owner/name")));
            }
        }
        scope.github_repos = g.repos.clone();
    }
    (scope, problems)
}

/// The tools that search, and the source each needs (`search` needs any).
pub const SEARCH_TOOLS: [(&str, &str); 4] = [
    ("slack_search", "slack"),
    ("notion_search", "notion"),
    ("github_search", "github"),
    ("search", "any"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_match_ids_keys_and_repos() {
        let (scope, problems) = build(&SearchSpec {
            slack: Some(SlackSearchSpec::default()),
            notion: Some(NotionSearchSpec {
                roots: vec!["1c2d3e4f-0000-4000-8000-000000000001".into()],
            }),
            jira: Some(JiraSearchSpec {
                projects: vec!["OPS".into()],
            }),
            github: Some(GithubSearchSpec {
                repos: vec!["acme/infra".into(), "nope".into()],
            }),
        });
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(scope.slack_channel_types, ["public_channel"]);
        assert!(scope.notion_root("1c2d3e4f000040008000000000000001"));
        assert!(!scope.notion_root("1c2d3e4f000040008000000000000002"));
        assert!(scope.jira_issue("OPS-12") && scope.jira_issue("ops-3") && !scope.jira_issue("HR-1"));
        assert!(scope.github_repo("Acme/Infra") && !scope.github_repo("acme/web"));
        assert_eq!(scope.sources(), ["slack", "notion", "jira", "github"]);
        assert!(SearchScope::default().sources().is_empty());
    }
}
