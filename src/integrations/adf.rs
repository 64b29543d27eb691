//! Markdown (as models write it) to Atlassian Document Format, for Jira descriptions and
//! comments: headings, paragraphs, bullet and numbered lists, fenced code blocks, and
//! bold, italic, inline code and link marks.

use serde_json::{Value, json};

/// Converts Markdown to an ADF document.
pub fn markdown_to_adf(md: &str) -> Value {
    let mut content: Vec<Value> = Vec::new();
    let mut lines = md.lines().peekable();
    let mut paragraph: Vec<String> = Vec::new();
    let flush = |paragraph: &mut Vec<String>, content: &mut Vec<Value>| {
        if !paragraph.is_empty() {
            content.push(json!({"type": "paragraph", "content": inline(&paragraph.join(" "))}));
            paragraph.clear();
        }
    };
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            flush(&mut paragraph, &mut content);
            let mut code = Vec::new();
            for l in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                code.push(l);
            }
            let mut block =
                json!({"type": "codeBlock", "content": [{"type": "text", "text": code.join("\n")}]});
            if !lang.trim().is_empty() {
                block["attrs"] = json!({"language": lang.trim()});
            }
            content.push(block);
        } else if trimmed.starts_with('#') {
            flush(&mut paragraph, &mut content);
            let level = trimmed.chars().take_while(|c| *c == '#').count().min(6);
            let text = trimmed[level..].trim();
            content.push(json!({"type": "heading", "attrs": {"level": level}, "content": inline(text)}));
        } else if let Some((ordered, _)) = list_item(trimmed) {
            flush(&mut paragraph, &mut content);
            let mut items = vec![list_item(trimmed).map(|(_, t)| t).unwrap_or_default()];
            while let Some(next) = lines.peek() {
                match list_item(next.trim_start()) {
                    Some((o, t)) if o == ordered => {
                        items.push(t);
                        lines.next();
                    }
                    _ => break,
                }
            }
            let kind = if ordered { "orderedList" } else { "bulletList" };
            let items: Vec<Value> = items
                .iter()
                .map(
                    |t| json!({"type": "listItem", "content": [{"type": "paragraph", "content": inline(t)}]}),
                )
                .collect();
            content.push(json!({"type": kind, "content": items}));
        } else if trimmed.is_empty() {
            flush(&mut paragraph, &mut content);
        } else {
            paragraph.push(trimmed.to_string());
        }
    }
    flush(&mut paragraph, &mut content);
    json!({"type": "doc", "version": 1, "content": content})
}

/// `(ordered, text)` for `- x`, `* x` or `1. x`.
fn list_item(line: &str) -> Option<(bool, String)> {
    if let Some(t) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
        return Some((false, t.to_string()));
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && line[digits..].starts_with(". ") {
        return Some((true, line[digits + 2..].to_string()));
    }
    None
}

/// Inline text with marks.
fn inline(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut plain = String::new();
    let push_plain = |plain: &mut String, out: &mut Vec<Value>| {
        if !plain.is_empty() {
            out.push(json!({"type": "text", "text": plain.clone()}));
            plain.clear();
        }
    };
    while !rest.is_empty() {
        let marked = [("**", "strong"), ("`", "code"), ("_", "em")]
            .iter()
            .find_map(|(delim, mark)| {
                let inner = rest.strip_prefix(delim)?;
                let end = inner.find(delim)?;
                (end > 0).then(|| {
                    (
                        delim.len() * 2 + end,
                        json!({"type": "text", "text": &inner[..end], "marks": [{"type": mark}]}),
                    )
                })
            });
        let link = || -> Option<(usize, Value)> {
            let inner = rest.strip_prefix('[')?;
            let close = inner.find("](")?;
            let url_end = inner[close + 2..].find(')')?;
            let label = &inner[..close];
            let href = &inner[close + 2..close + 2 + url_end];
            Some((
                close + 2 + url_end + 2,
                json!({"type": "text", "text": label, "marks": [{"type": "link", "attrs": {"href": href}}]}),
            ))
        };
        match marked.or_else(link) {
            Some((len, node)) => {
                push_plain(&mut plain, &mut out);
                out.push(node);
                rest = &rest[len..];
            }
            None => {
                let c = rest.chars().next().unwrap_or(' ');
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    push_plain(&mut plain, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_headings_lists_code_and_links() {
        let doc = markdown_to_adf(
            "## Problem\nLogin **fails** for _SSO_ users, see [thread](https://x.slack.com/p1).\n\n- since `9:00`\n- all regions\n\n1. rotate\n2. verify\n\n```rust\nfn main() {}\n```",
        );
        let c = doc["content"].as_array().unwrap();
        assert_eq!(
            c[0],
            json!({"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Problem"}]})
        );
        assert_eq!(
            c[1]["content"][1],
            json!({"type": "text", "text": "fails", "marks": [{"type": "strong"}]})
        );
        assert_eq!(
            c[1]["content"][3],
            json!({"type": "text", "text": "SSO", "marks": [{"type": "em"}]})
        );
        assert_eq!(
            c[1]["content"][5]["marks"][0],
            json!({"type": "link", "attrs": {"href": "https://x.slack.com/p1"}})
        );
        assert_eq!(c[2]["type"], "bulletList");
        assert_eq!(
            c[2]["content"][0]["content"][0]["content"][1],
            json!({"type": "text", "text": "9:00", "marks": [{"type": "code"}]})
        );
        assert_eq!(c[3]["type"], "orderedList");
        assert_eq!(c[3]["content"].as_array().unwrap().len(), 2);
        assert_eq!(
            c[4],
            json!({"type": "codeBlock", "attrs": {"language": "rust"}, "content": [{"type": "text", "text": "fn main() {}"}]})
        );
        assert_eq!(doc["version"], 1);
    }
}
