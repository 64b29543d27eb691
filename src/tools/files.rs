//! The base file tools every agent has: `file_read`, `file_regex`, `load_file`,
//! `peek_file` and `extract_file`. They act only on the run's virtual files, so their
//! mock is the real implementation.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::args::{parse, schema_of};
use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};
use crate::files::extract::DocKind;
use crate::files::{FileMeta, FileSource, NewFile, ReadKind, RunFiles, mime};
use crate::provider::types::Image;
use crate::tokens::floor_char;

/// Default and maximum matches `file_regex` returns.
const DEFAULT_MATCHES: u64 = 20;
const MAX_MATCHES: u64 = 200;
const MAX_CONTEXT_LINES: u64 = 10;
/// Longest line shown by `file_regex`.
const MAX_LINE_CHARS: usize = 500;

#[derive(Clone, Copy)]
enum Op {
    Read,
    Regex,
    Load,
    Peek,
    Extract,
}

/// One of the base file tools.
pub struct FileTool {
    spec: ToolSpec,
    op: Op,
}

/// A file id, as every file tool takes it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileId {
    /// file id such as f_1
    id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// file id such as f_1
    id: String,
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
    start_byte: Option<u64>,
    end_byte: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RegexArgs {
    /// file id such as f_1
    id: String,
    #[schemars(length(min = 1))]
    pattern: String,
    #[schemars(range(min = 1, max = 200))]
    max_matches: Option<u64>,
    #[schemars(range(max = 10))]
    context_lines: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PeekArgs {
    /// file id such as f_1
    id: String,
    start: u64,
    #[schemars(range(min = 1))]
    stop: u64,
}

/// All base file tools.
pub fn base_tools() -> Vec<Arc<dyn Tool>> {
    let tool = |name: &str, description: &str, parameters: Value, op: Op| -> Arc<dyn Tool> {
        Arc::new(FileTool {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
                effect: Effect::ReadOnly,
            },
            op,
        })
    };
    vec![
        tool(
            "file_read",
            "Read a text file: the whole file, a line range (1-based, inclusive) or a byte range (0-based, end exclusive). Large reads are refused; read ranges or search with file_regex.",
            schema_of::<ReadArgs>(),
            Op::Read,
        ),
        tool(
            "file_regex",
            "Search a text file with a regular expression (Rust syntax; (?i) for case-insensitive). Returns matching lines with their line numbers, optionally with context lines.",
            schema_of::<RegexArgs>(),
            Op::Regex,
        ),
        tool(
            "load_file",
            "Load an entire file into context: text, or an image to look at. Refused when it would not fit in the remaining context; documents (PDF, DOCX, PPTX) need extract_file first.",
            schema_of::<FileId>(),
            Op::Load,
        ),
        tool(
            "peek_file",
            "Load a section of a text file: bytes from start (inclusive) to stop (exclusive).",
            schema_of::<PeekArgs>(),
            Op::Peek,
        ),
        tool(
            "extract_file",
            "Turn a PDF, DOCX, PPTX or HTML file into plain text stored as a new file; returns the new file's id and size, not the text.",
            schema_of::<FileId>(),
            Op::Extract,
        ),
    ]
}

#[async_trait]
impl Tool for FileTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let files = &ctx.files;
        let get = |id: &str| files.get(id).map_err(|e| ToolError::Model(e.to_string()));
        match self.op {
            Op::Read => {
                let a: ReadArgs = parse(args)?;
                let (meta, content) = get(&a.id)?;
                match (a.start_line, a.end_line, a.start_byte, a.end_byte) {
                    (None, None, None, None) => read_whole(files, &meta, &content).await,
                    (sl, el, None, None) => read_lines(files, &meta, &content, sl.unwrap_or(1), el).await,
                    (None, None, sb, eb) => read_bytes(files, &meta, &content, sb.unwrap_or(0), eb).await,
                    _ => Err(ToolError::Model(
                        "give either a line range or a byte range, not both".into(),
                    )),
                }
            }
            Op::Peek => {
                let PeekArgs { id, start, stop } = parse(args)?;
                let (meta, content) = get(&id)?;
                if stop <= start {
                    return Err(ToolError::Model(format!(
                        "stop ({stop}) must be greater than start ({start})"
                    )));
                }
                read_bytes(files, &meta, &content, start, Some(stop)).await
            }
            Op::Regex => {
                let a: RegexArgs = parse(args)?;
                let (meta, content) = get(&a.id)?;
                let max = a.max_matches.unwrap_or(DEFAULT_MATCHES).min(MAX_MATCHES);
                let context = a.context_lines.unwrap_or(0).min(MAX_CONTEXT_LINES);
                regex(files, &meta, &content, &a.pattern, max, context).await
            }
            Op::Load => {
                let FileId { id } = parse(args)?;
                let (meta, content) = get(&id)?;
                load(files, &meta, &content).await
            }
            Op::Extract => {
                let FileId { id } = parse(args)?;
                let (meta, content) = get(&id)?;
                extract_to_file(files, &meta, content).await
            }
        }
    }

    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn text_of<'a>(meta: &FileMeta, content: &'a [u8]) -> Result<&'a str, ToolError> {
    if !meta.text {
        let hint = if mime::is_image(&meta.mime) {
            "use load_file to look at an image"
        } else if DocKind::detect(&meta.mime, &meta.name).is_some() {
            "use extract_file to turn it into text first"
        } else {
            "it cannot be read as text"
        };
        return Err(ToolError::Model(format!(
            "{} ({}) is not a text file; {hint}",
            meta.id, meta.mime
        )));
    }
    std::str::from_utf8(content).map_err(|_| ToolError::Model(format!("{} is not valid UTF-8", meta.id)))
}

fn store_err(e: impl std::fmt::Display) -> ToolError {
    ToolError::Fatal(format!("cannot record the read: {e}"))
}

/// Refuses text over the per-read limit, pointing at narrower reads.
fn check_size(files: &RunFiles, what: &str, text: &str) -> Result<(), ToolError> {
    let n = files.tokens().count(files.encoding(), text).tokens;
    if n > files.max_read_tokens {
        return Err(ToolError::Model(format!(
            "{what} is ~{n} tokens, over the {}-token limit for one read; read a smaller range or search with file_regex",
            files.max_read_tokens
        )));
    }
    Ok(())
}

async fn read_whole(files: &RunFiles, meta: &FileMeta, content: &[u8]) -> ToolResult {
    check_size(
        files,
        &format!("the whole of {}", meta.id),
        text_of(meta, content)?,
    )?;
    whole_text(files, meta, content).await
}

/// The whole text of a file, marked as read.
async fn whole_text(files: &RunFiles, meta: &FileMeta, content: &[u8]) -> ToolResult {
    let text = text_of(meta, content)?;
    files
        .mark_read(&meta.id, ReadKind::Whole)
        .await
        .map_err(store_err)?;
    Ok(ToolOutput::text(format!(
        "{} ({}, {} lines):\n{text}",
        meta.id, meta.name, meta.lines
    )))
}

async fn read_lines(
    files: &RunFiles,
    meta: &FileMeta,
    content: &[u8],
    start: u64,
    end: Option<u64>,
) -> ToolResult {
    let text = text_of(meta, content)?;
    if start > meta.lines {
        return Err(ToolError::Model(format!(
            "start_line {start} is beyond the end of {} ({} lines)",
            meta.id, meta.lines
        )));
    }
    let requested_end = end.unwrap_or(meta.lines);
    if requested_end < start {
        return Err(ToolError::Model(format!(
            "end_line {requested_end} is before start_line {start}"
        )));
    }
    let end = requested_end.min(meta.lines);
    let body: String = text
        .split_inclusive('\n')
        .skip((start - 1) as usize)
        .take((end - start + 1) as usize)
        .collect();
    check_size(files, &format!("lines {start}-{end} of {}", meta.id), &body)?;
    files
        .mark_read(&meta.id, ReadKind::Lines(start, end))
        .await
        .map_err(store_err)?;
    let note = if requested_end > end {
        format!(" (the file ends at line {end})")
    } else {
        String::new()
    };
    Ok(ToolOutput::text(format!(
        "{} lines {start}-{end} of {}{note}:\n{body}",
        meta.id, meta.lines
    )))
}

async fn read_bytes(
    files: &RunFiles,
    meta: &FileMeta,
    content: &[u8],
    start: u64,
    end: Option<u64>,
) -> ToolResult {
    let text = text_of(meta, content)?;
    let size = meta.size_bytes;
    if start >= size {
        return Err(ToolError::Model(format!(
            "byte {start} is beyond the end of {} ({size} bytes)",
            meta.id
        )));
    }
    if let Some(end) = end.filter(|e| *e <= start) {
        return Err(ToolError::Model(format!(
            "end_byte {end} must be greater than start_byte {start}"
        )));
    }
    let end = end.unwrap_or(size).min(size);
    // Move both ends back to character boundaries.
    let start_b = floor_char(text, start as usize).len();
    let end_b = floor_char(text, end as usize).len();
    let body = &text[start_b..end_b];
    check_size(files, &format!("bytes {start_b}-{end_b} of {}", meta.id), body)?;
    files
        .mark_read(&meta.id, ReadKind::Bytes(start_b as u64, end_b as u64))
        .await
        .map_err(store_err)?;
    Ok(ToolOutput::text(format!(
        "{} bytes {start_b}-{end_b} of {size}:\n{body}",
        meta.id
    )))
}

async fn load(files: &RunFiles, meta: &FileMeta, content: &[u8]) -> ToolResult {
    let budget = files.budget();
    if meta.size_tokens > budget {
        return Err(ToolError::Model(format!(
            "{} is ~{} tokens but only {budget} remain before compaction; use file_regex, file_read ranges or peek_file",
            meta.id, meta.size_tokens
        )));
    }
    if mime::is_image(&meta.mime) {
        files
            .mark_read(&meta.id, ReadKind::Whole)
            .await
            .map_err(store_err)?;
        let mut out = ToolOutput::text(format!(
            "{} ({}) is attached below as an image.",
            meta.id, meta.name
        ));
        out.images.push(Image {
            mime: meta.mime.clone(),
            data_base64: base64::engine::general_purpose::STANDARD.encode(content),
        });
        return Ok(out);
    }
    whole_text(files, meta, content).await
}

async fn regex(
    files: &RunFiles,
    meta: &FileMeta,
    content: &[u8],
    pattern: &str,
    max: u64,
    context: u64,
) -> ToolResult {
    let text = text_of(meta, content)?;
    // Multi-line so ^ and $ match at line boundaries, as in grep.
    let re = regex::RegexBuilder::new(pattern)
        .multi_line(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ToolError::Model(format!("invalid regex '{pattern}': {e}")))?;
    let lines = crate::files::line_count(text);
    let hits = matching_lines(&re, text);
    if hits.is_empty() {
        return Ok(ToolOutput::text(format!(
            "{}: no lines match /{pattern}/ ({lines} lines searched)",
            meta.id
        )));
    }
    let shown: Vec<u64> = hits.iter().copied().take(max as usize).collect();
    // Which lines to print: the matches plus their context, merged.
    let mut wanted: Vec<(u64, bool)> = Vec::new();
    for &m in &shown {
        for n in m.saturating_sub(context).max(1)..=(m + context).min(lines) {
            match wanted.last_mut() {
                Some(last) if last.0 == n => last.1 |= n == m,
                Some(last) if last.0 > n => {}
                _ => wanted.push((n, n == m)),
            }
        }
    }
    let mut out = format!(
        "{}: {} matching line{} for /{pattern}/{}\n",
        meta.id,
        hits.len(),
        if hits.len() == 1 { "" } else { "s" },
        if hits.len() > shown.len() {
            format!(" (showing the first {})", shown.len())
        } else {
            String::new()
        }
    );
    // One pass over the lines up to the last wanted one; no index of every line.
    let mut wanted_iter = wanted.iter().peekable();
    let mut prev = 0;
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        let Some(&&(want, is_match)) = wanted_iter.peek() else {
            break;
        };
        if n < want {
            continue;
        }
        wanted_iter.next();
        if prev != 0 && n > prev + 1 {
            out.push_str("--\n");
        }
        let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
        let more = if cut.len() < line.len() { " …" } else { "" };
        out.push_str(&format!("{n}{} {cut}{more}\n", if is_match { ":" } else { "-" }));
        prev = n;
    }
    check_size(files, "that many matches", &out)?;
    for (n, _) in &wanted {
        files
            .mark_read(&meta.id, ReadKind::Lines(*n, *n))
            .await
            .map_err(store_err)?;
    }
    Ok(ToolOutput::text(out))
}

/// 1-based numbers of lines containing a match, scanning the text once.
pub fn matching_lines(re: &regex::Regex, text: &str) -> Vec<u64> {
    let mut hits = Vec::new();
    let mut line = 1u64;
    let mut counted_to = 0usize;
    let mut last_hit = 0u64;
    for m in re.find_iter(text) {
        line += memchr_count(&text.as_bytes()[counted_to..m.start()]);
        counted_to = m.start();
        if line != last_hit {
            hits.push(line);
            last_hit = line;
        }
    }
    hits
}

fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

async fn extract_to_file(files: &RunFiles, meta: &FileMeta, content: Arc<Vec<u8>>) -> ToolResult {
    let Some(kind) = DocKind::detect(&meta.mime, &meta.name) else {
        return Err(ToolError::Model(format!(
            "{} ({}) is not a PDF, DOCX, PPTX or HTML file; read text files with file_read",
            meta.id, meta.mime
        )));
    };
    let out = match files.derived(&meta.id) {
        Some(existing) => existing,
        None => {
            let text = files
                .extractor()
                .extract(kind, content)
                .await
                .map_err(|e| ToolError::Model(format!("cannot extract {}: {e}", meta.id)))?;
            let file = NewFile {
                name: format!("{}.txt", meta.name),
                mime: "text/plain".into(),
                content: text.into_bytes(),
            };
            files
                .add(file, FileSource::Extracted, Some(&meta.id))
                .await
                .map_err(store_err)?
        }
    };
    Ok(ToolOutput::text(format!(
        "Extracted {} ({}) into {}: {} ({}, {} bytes, {} tokens, {} lines). Read it with file_read, file_regex, peek_file or load_file.",
        meta.id, meta.name, out.id, out.name, out.mime, out.size_bytes, out.size_tokens, out.lines
    )))
}
