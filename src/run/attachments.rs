//! Files that came with a trigger (Slack files) fetched as the run starts, with a size
//! cap; what could not be fetched is explained to the model instead.

use serde_json::Value;

use super::TriggerEvent;
use super::reply::Outputs;
use crate::files::{NewFile, mime};

/// Downloads the files a trigger refers to: Slack files shared with the message, and the
/// files in a Notion page's `files` properties. Returns the files and one note per file
/// that was refused or failed.
pub async fn fetch(outputs: &Outputs, trigger: &TriggerEvent, cap: u64) -> (Vec<NewFile>, Vec<String>) {
    if let super::Origin::Notion {
        entity_id: Some(page),
        entity_type,
        ..
    } = &trigger.origin
        && entity_type.as_deref() != Some("comment")
    {
        return notion_files(outputs, page, cap).await;
    }
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let listed: Vec<Value> = trigger.payload["files"].as_array().cloned().unwrap_or_default();
    if trigger.source != "slack" || listed.is_empty() {
        return (files, notes);
    }
    let Some(client) = &outputs.slack else {
        notes.push(format!(
            "{} Slack file(s) were shared but SLACK_BOT_TOKEN is not set, so they were not loaded.",
            listed.len()
        ));
        return (files, notes);
    };
    for f in listed {
        let name = f["name"].as_str().unwrap_or("file").to_string();
        let size = f["size"].as_u64().unwrap_or(0);
        if size > cap {
            notes.push(format!(
                "file {name} ({size} bytes) was not loaded: it is over the {cap}-byte attachment cap."
            ));
            continue;
        }
        let Some(url) = f["url_private_download"].as_str() else {
            continue;
        };
        match client.download(&outputs.egress, url, cap).await {
            Ok(content) => {
                let declared = f["mimetype"]
                    .as_str()
                    .filter(|m| !m.is_empty() && *m != "application/octet-stream");
                let mime = declared.unwrap_or_else(|| mime::from_name(&name)).to_string();
                files.push(NewFile { name, mime, content });
            }
            Err(e) => notes.push(format!("file {name} could not be loaded: {e}")),
        }
    }
    (files, notes)
}

/// Files attached to a Notion page through `files` properties.
async fn notion_files(outputs: &Outputs, page: &str, cap: u64) -> (Vec<NewFile>, Vec<String>) {
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let Some(client) = &outputs.notion else {
        return (files, notes);
    };
    let Ok(page) = client.get_page(page).await else {
        return (files, notes);
    };
    let listed: Vec<Value> = page["properties"]
        .as_object()
        .into_iter()
        .flat_map(|props| props.values())
        .filter(|p| p["type"] == "files")
        .flat_map(|p| p["files"].as_array().cloned().unwrap_or_default())
        .collect();
    for f in listed {
        let name = f["name"].as_str().unwrap_or("file").to_string();
        let Some(url) = f["file"]["url"].as_str().or(f["external"]["url"].as_str()) else {
            continue;
        };
        match client.download(&outputs.egress, url, cap).await {
            Ok(content) => files.push(NewFile {
                mime: mime::from_name(&name).to_string(),
                name,
                content,
            }),
            Err(e) => notes.push(format!("file {name} could not be loaded: {e}")),
        }
    }
    (files, notes)
}
