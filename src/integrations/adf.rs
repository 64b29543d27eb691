//! Markdown (as models write it) to Atlassian Document Format, for Jira descriptions and
//! comments. Parsed with pulldown-cmark (CommonMark): headings, paragraphs, nested bullet
//! and numbered lists, block quotes, rules, code blocks, and bold, italic, strike, inline
//! code and link marks.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use serde_json::{Map, Value, json};

/// Converts Markdown (CommonMark plus strikethrough) to an ADF document.
pub fn markdown_to_adf(md: &str) -> Value {
    let mut b = Builder {
        stack: vec![Node::new(json!({"type": "doc", "version": 1}))],
        marks: Vec::new(),
    };
    for event in Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH) {
        b.event(event);
    }
    while b.stack.len() > 1 {
        b.close();
    }
    b.stack.pop().map_or_else(
        || json!({"type": "doc", "version": 1, "content": []}),
        Node::finish,
    )
}

/// Most block nodes nested in one another. Deeper quotes and lists are flattened into
/// the block at this depth: a model's (or an injected prompt's) `>` repeated thousands of
/// times would otherwise make a document so deep that serializing or freeing it (both
/// recursive in serde_json) overflows a worker thread's stack and aborts the process.
pub const MAX_DEPTH: usize = 16;

/// An open ADF node and the children collected so far.
struct Node {
    node: Value,
    content: Vec<Value>,
    /// A paragraph opened for loose inline content (tight list items, quotes).
    implicit: bool,
    /// Opened past [`MAX_DEPTH`]: its children go to its parent, not into it.
    flat: bool,
}

impl Node {
    fn new(node: Value) -> Node {
        Node {
            node,
            content: Vec::new(),
            implicit: false,
            flat: false,
        }
    }

    fn kind(&self) -> &str {
        self.node["type"].as_str().unwrap_or_default()
    }

    fn finish(mut self) -> Value {
        if self.kind() == "codeBlock"
            && let Some(Value::String(text)) = self.content.last_mut().map(|t| &mut t["text"])
        {
            // The parser ends a code block's text with its closing newline.
            while text.ends_with('\n') {
                text.pop();
            }
        }
        self.content
            .retain(|c| c["type"] != "text" || c["text"].as_str().is_some_and(|t| !t.is_empty()));
        self.node["content"] = Value::Array(self.content);
        self.node
    }
}

struct Builder {
    stack: Vec<Node>,
    marks: Vec<Value>,
}

impl Builder {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            Event::Text(text) => self.text(&text, None),
            Event::Code(code) => self.text(&code, Some(json!({"type": "code"}))),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html, None),
            Event::SoftBreak => self.text(" ", None),
            Event::HardBreak => self.inline(json!({"type": "hardBreak"})),
            Event::Rule => self.block(Node::new(json!({"type": "rule"}))),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let node = match tag {
            Tag::Paragraph => json!({"type": "paragraph"}),
            Tag::Heading { level, .. } => json!({"type": "heading", "attrs": {"level": level as u8}}),
            Tag::BlockQuote(_) => json!({"type": "blockquote"}),
            Tag::CodeBlock(kind) => match kind {
                CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                    json!({"type": "codeBlock", "attrs": {"language": lang.trim()}})
                }
                _ => json!({"type": "codeBlock"}),
            },
            Tag::List(Some(_)) => json!({"type": "orderedList"}),
            Tag::List(None) => json!({"type": "bulletList"}),
            Tag::Item => json!({"type": "listItem"}),
            Tag::Emphasis => return self.marks.push(json!({"type": "em"})),
            Tag::Strong => return self.marks.push(json!({"type": "strong"})),
            Tag::Strikethrough => return self.marks.push(json!({"type": "strike"})),
            Tag::Link { dest_url, .. } => {
                return self
                    .marks
                    .push(json!({"type": "link", "attrs": {"href": dest_url.to_string()}}));
            }
            _ => return,
        };
        self.close_implicit();
        let mut node = Node::new(node);
        // Only containers flatten: a paragraph, heading or code block holds inline
        // content, one level, wherever it is.
        node.flat = self.stack.len() >= MAX_DEPTH
            && matches!(
                node.kind(),
                "blockquote" | "bulletList" | "orderedList" | "listItem"
            );
        self.stack.push(node);
    }

    fn end(&mut self, end: TagEnd) {
        match end {
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.marks.pop();
            }
            TagEnd::Paragraph
            | TagEnd::Heading(_)
            | TagEnd::BlockQuote(_)
            | TagEnd::CodeBlock
            | TagEnd::List(_)
            | TagEnd::Item => {
                self.close_implicit();
                self.close();
            }
            _ => {}
        }
    }

    /// Closes the innermost node into its parent.
    fn close(&mut self) {
        if self.stack.len() > 1
            && let Some(node) = self.stack.pop()
            && let Some(parent) = self.stack.last_mut()
        {
            if node.flat {
                // What a flattened block held is leaf blocks (every deeper container is
                // flat too); a list takes them as items of their own.
                // Quotes and list items take paragraphs, lists and code blocks: a heading
                // becomes a paragraph and a rule is left out.
                let in_list = !parent.flat && matches!(parent.kind(), "bulletList" | "orderedList");
                parent
                    .content
                    .extend(node.content.into_iter().filter_map(|mut child| {
                        match child["type"].as_str() {
                            Some("rule") => return None,
                            Some("heading") => {
                                child = json!({"type": "paragraph", "content": child["content"].take()});
                            }
                            _ => {}
                        }
                        Some(if in_list && child["type"] != "listItem" {
                            json!({"type": "listItem", "content": [child]})
                        } else {
                            child
                        })
                    }));
            } else {
                parent.content.push(node.finish());
            }
        }
    }

    fn close_implicit(&mut self) {
        if self.stack.last().is_some_and(|n| n.implicit) {
            self.close();
        }
    }

    fn block(&mut self, node: Node) {
        self.close_implicit();
        self.stack.push(node);
        self.close();
    }

    /// Adds an inline node, opening a paragraph where a block is expected.
    fn inline(&mut self, node: Value) {
        let holds_inline = self
            .stack
            .last()
            .is_some_and(|n| matches!(n.kind(), "paragraph" | "heading" | "codeBlock"));
        if !holds_inline {
            let mut p = Node::new(json!({"type": "paragraph"}));
            p.implicit = true;
            self.stack.push(p);
        }
        if let Some(top) = self.stack.last_mut() {
            top.content.push(node);
        }
    }

    fn text(&mut self, text: &str, extra: Option<Value>) {
        if text.is_empty() {
            return;
        }
        let in_code = self.stack.last().is_some_and(|n| n.kind() == "codeBlock");
        let mut node = Map::new();
        node.insert("type".into(), json!("text"));
        node.insert("text".into(), json!(text));
        let marks: Vec<Value> = if in_code {
            Vec::new()
        } else {
            // One mark of each type (ADF allows no more), the innermost: `***a***` nests
            // emphasis, and thousands of nested marks would be copied onto every text.
            let mut seen = Vec::new();
            let mut marks: Vec<Value> = extra
                .into_iter()
                .chain(self.marks.iter().rev().cloned())
                .filter(|m| {
                    let kind = m["type"].clone();
                    let new = !seen.contains(&kind);
                    if new {
                        seen.push(kind);
                    }
                    new
                })
                .collect();
            marks.reverse();
            marks
        };
        if !marks.is_empty() {
            node.insert("marks".into(), Value::Array(marks));
        }
        // Adjacent plain text (a soft break between lines) merges into one node.
        if let Some(Value::Object(last)) = self.stack.last_mut().and_then(|n| n.content.last_mut())
            && last.get("type") == Some(&json!("text"))
            && last.get("marks") == node.get("marks")
            && let (Some(Value::String(prev)), Some(Value::String(more))) =
                (last.get_mut("text"), node.get("text"))
        {
            prev.push_str(more);
            return;
        }
        self.inline(Value::Object(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_lists_quotes_and_strikethrough() {
        let doc = markdown_to_adf("> quoted *text*\n\n- a\n  - b ~~old~~\n\n---\nA & B の日本語");
        let c = doc["content"].as_array().unwrap();
        assert_eq!(c[0]["type"], "blockquote");
        assert_eq!(c[0]["content"][0]["type"], "paragraph");
        assert_eq!(c[1]["type"], "bulletList");
        let inner = &c[1]["content"][0]["content"][1];
        assert_eq!(inner["type"], "bulletList");
        assert_eq!(
            inner["content"][0]["content"][0]["content"][1],
            json!({"type": "text", "text": "old", "marks": [{"type": "strike"}]})
        );
        assert_eq!(c[2]["type"], "rule");
        assert_eq!(c[3]["content"][0]["text"], "A & B の日本語");
    }

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

    fn depth(v: &Value) -> usize {
        // Iterative, as the point is a value too deep to recurse over.
        let mut deepest = 0;
        let mut todo = vec![(v, 1)];
        while let Some((v, d)) = todo.pop() {
            deepest = deepest.max(d);
            if let Some(items) = v["content"].as_array() {
                todo.extend(items.iter().map(|c| (c, d + 1)));
            }
        }
        deepest
    }

    /// What ADF's schema allows where: a list holds items only, inline text sits in
    /// paragraphs, headings and code blocks only.
    fn assert_valid(doc: &Value) {
        let mut todo = vec![doc];
        while let Some(node) = todo.pop() {
            let kind = node["type"].as_str().unwrap_or_default();
            for child in node["content"].as_array().into_iter().flatten() {
                let child_kind = child["type"].as_str().unwrap_or_default();
                match kind {
                    "bulletList" | "orderedList" => {
                        assert_eq!(child_kind, "listItem", "{kind} holds {child}")
                    }
                    // No heading or rule from a flattened block (a quote in a quote is the
                    // converter's own, as Markdown wrote it).
                    "listItem" | "blockquote" => assert!(
                        matches!(
                            child_kind,
                            "paragraph" | "bulletList" | "orderedList" | "codeBlock" | "blockquote"
                        ),
                        "{kind} holds {child_kind}"
                    ),
                    "paragraph" | "heading" | "codeBlock" => {}
                    _ => assert!(
                        !matches!(child_kind, "text" | "hardBreak" | "listItem"),
                        "{kind} holds {child_kind}"
                    ),
                }
                todo.push(child);
            }
        }
    }

    #[test]
    fn deep_nesting_is_flattened_and_its_text_kept() {
        for md in [
            format!("{}deep", ">".repeat(100_000)),
            format!("{}deep", "- ".repeat(50_000)),
            format!("{}deep", "> - ".repeat(20_000)),
            format!("{}# title\n\n---\n\ndeep", "- ".repeat(40)),
            format!("{}# title\n\n---\n\ndeep", "> ".repeat(40)),
        ] {
            let doc = markdown_to_adf(&md);
            assert!(depth(&doc) <= MAX_DEPTH + 3, "depth {}", depth(&doc));
            assert_valid(&doc);
            // Serializing and dropping it on this (2 MiB) test thread does not overflow.
            assert!(serde_json::to_string(&doc).unwrap().contains("deep"));
        }
        // Shallow nesting keeps its shape.
        let doc = markdown_to_adf("> > > three");
        assert_eq!(
            doc["content"][0]["content"][0]["content"][0]["type"],
            "blockquote"
        );
    }

    #[test]
    fn nested_marks_are_one_of_each_type() {
        let doc = markdown_to_adf(&format!("{}x{}", "**a ".repeat(40), "**".repeat(40)));
        // Forty nested strong emphases are one `strong`: the texts merge into one.
        assert_eq!(
            doc["content"][0]["content"],
            json!([{"type": "text", "text": format!("{}x", "a ".repeat(40)), "marks": [{"type": "strong"}]}])
        );
    }
}
