//! What enters the context: the opening message (trigger text, preloaded attachments,
//! the file list) and tool results, with anything over the file threshold stored as a
//! file and only a preview kept inline.

use base64::Engine;

use crate::config::AgentConfig;
use crate::files::extract::DocKind;
use crate::files::{FileMeta, FileSource, NewFile, ReadKind, RunFiles, mime};
use crate::provider::Message;
use crate::provider::types::Image;
use crate::store::StoreError;
use crate::tokens::{floor_char, quick_estimate};

use super::conversation::file_list;

/// Largest image sent as image content (Anthropic's per-image limit is 5 MB of base64).
pub const MAX_IMAGE_BYTES: u64 = 3_750_000;

/// Text over the agent's `file_threshold_tokens` becomes a file. Returns what goes
/// inline and, when the text went inline whole, its token count (so the caller need
/// not count it again).
pub async fn inline_or_file(
    files: &RunFiles,
    agent: &AgentConfig,
    text: String,
    name: &str,
    source: FileSource,
) -> Result<(String, Option<u64>), StoreError> {
    let threshold = agent.context.file_threshold_tokens;
    // A token is at least one byte, so text of at most `threshold` bytes is under the
    // threshold without encoding it (most tool outputs: no tokenizer on the turn path).
    if text.len() as u64 <= threshold {
        let estimate = quick_estimate(&text);
        return Ok((text, Some(estimate)));
    }
    let count = files.tokens().count(files.encoding(), &text);
    if count.tokens <= threshold {
        return Ok((text, Some(count.tokens)));
    }
    let preview_tokens = agent.context.file_preview_tokens;
    let preview = files
        .tokens()
        .prefix(files.encoding(), &text, preview_tokens)
        .to_string();
    let mime = mime::for_tool_output(&text);
    let ext = if mime == "application/json" { "json" } else { "txt" };
    let added = files
        .add(
            NewFile {
                name: format!("{name}.{ext}"),
                mime: mime.into(),
                content: text.into_bytes(),
            },
            source,
            None,
        )
        .await;
    let meta = match added {
        Ok(meta) => meta,
        // The run's files are full (checked as the file is added, so nothing races
        // it): the preview goes in, the rest is let go, and the model is told so
        // rather than the run failing.
        Err(StoreError::Full(why)) => {
            let shown = format!(
                "{}\n\n[steward: this is {} tokens, over the {threshold}-token limit; only its first {preview_tokens} tokens or fewer are shown above, and the rest was not kept: {why}.]",
                preview.trim_end(),
                count.tokens,
            );
            let estimate = quick_estimate(&shown);
            return Ok((shown, Some(estimate)));
        }
        Err(e) => return Err(e),
    };
    files
        .mark_read(&meta.id, ReadKind::Bytes(0, preview.len() as u64))
        .await?;
    let approx = if meta.tokens_estimated { "~" } else { "" };
    Ok((
        format!(
            "{}\n\n[steward: this is {approx}{} tokens, over the {threshold}-token limit, so only its first {preview_tokens} tokens or fewer are shown above. The whole text is file {} ({}, {}, {} bytes, {} lines). Search it with file_regex, or read more with file_read or peek_file.]",
            preview.trim_end(),
            meta.size_tokens,
            meta.id,
            meta.name,
            meta.mime,
            meta.size_bytes,
            meta.lines
        ),
        None,
    ))
}

/// The first user message: the trigger text (a file if large), the first
/// `preload_bytes` of each attachment (images as image content, documents extracted
/// first), and the file list.
pub async fn opening_message(
    files: &RunFiles,
    agent: &AgentConfig,
    trigger_text: String,
    attachments: &[FileMeta],
) -> Result<Message, StoreError> {
    let (mut text, _) =
        inline_or_file(files, agent, trigger_text, "trigger-message", FileSource::Message).await?;
    let mut images = Vec::new();
    let limit = agent.preload_bytes;
    for meta in attachments.iter().filter(|_| limit > 0) {
        let Ok((meta, content)) = files.get(&meta.id) else {
            continue;
        };
        if mime::is_image(&meta.mime) && meta.size_bytes <= MAX_IMAGE_BYTES {
            images.push(Image {
                mime: meta.mime.clone(),
                data_base64: base64::engine::general_purpose::STANDARD.encode(content.as_slice()),
            });
            files.mark_read(&meta.id, ReadKind::Whole).await?;
            text.push_str(&format!(
                "\n\n[steward: image {} ({}) is attached.]",
                meta.id, meta.name
            ));
            continue;
        }
        // Documents are extracted first; the extracted file is what gets preloaded.
        let target = match DocKind::detect(&meta.mime, &meta.name) {
            Some(kind) => match files.extractor().extract(kind, content).await {
                Ok(extracted) => {
                    let new = NewFile {
                        name: format!("{}.txt", meta.name),
                        mime: "text/plain".into(),
                        content: extracted.into_bytes(),
                    };
                    files.add(new, FileSource::Extracted, Some(&meta.id)).await?
                }
                Err(e) => {
                    text.push_str(&format!(
                        "\n\n[steward: could not extract {} ({}): {e}]",
                        meta.id, meta.name
                    ));
                    continue;
                }
            },
            None => meta,
        };
        if !target.text {
            continue;
        }
        let Ok((_, bytes)) = files.get(&target.id) else {
            continue;
        };
        let body = std::str::from_utf8(&bytes).unwrap_or_default();
        let head = floor_char(body, limit as usize);
        files
            .mark_read(&target.id, ReadKind::Bytes(0, head.len() as u64))
            .await?;
        let whole = head.len() == body.len();
        text.push_str(&format!(
            "\n\n[steward: {} {} ({} of {} bytes):]\n{head}{}",
            target.id,
            target.name,
            if whole {
                "in full"
            } else {
                "preloaded, first bytes"
            },
            body.len(),
            if whole { "" } else { "\n[...]" }
        ));
    }
    if !files.is_empty() {
        text.push_str("\n\n[steward]");
        text.push_str(&file_list(&files.list()));
    }
    Ok(Message::User {
        content: text,
        images,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long tool output that would take the run's files past their cap is shown as
    /// its preview with the reason, and the run goes on; one that fits becomes a file.
    #[tokio::test]
    async fn an_output_past_the_files_cap_is_a_preview_with_the_reason() {
        let agent = AgentConfig::new(
            "a",
            crate::types::ModelRef::parse("openai/gpt-4.1").unwrap_or_else(|e| panic!("{e}")),
            "p",
            vec![],
        );
        let files = RunFiles::new(
            "r",
            None,
            std::sync::Arc::new(crate::tokens::TokenCounter::new()),
            crate::tokens::Encoding::O200k,
            10_000,
        )
        .with_max_bytes(300_000);
        let long = "word ".repeat(50_000);
        let (kept, counted) =
            inline_or_file(&files, &agent, long.clone(), "http_fetch", FileSource::ToolOutput)
                .await
                .unwrap();
        assert!(
            counted.is_none() && kept.contains("The whole text is file f_1"),
            "{kept}"
        );
        let (shown, counted) = inline_or_file(&files, &agent, long, "http_fetch", FileSource::ToolOutput)
            .await
            .unwrap();
        assert!(counted.is_some());
        assert!(shown.starts_with("word word"), "{shown}");
        assert!(
            shown.contains("the rest was not kept: this run's files hold 1 MB"),
            "{shown}"
        );
        assert!(files.get("f_2").is_err(), "no second file");
    }
}
