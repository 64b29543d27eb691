//! Atlassian Document Format (Jira descriptions and comments) to plain text.

use serde_json::Value;

/// Text of a Jira rich-text field, which is a string (API v2, server) or an ADF
/// document (API v3, cloud webhooks).
pub fn field_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(_) => {
            let mut out = String::new();
            render(v, &mut out);
            out.trim_end().to_string()
        }
        _ => String::new(),
    }
}

fn render(node: &Value, out: &mut String) {
    let kind = node["type"].as_str().unwrap_or_default();
    match kind {
        "text" => out.push_str(node["text"].as_str().unwrap_or_default()),
        "hardBreak" => out.push('\n'),
        "mention" => out.push_str(node["attrs"]["text"].as_str().unwrap_or("@someone")),
        "emoji" => out.push_str(node["attrs"]["shortName"].as_str().unwrap_or_default()),
        "inlineCard" | "blockCard" => out.push_str(node["attrs"]["url"].as_str().unwrap_or_default()),
        _ => {
            let prefix = match kind {
                "listItem" => "- ",
                "heading" => "",
                _ => "",
            };
            out.push_str(prefix);
            if kind == "codeBlock" {
                out.push_str("```\n");
            }
            for child in node["content"].as_array().into_iter().flatten() {
                render(child, out);
            }
            if kind == "codeBlock" {
                out.push_str("\n```");
            }
            if matches!(
                kind,
                "paragraph" | "heading" | "codeBlock" | "blockquote" | "rule"
            ) && !out.ends_with('\n')
            {
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_documents_and_passes_strings() {
        let doc = json!({"version": 1, "type": "doc", "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": "Login fails for "}, {"type": "mention", "attrs": {"id": "1", "text": "@Ana"}}]},
            {"type": "bulletList", "content": [
                {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "since 9:00"}]}]}]},
            {"type": "codeBlock", "content": [{"type": "text", "text": "HTTP 500"}]}
        ]});
        assert_eq!(
            field_text(&doc),
            "Login fails for @Ana\n- since 9:00\n```\nHTTP 500\n```"
        );
        assert_eq!(field_text(&json!("plain")), "plain");
        assert_eq!(field_text(&Value::Null), "");
    }
}
