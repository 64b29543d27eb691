//! A run's answer laid out as Slack messages: mrkdwn `section` blocks within Slack's
//! limits, then a `context` block naming the prompt, the run and who asked.
//!
//! Limits (Slack's documentation): a section's text holds at most 3,000 characters,
//! a message at most 50 blocks. An answer up to [`MESSAGE_CHARS`] goes in one message;
//! a longer one is attached as a Markdown snippet with its opening in the message, and
//! split over several messages only when the snippet cannot be uploaded.

use serde_json::Value;
use slack_morphism::blocks::{
    SlackActionBlockElement, SlackActionsBlock, SlackBlock, SlackBlockButtonElement, SlackBlockButtonStyle,
    SlackBlockFeedbackButtonsElement, SlackBlockId, SlackBlockMarkDownText, SlackBlockPlainText,
    SlackBlockPlainTextOnly, SlackBlockText, SlackContextActionsBlock, SlackContextBlock,
    SlackContextBlockElement, SlackFeedbackButtonItem, SlackSectionBlock,
};
use slack_morphism::{SlackActionId, SlackMessageContent, SlackMessageMetadata};

use super::mrkdwn;

/// A `section` block of mrkdwn.
fn section(text: impl Into<String>) -> SlackBlock {
    let text = SlackBlockText::MarkDown(SlackBlockMarkDownText::new(text.into()));
    SlackBlock::Section(SlackSectionBlock::new().with_text(text))
}

/// A `context` block of one mrkdwn element (a reply's footer).
pub fn context_block(text: impl Into<String>) -> SlackBlock {
    let element = SlackContextBlockElement::MarkDown(SlackBlockMarkDownText::new(text.into()));
    SlackBlock::Context(SlackContextBlock::new(vec![element]))
}

/// A button sending `action_id` with `value`.
fn button(
    action_id: &str,
    label: &str,
    value: &str,
    style: Option<SlackBlockButtonStyle>,
) -> SlackActionBlockElement {
    let text = SlackBlockPlainText::new(label.to_string()).with_emoji(true);
    let mut b = SlackBlockButtonElement::new(text.into())
        .with_action_id(SlackActionId(action_id.to_string()))
        .with_value(value.to_string());
    b.style = style;
    SlackActionBlockElement::Button(b)
}

fn actions(block_id: &str, elements: Vec<SlackActionBlockElement>) -> SlackBlock {
    SlackBlock::Actions(SlackActionsBlock::new(elements).with_block_id(SlackBlockId(block_id.to_string())))
}

/// A message: `text` (what notifications and screen readers show) and its blocks.
fn content(text: impl Into<String>, blocks: Vec<SlackBlock>) -> SlackMessageContent {
    SlackMessageContent::new()
        .with_text(text.into())
        .with_blocks(blocks)
}

/// Characters of a `section` block's text.
pub const SECTION_CHARS: usize = 3_000;
/// The most answer text one message carries (Slack caps a message's `markdown`
/// blocks at 12,000 characters in all; past this a thread is hard to read anyway).
pub const MESSAGE_CHARS: usize = 12_000;
/// Characters of the opening shown with an attached snippet.
pub const SUMMARY_CHARS: usize = 600;

/// The answer's layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Messages to post in order.
    Messages(Vec<SlackMessageContent>),
    /// One message (the opening) with the whole answer attached as `answer.md`; the
    /// messages to post instead if the upload fails.
    Snippet {
        message: Box<SlackMessageContent>,
        content: String,
        fallback: Vec<SlackMessageContent>,
    },
}

/// Lays out `markdown` (the model's answer) with `footer` (mrkdwn, already escaped) in
/// a context block under the last message.
pub fn layout(markdown: &str, footer: Option<&str>) -> Layout {
    let text = mrkdwn::defuse_broadcasts(&mrkdwn::to_mrkdwn(markdown.trim())).into_owned();
    let chars = text.chars().count();
    let messages = |text: &str| -> Vec<SlackMessageContent> {
        let parts = split(text, MESSAGE_CHARS);
        let last = parts.len().saturating_sub(1);
        parts
            .iter()
            .enumerate()
            .map(|(n, part)| message(part, if n == last { footer } else { None }))
            .collect()
    };
    if chars <= MESSAGE_CHARS {
        return Layout::Messages(messages(&text));
    }
    let opening = split(&text, SUMMARY_CHARS).into_iter().next().unwrap_or_default();
    let note = format!(
        "{opening}\n\n_The full answer ({} characters) is attached as a file._",
        markdown.chars().count()
    );
    Layout::Snippet {
        message: Box::new(message(&note, footer)),
        content: markdown.to_string(),
        fallback: messages(&text),
    }
}

/// One message: section blocks of at most [`SECTION_CHARS`] and the footer.
fn message(text: &str, footer: Option<&str>) -> SlackMessageContent {
    let mut blocks: Vec<SlackBlock> = split(text, SECTION_CHARS).into_iter().map(section).collect();
    if let Some(footer) = footer {
        blocks.push(context_block(footer));
    }
    let fallback = split(text, SECTION_CHARS).into_iter().next().unwrap_or_default();
    content(fallback, blocks)
}

/// Splits mrkdwn into parts of at most `limit` characters: at a blank line if one is
/// in the second half of the part, else at a line end, else at a space, else anywhere
/// (on a character boundary). A code block cut in two is closed and reopened, so each
/// part renders on its own.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    // Room for the ``` a cut code block needs at each end.
    let room = limit.saturating_sub(8).max(1);
    let mut parts = Vec::new();
    let mut rest = text.trim_end();
    let mut reopen = false;
    while !rest.is_empty() {
        let mut part = String::new();
        if reopen {
            part.push_str("```\n");
        }
        let budget = room.saturating_sub(part.len()).max(1);
        let cut = if rest.chars().count() <= budget {
            rest.len()
        } else {
            cut_point(rest, budget)
        };
        let (head, tail) = rest.split_at(cut);
        part.push_str(head.trim_end());
        // Odd number of fences so far in this part: the part ends inside code.
        let open = (if reopen { 1 } else { 0 } + head.matches("```").count()) % 2 == 1;
        if open && !tail.trim().is_empty() {
            part.push_str("\n```");
        }
        reopen = open;
        if !part.trim().is_empty() && part != "```\n" {
            parts.push(part);
        }
        rest = tail.trim_start_matches('\n');
    }
    parts
}

/// Byte offset to cut `text` at so the head holds at most `budget` characters.
fn cut_point(text: &str, budget: usize) -> usize {
    let max = text.char_indices().nth(budget).map_or(text.len(), |(i, _)| i);
    let head = &text[..max];
    let half = max / 2;
    if let Some(i) = head.rfind("\n\n").filter(|i| *i >= half) {
        return i + 1;
    }
    if let Some(i) = head.rfind('\n').filter(|i| *i > 0) {
        return i + 1;
    }
    if let Some(i) = head.rfind(' ').filter(|i| *i > 0) {
        return i + 1;
    }
    max
}

/// The footer of a reply: links to the prompt and to the run, and who triggered it,
/// joined with a middle dot. `None` when there is nothing to show.
pub fn footer(prompt: Option<&str>, run: Option<(&str, &str)>, actor: Option<&str>) -> Option<String> {
    let mut items = Vec::new();
    if let Some(url) = prompt {
        items.push(format!("<{url}|Prompt>"));
    }
    if let Some((url, label)) = run {
        items.push(format!("<{url}|{}>", mrkdwn::escape(label)));
    }
    if let Some(actor) = actor {
        items.push(format!("Asked by {actor}"));
    }
    (!items.is_empty()).then(|| items.join("  ·  "))
}

/// The metadata of a reply steward posts: later runs of the thread know their own turns
/// by its event type, retries and crash recovery a post by its key.
pub fn reply_metadata(idempotency_key: String) -> SlackMessageMetadata {
    SlackMessageMetadata {
        event_type: "steward_reply".into(),
        event_payload: Some([("idempotency_key".to_string(), idempotency_key)].into()),
    }
}

/// The `action_id` of the feedback buttons under an answer.
pub const FEEDBACK_ACTION: &str = "steward_feedback";

/// Adds Slack's feedback buttons (👍 / 👎, a `context_actions` block with
/// `feedback_buttons`) for run `run_id` under the message `msg` (its last block). Their
/// values carry the run: `up:<run>` and `down:<run>`.
pub fn with_feedback(mut msg: SlackMessageContent, run_id: &str) -> SlackMessageContent {
    let item = |label: &str, value: String| SlackFeedbackButtonItem {
        text: SlackBlockPlainTextOnly::from(label.to_string()),
        value,
        accessibility_label: None,
    };
    let buttons = SlackBlockFeedbackButtonsElement {
        action_id: Some(SlackActionId(FEEDBACK_ACTION.to_string())),
        positive_button: item("Good answer", format!("up:{run_id}")),
        negative_button: item("Bad answer", format!("down:{run_id}")),
    };
    let block = SlackContextActionsBlock {
        block_id: Some(SlackBlockId(FEEDBACK_ACTION.to_string())),
        elements: vec![buttons.into()],
    };
    msg.blocks.get_or_insert_with(Vec::new).push(block.into());
    msg
}

/// The `action_id` of the "Get help from a person" button; its value is `esc:<run>`.
pub const ESCALATE_ACTION: &str = "steward_escalate";
/// The `action_id` of the "Resolved" button on a call for help; its value is
/// `resolve:<run>`.
pub const RESOLVE_ACTION: &str = "steward_resolve";

/// Adds the "Get help from a person" button (labelled `label`) for run `run_id`.
pub fn with_escalation(mut msg: SlackMessageContent, run_id: &str, label: &str) -> SlackMessageContent {
    let block = actions(
        ESCALATE_ACTION,
        vec![button(ESCALATE_ACTION, label, &format!("esc:{run_id}"), None)],
    );
    msg.blocks.get_or_insert_with(Vec::new).push(block);
    msg
}

/// The words of a call for help: who asked, whom it calls (`<@U…>`, `<!subteam^S…>`),
/// and where the conversation is (a link when posted elsewhere).
fn call_text(asker: &str, to: &[String], thread_link: Option<&str>) -> String {
    let mention = |id: &String| {
        if id.starts_with('S') {
            format!("<!subteam^{id}>")
        } else {
            format!("<@{id}>")
        }
    };
    let owners: Vec<String> = to.iter().map(mention).collect();
    let mut text = format!("<@{asker}> asked for a person: {}", owners.join(" "));
    if let Some(link) = thread_link {
        text.push_str(&format!(" (<{link}|the conversation>)"));
    }
    text
}

/// The call for help ([`call_text`]) with a "Resolved" button.
pub fn escalation_call(
    asker: &str,
    to: &[String],
    thread_link: Option<&str>,
    run_id: &str,
) -> SlackMessageContent {
    let text = call_text(asker, to, thread_link);
    let blocks = vec![
        SlackBlock::Section(
            SlackSectionBlock::new().with_text(SlackBlockMarkDownText::new(text.clone()).into()),
        ),
        actions(
            RESOLVE_ACTION,
            vec![button(
                RESOLVE_ACTION,
                "Resolved",
                &format!("resolve:{run_id}"),
                Some(SlackBlockButtonStyle::Primary),
            )],
        ),
    ];
    content(text, blocks)
}

/// The call for help once resolved: who asked and whom it called, then who resolved it,
/// in place of the button.
pub fn escalation_resolved(asker: &str, to: &[String], by: &str) -> SlackMessageContent {
    let text = format!(
        "{}\n:white_check_mark: Resolved by <@{by}>.",
        call_text(asker, to, None)
    );
    let blocks = vec![SlackBlock::Section(
        SlackSectionBlock::new().with_text(SlackBlockMarkDownText::new(text.clone()).into()),
    )];
    content(text, blocks)
}

/// The modal a 👎 opens: what went wrong, in a few words. Its `private_metadata` is
/// the run id; the answer comes back as a `view_submission` with
/// [`FEEDBACK_COMMENT`] as its callback id.
pub fn feedback_modal(run_id: &str) -> Value {
    serde_json::json!({
        "type": "modal",
        "callback_id": FEEDBACK_COMMENT,
        "private_metadata": run_id,
        "title": {"type": "plain_text", "text": "Feedback"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "blocks": [{
            "type": "input", "block_id": "comment", "optional": true,
            "label": {"type": "plain_text", "text": "What went wrong?"},
            "element": {"type": "plain_text_input", "action_id": "text", "multiline": true, "max_length": 2000}
        }]
    })
}

/// The callback id of the feedback modal.
pub const FEEDBACK_COMMENT: &str = "steward_feedback_comment";

/// What an approval request shows (see [`approval_request`]).
pub struct Ask<'a> {
    pub approval: &'a str,
    pub run_id: &'a str,
    pub agent: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub reversible: bool,
    pub requester: Option<&'a str>,
    pub approvers: &'a [String],
    pub timeout: &'a str,
    pub run_link: Option<&'a str>,
    /// Why this call needs a decision beyond the agent's config (private content on
    /// its way out of its conversation), shown above the arguments.
    pub note: Option<&'a str>,
}

/// Argument names that say where a call acts, shown first.
const DESTINATION_KEYS: &[&str] = &[
    "channel",
    "channel_id",
    "user",
    "users",
    "to",
    "email",
    "project",
    "project_key",
    "issue",
    "issue_key",
    "key",
    "page_id",
    "parent",
    "parent_id",
    "database_id",
    "repo",
    "repository",
    "owner",
    "url",
    "method",
    "path",
    "service",
    "environment",
    "title",
    "summary",
];

/// Characters of one argument shown before it is folded.
const FOLD_CHARS: usize = 700;

/// Argument sections at most in one request (Slack allows 50 blocks).
const MAX_ARGUMENT_BLOCKS: usize = 40;

/// `text` cut at [`FOLD_CHARS`] with an explicit count of what was left out.
fn folded(text: &str) -> (String, bool) {
    let total = text.chars().count();
    if total <= FOLD_CHARS {
        return (text.to_string(), false);
    }
    let head: String = text.chars().take(FOLD_CHARS).collect();
    (format!("{head}\n… {} more characters", total - FOLD_CHARS), true)
}

/// Every argument of a call, destination fields first, one section each; long values
/// folded. The flag says whether anything was folded or left out.
///
/// An approver reads these to decide: a value that closed its code block (three
/// backticks) could show a line of its own making as if it were another argument.
fn argument_sections(arguments: &str) -> (Vec<SlackBlock>, bool) {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) else {
        let (text, cut) = folded(&mrkdwn::escape(arguments));
        return (vec![section(format!("```\n{}\n```", in_code_block(&text)))], cut);
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| {
        (
            DESTINATION_KEYS.iter().position(|d| d == k).unwrap_or(usize::MAX),
            k.as_str(),
        )
    });
    let mut any_cut = false;
    let mut blocks = Vec::new();
    for key in keys.iter().take(MAX_ARGUMENT_BLOCKS) {
        let value = match &map[key.as_str()] {
            Value::String(s) => s.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        // Escaped first, then folded: the fold bounds what Slack receives (an escaped
        // `&` is five characters).
        let (text, cut) = folded(&mrkdwn::escape(&value));
        any_cut |= cut;
        // A name with markup or a line break of its own could pass for another argument.
        let name: String = key
            .chars()
            .take(100)
            // Letters, digits and a few marks only: no markup, line or paragraph
            // separator, or direction control of the key's own.
            .map(|c| {
                if c.is_alphanumeric() || matches!(c, '-' | '.' | ' ') {
                    c
                } else {
                    ' '
                }
            })
            .collect();
        blocks.push(section(format!(
            "*{}*\n```\n{}\n```",
            mrkdwn::escape(&name),
            in_code_block(&text)
        )));
    }
    if keys.len() > MAX_ARGUMENT_BLOCKS {
        any_cut = true;
        blocks.push(section(format!(
            "… and {} more arguments",
            keys.len() - MAX_ARGUMENT_BLOCKS
        )));
    }
    (blocks, any_cut)
}

/// The `value` both buttons carry: which request and which run, checked on a click.
pub fn approval_value(approval: &str, run_id: &str) -> String {
    format!("{approval}:{run_id}")
}

/// The Block Kit request: what the run wants to do, readably, with Approve and Deny.
pub fn approval_request(ask: &Ask<'_>) -> SlackMessageContent {
    let (arguments, cut) = argument_sections(ask.arguments);
    let undo = if ask.reversible {
        ""
    } else {
        " This cannot be undone."
    };
    let headline = format!(
        "*{}* wants to run `{}`.{undo} Approve?",
        mrkdwn::escape(ask.agent),
        mrkdwn::escape(ask.tool)
    );
    let mut who: Vec<String> = ask.requester.iter().map(|u| format!("<@{u}>")).collect();
    who.extend(ask.approvers.iter().map(|u| format!("<@{u}>")));
    let mut context_line = format!(
        "Who may decide: {}",
        if who.is_empty() {
            "the approvers".into()
        } else {
            who.join(", ")
        }
    );
    context_line.push_str(&format!("  ·  no decision in {} counts as Deny", ask.timeout));
    match (ask.run_link, cut) {
        (Some(link), true) => context_line.push_str(&format!("  ·  <{link}|the whole call, in the run>")),
        (Some(link), false) => context_line.push_str(&format!("  ·  <{link}|Run>")),
        (None, true) => context_line.push_str(&format!(
            "  ·  the whole call: `steward runs show {}`",
            ask.run_id
        )),
        (None, false) => {}
    }
    let value = approval_value(ask.approval, ask.run_id);
    let mut blocks = vec![section(headline)];
    if let Some(note) = ask.note {
        // Written by steward, with anything a model chose already escaped.
        blocks.push(section(format!(":lock: {note}")));
    }
    blocks.extend(arguments);
    blocks.extend([
        context_block(context_line),
        actions(
            "steward_approval",
            vec![
                button(
                    "steward_approve",
                    "Approve",
                    &value,
                    Some(SlackBlockButtonStyle::Primary),
                ),
                button(
                    "steward_deny",
                    "Deny",
                    &value,
                    Some(SlackBlockButtonStyle::Danger),
                ),
            ],
        ),
    ]);
    content(
        format!("{} wants to run {}: approve or deny", ask.agent, ask.tool),
        blocks,
    )
}

/// The request once decided: the same headline, the outcome instead of the buttons.
pub fn approval_decided(agent: &str, tool: &str, outcome: &str) -> SlackMessageContent {
    let text = format!(
        "*{}* asked to run `{}`. {outcome}",
        mrkdwn::escape(agent),
        mrkdwn::escape(tool)
    );
    content(text.clone(), vec![section(text)])
}

/// A message as JSON, for tests and logs.
pub fn to_json(content: &SlackMessageContent) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Null)
}

/// `text` with a zero-width space between any two backticks in a row, so it cannot
/// close the code block it is shown in.
fn in_code_block(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut previous = None;
    for c in text.chars() {
        if c == '`' && previous == Some('`') {
            out.push('\u{200B}');
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_cannot_close_its_code_block_or_pass_for_another() {
        let forged =
            r#"{"url": "https://evil.example/x\n```\n*url*\n```\nhttps://intranet.corp/safe", "a*\n*b": 1}"#;
        let (blocks, _) = argument_sections(forged);
        let texts: Vec<String> = blocks
            .iter()
            .map(|b| {
                serde_json::to_value(b).unwrap()["text"]["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        for text in &texts {
            // Each section: a bold name, then one code block that holds the whole value.
            assert_eq!(text.matches("```").count(), 2, "{text}");
            assert!(text.ends_with("```"), "{text}");
        }
        // A name's own markup and line break are gone.
        assert!(texts.iter().any(|t| t.starts_with("*a   b*\n```")), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("intranet.corp/safe")));
        assert_eq!(in_code_block("a```b``"), "a`\u{200B}`\u{200B}`b`\u{200B}`");
    }

    #[test]
    fn a_short_answer_is_one_message_with_its_footer() {
        let foot = footer(
            Some("https://git.example.com/prompts/helpdesk.md"),
            Some(("https://steward.example.com/runs/0195", "Run 0195")),
            Some("<@U1>"),
        );
        let Layout::Messages(msgs) = layout("**Done.** See [the doc](https://d.io/a_b).", foot.as_deref())
        else {
            panic!("one message expected")
        };
        let msgs: Vec<Value> = msgs.iter().map(to_json).collect();
        assert_eq!(msgs.len(), 1);
        let blocks = msgs[0]["blocks"].as_array().unwrap();
        assert_eq!(
            blocks[0]["text"]["text"],
            "*Done.* See <https://d.io/a_b|the doc>."
        );
        assert_eq!(
            blocks[1]["elements"][0]["text"],
            "<https://git.example.com/prompts/helpdesk.md|Prompt>  ·  <https://steward.example.com/runs/0195|Run 0195>  ·  Asked by <@U1>"
        );
        assert_eq!(msgs[0]["text"], "*Done.* See <https://d.io/a_b|the doc>.");
    }

    #[test]
    fn sections_stay_under_slacks_limit() {
        let para = "word ".repeat(200);
        let md = [para.trim(); 8].join("\n\n");
        let Layout::Messages(msgs) = layout(&md, None) else {
            panic!()
        };
        let msgs: Vec<Value> = msgs.iter().map(to_json).collect();
        assert_eq!(msgs.len(), 1);
        let blocks = msgs[0]["blocks"].as_array().unwrap();
        assert!(blocks.len() >= 3);
        for b in blocks {
            let n = b["text"]["text"].as_str().unwrap().chars().count();
            assert!(n <= SECTION_CHARS, "{n}");
        }
        // Nothing lost: the words add up.
        let words: usize = blocks
            .iter()
            .map(|b| b["text"]["text"].as_str().unwrap().split_whitespace().count())
            .sum();
        assert_eq!(words, 1600);
    }

    #[test]
    fn a_long_answer_is_attached_with_its_opening() {
        let md = format!("# Report\n\nFirst finding.\n\n{}", "detail line\n".repeat(2_000));
        let Layout::Snippet {
            message,
            content,
            fallback,
        } = layout(&md, Some("<@U1>"))
        else {
            panic!("snippet expected")
        };
        let (message, fallback) = (
            to_json(&message),
            fallback.iter().map(to_json).collect::<Vec<_>>(),
        );
        assert_eq!(content, md);
        let opening = message["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(opening.starts_with("*Report*\n\nFirst finding."), "{opening}");
        assert!(opening.contains("attached as a file"));
        assert!(opening.chars().count() < SUMMARY_CHARS + 100);
        assert!(fallback.len() >= 2);
        assert!(
            fallback
                .iter()
                .all(|m| m["blocks"].as_array().unwrap().len() <= 50)
        );
        // The footer goes under the last of the fallback messages only.
        let last = fallback.last().unwrap()["blocks"].as_array().unwrap();
        assert_eq!(last.last().unwrap()["type"], "context");
        assert!(
            fallback[0]["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["type"] == "section")
        );
    }

    #[test]
    fn a_code_block_cut_in_two_is_closed_and_reopened() {
        let code = (0..100)
            .map(|n| format!("let x{n} = {n};"))
            .collect::<Vec<_>>()
            .join("\n");
        let text = format!("Intro\n```\n{code}\n```\nOutro");
        let parts = split(&text, 600);
        assert!(parts.len() > 2);
        for p in &parts {
            assert!(p.chars().count() <= 600);
            assert_eq!(p.matches("```").count() % 2, 0, "unbalanced part:\n{p}");
        }
        assert!(parts.last().unwrap().ends_with("Outro"));
        let joined: String = parts.concat();
        assert!(joined.contains("let x0 = 0;") && joined.contains("let x99 = 99;"));
    }

    #[test]
    fn a_word_longer_than_the_limit_is_cut_on_a_char_boundary() {
        let parts = split(&"é".repeat(25), 10);
        assert!(parts.iter().all(|p| p.chars().count() <= 10));
        assert_eq!(parts.concat(), "é".repeat(25));
    }
}
