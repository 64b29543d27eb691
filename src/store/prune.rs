//! Which ended runs a store deletes for `STEWARD_RUN_RETENTION`, and in what order.
//!
//! A run is deleted with its whole tree: a top-level run whose subagent runs (at any
//! depth) have all ended before the cut-off too. Children go before their parents (a
//! subagent run names its parent), and each run's steps, files, scores, approvals and
//! escalation go before it.

use super::{ENDED, PRUNE_BATCH};

/// The tables that hold a run's own rows, by `run_id`.
pub(super) const DEPENDENTS: [&str; 5] = [
    "run_events",
    "run_files",
    "run_scores",
    "approvals",
    "escalations",
];

/// The oldest top-level runs ended before the cut-off (`placeholder`, a timestamp),
/// with every run under them: `id, root, depth, status, finished_at`.
pub(super) fn trees_sql(placeholder: &str) -> String {
    format!(
        "WITH RECURSIVE tree(id, root, depth, status, finished_at) AS ( \
           SELECT id, id, 0, status, finished_at FROM ( \
             SELECT id, status, finished_at FROM runs WHERE parent_id IS NULL AND status IN ({ENDED}) \
             AND finished_at IS NOT NULL AND finished_at < {placeholder} ORDER BY finished_at LIMIT {PRUNE_BATCH} \
           ) AS oldest \
           UNION ALL \
           SELECT r.id, t.root, t.depth + 1, r.status, r.finished_at FROM runs r JOIN tree t ON r.parent_id = t.id \
         ) SELECT id, root, depth, status, finished_at FROM tree"
    )
}

/// One run of a tree [`trees_sql`] found.
pub(super) struct Member {
    pub id: String,
    pub root: String,
    pub depth: i64,
    pub status: String,
    pub finished_at: Option<String>,
}

/// The runs to delete, deepest first: the members of every tree whose runs all ended
/// before `cut` (a stored timestamp, which sorts as text).
pub(super) fn deletable(mut members: Vec<Member>, cut: &str) -> Vec<String> {
    let ended = |m: &Member| {
        ENDED.contains(&format!("'{}'", m.status)) && m.finished_at.as_deref().is_some_and(|f| f < cut)
    };
    let kept: std::collections::HashSet<String> = members
        .iter()
        .filter(|m| !ended(m))
        .map(|m| m.root.clone())
        .collect();
    members.retain(|m| !kept.contains(&m.root));
    members.sort_by_key(|m| std::cmp::Reverse(m.depth));
    members.into_iter().map(|m| m.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, root: &str, depth: i64, status: &str, finished_at: Option<&str>) -> Member {
        Member {
            id: id.into(),
            root: root.into(),
            depth,
            status: status.into(),
            finished_at: finished_at.map(str::to_string),
        }
    }

    #[test]
    fn a_tree_goes_whole_children_first_or_not_at_all() {
        let cut = "2026-06-01T00:00:00.000Z";
        let old = Some("2026-01-01T00:00:00.000Z");
        let members = vec![
            member("a", "a", 0, "succeeded", old),
            member("a1", "a", 1, "succeeded", old),
            member("a11", "a", 2, "failed", old),
            // A tree with a child still waiting stays whole.
            member("b", "b", 0, "succeeded", old),
            member("b1", "b", 1, "waiting", None),
            // A tree with a child ended after the cut-off stays whole.
            member("c", "c", 0, "interrupted", old),
            member("c1", "c", 1, "succeeded", Some("2026-07-01T00:00:00.000Z")),
        ];
        assert_eq!(deletable(members, cut), ["a11", "a1", "a"]);
    }
}
