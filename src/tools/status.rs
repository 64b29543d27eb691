//! What a run is doing while it calls a tool, in words people read in Slack's thinking
//! status ("Searching Jira…"). A tool may say its own ([`super::Tool::status`]); these
//! are the defaults by name.

/// The status line for a call of the tool `name`.
pub fn of(name: &str) -> String {
    let known = match name {
        "slack_read_thread" => "Reading the thread…",
        "slack_channel_history" => "Reading the channel…",
        "slack_user_info" | "slack_channel_info" => "Looking people and channels up…",
        "slack_post_message" => "Posting in Slack…",
        "slack_add_reaction" => "Reacting in Slack…",
        "jira_search" => "Searching Jira…",
        "jira_get_issue" | "jira_get_attachment" => "Reading Jira…",
        "jira_create_issue" => "Creating a Jira issue…",
        "jira_add_comment" => "Commenting in Jira…",
        "notion_query_database" => "Searching Notion…",
        "notion_get_page" | "notion_read_page" => "Reading Notion…",
        "notion_update_property" | "notion_add_comment" => "Updating Notion…",
        "github_pr_state" => "Checking GitHub…",
        "http_fetch" => "Fetching a web page…",
        "current_time" => "Checking the time…",
        "load_skills" | "load_subskill" => "Loading a skill…",
        "run_skill_script" => "Running a skill script…",
        "subagent" => "Asking a subagent…",
        n if n.starts_with("files_") || n.contains("file") => "Reading files…",
        _ => return format!("Running {}…", name.replace('_', " ")),
    };
    known.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_tools_read_as_actions_and_others_by_name() {
        assert_eq!(super::of("jira_search"), "Searching Jira…");
        assert_eq!(super::of("webhook_zapier"), "Running webhook zapier…");
    }
}
