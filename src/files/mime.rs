//! Mime types from file names and content.

/// Guesses a mime type from a file name's extension.
pub fn from_name(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "html" | "htm" => "text/html",
        "pdf" => "application/pdf",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => "application/octet-stream",
    }
}

/// Whether content of this type is text the model can read directly.
pub fn is_textual(mime: &str, content: &[u8]) -> bool {
    let base = mime.split(';').next().unwrap_or_default().trim();
    if base.starts_with("text/")
        || matches!(
            base,
            "application/json" | "application/yaml" | "application/xml" | "application/x-ndjson"
        )
    {
        return true;
    }
    // Unknown types: text when valid UTF-8 without NULs.
    base == "application/octet-stream" && !content.contains(&0) && std::str::from_utf8(content).is_ok()
}

/// Image types providers accept as image content.
pub fn is_image(mime: &str) -> bool {
    matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp")
}

/// A mime type for text a tool returned: JSON when it parses as an object or array.
pub fn for_tool_output(text: &str) -> &'static str {
    let t = text.trim_start();
    if (t.starts_with('{') || t.starts_with('[')) && serde_json::from_str::<serde_json::Value>(text).is_ok() {
        "application/json"
    } else {
        "text/plain"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_types() {
        assert_eq!(from_name("Report.PDF"), "application/pdf");
        assert_eq!(from_name("notes"), "application/octet-stream");
        assert!(is_textual("text/plain; charset=utf-8", b"x"));
        assert!(is_textual("application/octet-stream", b"plain"));
        assert!(!is_textual("application/octet-stream", b"\x00\x01"));
        assert!(!is_textual("image/png", b"x"));
        assert_eq!(for_tool_output("{\"a\": 1}"), "application/json");
        assert_eq!(for_tool_output("{not json"), "text/plain");
    }
}
