//! An MCP `tools/call` result as a steward tool result: text as text, images and
//! embedded resources as virtual files of the run, `isError` as a tool error. Live calls
//! and recorded ones go through the same conversion, so a replay sees what the server
//! gave.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::files::{FileSource, NewFile};
use crate::tools::{ToolCtx, ToolError, ToolOutput, ToolResult};

/// `answer` from `server`'s tool `tool` (its steward name), as the model will read it.
pub(super) async fn output(ctx: &ToolCtx, server: &str, tool: &str, answer: &CallToolResult) -> ToolResult {
    let mut text = Vec::new();
    for (i, block) in answer.content.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => text.push(t.text.clone()),
            ContentBlock::Image(image) => {
                let bytes = decode(server, &image.data)?;
                let ext = image.mime_type.rsplit('/').next().unwrap_or("bin");
                let name = format!("{tool}-{}-{i}.{ext}", ctx.call_id);
                let id = keep(ctx, name, &image.mime_type, bytes).await?;
                text.push(format!("[image {} ({}), file {id}]", i + 1, image.mime_type));
            }
            // An embedded resource (a document the server hands back) is a file too.
            ContentBlock::Resource(embedded) => {
                let (uri, mime, bytes) = match &embedded.resource {
                    ResourceContents::TextResourceContents {
                        uri, mime_type, text, ..
                    } => (
                        uri,
                        mime_type.clone().unwrap_or_else(|| "text/plain".into()),
                        text.clone().into_bytes(),
                    ),
                    ResourceContents::BlobResourceContents {
                        uri, mime_type, blob, ..
                    } => (
                        uri,
                        mime_type
                            .clone()
                            .unwrap_or_else(|| "application/octet-stream".into()),
                        decode(server, blob)?,
                    ),
                    other => {
                        text.push(serde_json::to_string(other).unwrap_or_default());
                        continue;
                    }
                };
                let last = uri.rsplit('/').next().filter(|n| !n.is_empty());
                let name = last.map_or_else(|| format!("{tool}-{}-{i}", ctx.call_id), str::to_string);
                let size = bytes.len();
                let id = keep(ctx, name, &mime, bytes).await?;
                text.push(format!("[resource {uri} ({mime}, {size} bytes), file {id}]"));
            }
            other => text.push(serde_json::to_string(other).unwrap_or_default()),
        }
    }
    if text.is_empty()
        && let Some(structured) = &answer.structured_content
    {
        text.push(structured.to_string());
    }
    let text = text.join("\n");
    if answer.is_error == Some(true) {
        return Err(ToolError::Model(text));
    }
    Ok(ToolOutput::text(text))
}

/// Base64 content from `server`, decoded.
fn decode(server: &str, data: &str) -> Result<Vec<u8>, ToolError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| {
            ToolError::Model(format!(
                "MCP server '{server}' sent unreadable base64 content: {e}"
            ))
        })
}

/// Keeps `bytes` as a virtual file of the run; its id.
async fn keep(ctx: &ToolCtx, name: String, mime: &str, bytes: Vec<u8>) -> Result<String, ToolError> {
    let file = ctx
        .files
        .add(
            NewFile {
                name,
                mime: mime.to_string(),
                content: bytes,
            },
            FileSource::ToolOutput,
            None,
        )
        .await
        .map_err(|e| ToolError::Model(format!("cannot keep the tool's file: {e}")))?;
    Ok(file.id)
}
