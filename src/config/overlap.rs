//! Rules of different agents that can take the same event. For Slack (conversations,
//! where one agent answers) an overlap precedence cannot order is a config error naming
//! both files; for Jira, Notion and webhooks (which fan out) overlaps are listed by
//! `validate --explain`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::diagnostic::{Diagnostic, find_key};
use super::{AgentConfig, TriggerSpec};

/// The text of each agent's file, by agent name, to point at its rules.
pub type Texts = BTreeMap<String, (PathBuf, String)>;

/// Where the `index`-th rule of an agent's `triggers:` is written: 1-based line and
/// column of its kind key (the file's start when it cannot be found).
pub fn rule_position(text: &str, triggers: &[TriggerSpec], index: usize) -> (usize, usize) {
    let Some(rule) = triggers.get(index) else {
        return (1, 1);
    };
    let kind = rule.kind_name();
    // The n-th rule of this kind is the n-th `kind:` key after `triggers:`.
    let nth = triggers[..index].iter().filter(|r| r.kind_name() == kind).count();
    let mut from = find_key(text, "triggers", 0).map_or(0, |(line, _)| line);
    let mut found = None;
    for _ in 0..=nth {
        match find_key(text, kind, from) {
            Some((line, col)) => {
                found = Some((line + 1, col + 1));
                from = line + 1;
            }
            None => break,
        }
    }
    found.unwrap_or((1, 1))
}

/// Whether two rules can match the same event, apart from `when:` filters (which no
/// check can compare).
fn can_share_an_event(a: &TriggerSpec, b: &TriggerSpec) -> bool {
    use TriggerSpec as T;
    // Two lists (channels, events, projects) share a value; an empty one is "any".
    let meet = |x: &[String], y: &[String]| x.is_empty() || y.is_empty() || x.iter().any(|c| y.contains(c));
    // A channel rule takes direct messages when it names none, or names a DM.
    let takes_dms = |c: &[String]| c.is_empty() || c.iter().any(|id| id.starts_with('D'));
    match (a, b) {
        (T::SlackMention(x), T::SlackMention(y)) | (T::SlackMessage(x), T::SlackMessage(y)) => {
            meet(&x.channels, &y.channels)
        }
        (T::SlackReaction(x), T::SlackReaction(y)) => {
            x.reaction == y.reaction && meet(&x.channels, &y.channels)
        }
        (T::SlackDm(_), T::SlackDm(_)) => true,
        (T::SlackDm(_), T::SlackMessage(m)) | (T::SlackMessage(m), T::SlackDm(_)) => takes_dms(&m.channels),
        (T::Jira(x), T::Jira(y)) => meet(&x.events, &y.events) && meet(&x.projects, &y.projects),
        (T::Notion(x), T::Notion(y)) => {
            meet(&x.events, &y.events)
                && (x.database.is_none() || y.database.is_none() || x.database == y.database)
        }
        (T::Webhook(x), T::Webhook(y)) => x.name == y.name,
        // Each cron slot belongs to the agent whose schedule it is.
        _ => false,
    }
}

/// One overlap between rules of two agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub kind: &'static str,
    pub first: (String, PathBuf, usize, usize),
    pub second: (String, PathBuf, usize, usize),
    /// Slack rules only: whether precedence orders the two (else a config error).
    pub ordered: bool,
    /// Slack rules only: the agent that takes the conversation when both match.
    pub winner: Option<String>,
}

impl Overlap {
    /// One line for `validate --explain`.
    pub fn describe(&self) -> String {
        let at = |(agent, file, line, col): &(String, PathBuf, usize, usize)| {
            format!("{agent} ({}:{line}:{col})", file.display())
        };
        let outcome = match (&self.winner, self.ordered) {
            (Some(w), _) => format!("{w} answers (precedence)"),
            (None, false) => "unordered: a config error".to_string(),
            (None, true) => "both run (this source fans out)".to_string(),
        };
        format!(
            "{}: {} and {}: {outcome}",
            self.kind,
            at(&self.first),
            at(&self.second)
        )
    }
}

/// Every pair of rules of different agents that can take one event, in agent-name
/// order. `also: true` rules run beside whoever wins, so they overlap nothing.
pub fn overlaps(agents: &BTreeMap<String, Arc<AgentConfig>>, texts: &Texts) -> Vec<Overlap> {
    let list: Vec<&Arc<AgentConfig>> = agents.values().collect();
    let at = |agent: &AgentConfig, i: usize| {
        let (file, text) = texts
            .get(&agent.name)
            .map_or((agent.file.as_path(), ""), |(f, t)| (f.as_path(), t.as_str()));
        let (line, col) = rule_position(text, &agent.triggers, i);
        (agent.name.clone(), file.to_path_buf(), line, col)
    };
    let mut out = Vec::new();
    for (n, a) in list.iter().enumerate() {
        for b in &list[n + 1..] {
            for (i, ra) in a.triggers.iter().enumerate() {
                for (j, rb) in b.triggers.iter().enumerate() {
                    if !can_share_an_event(ra, rb) {
                        continue;
                    }
                    let (ordered, winner) = match (ra.precedence(), rb.precedence()) {
                        (Some(pa), Some(pb)) if pa.also || pb.also => continue,
                        (Some(pa), Some(pb)) => match pa.rank().cmp(&pb.rank()) {
                            std::cmp::Ordering::Equal => (false, None),
                            std::cmp::Ordering::Greater => (true, Some(a.name.clone())),
                            std::cmp::Ordering::Less => (true, Some(b.name.clone())),
                        },
                        _ => (true, None),
                    };
                    out.push(Overlap {
                        kind: ra.kind_name(),
                        first: at(a, i),
                        second: at(b, j),
                        ordered,
                        winner,
                    });
                }
            }
        }
    }
    out
}

/// Webhooks whose different names share one token variable (`deploy-prod`,
/// `deploy_prod` and `DEPLOY-PROD` are all `STEWARD_HOOK_DEPLOY_PROD_TOKEN`): two hooks
/// that look apart in review would open with the same token. One error per such name.
pub fn shared_hook_tokens(agents: &BTreeMap<String, Arc<AgentConfig>>, texts: &Texts) -> Vec<Diagnostic> {
    let mut first: BTreeMap<String, (String, PathBuf, usize, usize)> = BTreeMap::new();
    let mut out = Vec::new();
    for agent in agents.values() {
        let (file, text) = texts
            .get(&agent.name)
            .map_or((agent.file.as_path(), ""), |(f, t)| (f.as_path(), t.as_str()));
        for (i, rule) in agent.triggers.iter().enumerate() {
            let TriggerSpec::Webhook(hook) = rule else {
                continue;
            };
            let var = super::settings::hook_token_var(&hook.name);
            let (line, col) = rule_position(text, &agent.triggers, i);
            match first.get(&var) {
                Some((name, ofile, oline, ocol)) if *name != hook.name => out.push(Diagnostic::new(
                    file,
                    line,
                    col,
                    format!(
                        "webhook '{}' and webhook '{name}' ({}:{oline}:{ocol}) would share one token, {var}; \
                         give one a name that differs in more than case and '-'/'_'",
                        hook.name,
                        ofile.display()
                    ),
                )),
                Some(_) => {}
                None => {
                    first.insert(var, (hook.name.clone(), file.to_path_buf(), line, col));
                }
            }
        }
    }
    out
}

/// The config errors: Slack overlaps precedence cannot order, each pointing at the
/// first rule and naming the second's file, line and column.
pub fn unordered(agents: &BTreeMap<String, Arc<AgentConfig>>, texts: &Texts) -> Vec<Diagnostic> {
    overlaps(agents, texts)
        .into_iter()
        .filter(|o| !o.ordered)
        .map(|o| {
            let (agent, file, line, col) = &o.first;
            let (other, ofile, oline, ocol) = &o.second;
            Diagnostic::new(
                file,
                *line,
                *col,
                format!(
                    "agent '{agent}' and agent '{other}' ({}:{oline}:{ocol}) can both answer the same Slack \
                     message with equal specificity and priority; name the channels, add a 'when:' filter, \
                     give one a higher 'priority:', or mark one 'also: true'",
                    ofile.display()
                ),
            )
        })
        .collect()
}
