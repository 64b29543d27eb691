//! Turning documents (PDF, DOCX, PPTX, HTML) into plain text, isolated from the service:
//! extraction runs on a blocking thread, panics are caught, and a deadline bounds it.
//! Archives are read with size caps so a zip bomb fails instead of filling memory.

use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

/// Largest XML part of a DOCX/PPTX read, uncompressed.
pub const MAX_PART_BYTES: u64 = 64 * 1024 * 1024;
/// Largest total text pulled out of one archive.
pub const MAX_TOTAL_BYTES: u64 = 128 * 1024 * 1024;
/// Most XML one archive's parts inflate to together (the PDF pre-scan's cap).
pub const MAX_INFLATED_TOTAL: u64 = 256 * 1024 * 1024;
/// Default deadline for one extraction.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Document formats steward can extract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Pdf,
    Docx,
    Pptx,
    Html,
}

impl DocKind {
    /// The kind's name, as the extraction worker takes it.
    pub fn label(self) -> &'static str {
        match self {
            DocKind::Pdf => "PDF",
            DocKind::Docx => "DOCX",
            DocKind::Pptx => "PPTX",
            DocKind::Html => "HTML",
        }
    }

    pub fn from_label(label: &str) -> Option<DocKind> {
        [DocKind::Pdf, DocKind::Docx, DocKind::Pptx, DocKind::Html]
            .into_iter()
            .find(|k| k.label() == label)
    }

    /// The kind of a file from its mime type or name.
    pub fn detect(mime: &str, name: &str) -> Option<DocKind> {
        DocKind::from_mime(mime).or_else(|| DocKind::from_mime(super::mime::from_name(name)))
    }

    fn from_mime(mime: &str) -> Option<DocKind> {
        let base = mime.split(';').next().unwrap_or_default().trim();
        match base {
            "application/pdf" => Some(DocKind::Pdf),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => Some(DocKind::Docx),
            "application/vnd.openxmlformats-officedocument.presentationml.presentation" => {
                Some(DocKind::Pptx)
            }
            "text/html" | "application/xhtml+xml" => Some(DocKind::Html),
            _ => None,
        }
    }
}

/// Why extraction failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExtractError {
    #[error("cannot read the {kind}: {reason}")]
    Malformed { kind: &'static str, reason: String },
    #[error("the {kind} expands past the {limit}-byte safety cap (a zip bomb or an enormous document)")]
    TooLarge { kind: &'static str, limit: u64 },
    #[error("extraction took longer than {0:?}")]
    Timeout(Duration),
    #[error("the extractor crashed on this file: {0}")]
    Crashed(String),
    #[error("every extraction slot stayed busy for {0:?} (other documents are being read); try again later")]
    Busy(Duration),
}

impl ExtractError {
    /// A short name for the failure (`malformed`, `too_large`, `timeout`, `crashed`,
    /// `busy`).
    pub fn kind(&self) -> &'static str {
        match self {
            ExtractError::Malformed { .. } => "malformed",
            ExtractError::TooLarge { .. } => "too_large",
            ExtractError::Timeout(_) => "timeout",
            ExtractError::Crashed(_) => "crashed",
            ExtractError::Busy(_) => "busy",
        }
    }
}

/// Extracts text off the async workers with a deadline. A crashing extractor (some PDF
/// parsers panic on malformed input) becomes an error, never a crashed service. On
/// timeout the blocking thread is left to finish on its own; its result is dropped.
pub async fn extract(kind: DocKind, bytes: Arc<Vec<u8>>, timeout: Duration) -> Result<String, ExtractError> {
    let task = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(AssertUnwindSafe(|| extract_sync(kind, &bytes)))
    });
    match tokio::time::timeout(timeout, task).await {
        Err(_) => Err(ExtractError::Timeout(timeout)),
        // Not the panic's message: a parser's can quote the document it failed on.
        Ok(Err(_)) | Ok(Ok(Err(_))) => Err(ExtractError::Crashed("the parser panicked".into())),
        Ok(Ok(Ok(result))) => result,
    }
}

/// Extraction on the current thread (call through [`extract`] in async code).
pub fn extract_sync(kind: DocKind, bytes: &[u8]) -> Result<String, ExtractError> {
    match kind {
        DocKind::Pdf => pdf(bytes),
        DocKind::Docx => docx(bytes),
        DocKind::Pptx => pptx(bytes),
        DocKind::Html => Ok(html_to_text(&String::from_utf8_lossy(bytes))),
    }
}

fn pdf(bytes: &[u8]) -> Result<String, ExtractError> {
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| ExtractError::Malformed {
        kind: "PDF",
        reason: e.to_string(),
    })?;
    let mut out = String::new();
    for (i, page) in pages.iter().enumerate() {
        out.push_str(&format!("--- page {} ---\n", i + 1));
        out.push_str(page.trim());
        out.push_str("\n\n");
    }
    Ok(out)
}

type Archive<'a> = zip::ZipArchive<std::io::Cursor<&'a [u8]>>;

fn open_zip<'a>(bytes: &'a [u8], kind: &'static str) -> Result<Archive<'a>, ExtractError> {
    zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| ExtractError::Malformed {
        kind,
        reason: e.to_string(),
    })
}

/// Reads one part, refusing to inflate past [`MAX_PART_BYTES`] whatever the header says.
fn read_part(zip: &mut Archive<'_>, name: &str, kind: &'static str) -> Result<String, ExtractError> {
    let file = zip.by_name(name).map_err(|e| ExtractError::Malformed {
        kind,
        reason: format!("{name}: {e}"),
    })?;
    if file.size() > MAX_PART_BYTES {
        return Err(ExtractError::TooLarge {
            kind,
            limit: MAX_PART_BYTES,
        });
    }
    let mut buf = Vec::new();
    file.take(MAX_PART_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ExtractError::Malformed {
            kind,
            reason: format!("{name}: {e}"),
        })?;
    if buf.len() as u64 > MAX_PART_BYTES {
        return Err(ExtractError::TooLarge {
            kind,
            limit: MAX_PART_BYTES,
        });
    }
    String::from_utf8(buf).map_err(|e| ExtractError::Malformed {
        kind,
        reason: format!("{name}: {e}"),
    })
}

fn docx(bytes: &[u8]) -> Result<String, ExtractError> {
    let mut zip = open_zip(bytes, "DOCX")?;
    let xml = read_part(&mut zip, "word/document.xml", "DOCX")?;
    Ok(office_text(&xml, "w"))
}

fn pptx(bytes: &[u8]) -> Result<String, ExtractError> {
    pptx_within(bytes, MAX_INFLATED_TOTAL)
}

/// [`pptx`] with the slides inflating to at most `max_inflated` bytes together.
fn pptx_within(bytes: &[u8], max_inflated: u64) -> Result<String, ExtractError> {
    let mut zip = open_zip(bytes, "PPTX")?;
    let mut slides: Vec<(u32, String)> = zip
        .file_names()
        .filter_map(|n| {
            let n = n.ok()?;
            let num = n
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((num, n.to_string()))
        })
        .collect();
    slides.sort();
    let mut out = String::new();
    // What the slides inflate to together, not only each: hundreds of slides of
    // whitespace would otherwise each inflate to the part cap.
    let mut inflated: u64 = 0;
    for (num, name) in slides {
        let xml = read_part(&mut zip, &name, "PPTX")?;
        inflated += xml.len() as u64;
        if inflated > max_inflated {
            return Err(ExtractError::TooLarge {
                kind: "PPTX",
                limit: max_inflated,
            });
        }
        out.push_str(&format!("--- slide {num} ---\n"));
        out.push_str(office_text(&xml, "a").trim());
        out.push_str("\n\n");
        if out.len() as u64 > MAX_TOTAL_BYTES {
            return Err(ExtractError::TooLarge {
                kind: "PPTX",
                limit: MAX_TOTAL_BYTES,
            });
        }
    }
    Ok(out)
}

/// Text of WordprocessingML (`w`) or DrawingML (`a`): `<x:t>` runs, paragraphs as lines,
/// tabs and breaks kept. Parsed with quick-xml; malformed XML keeps the text read so far
/// and says where the part broke off.
fn office_text(xml: &str, ns: &str) -> String {
    use quick_xml::events::Event;
    let name = |local: &str| format!("{ns}:{local}");
    let (t, p, tab, br) = (name("t"), name("p"), name("tab"), name("br"));
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = String::new();
    let mut in_text = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.name().into_inner() == t.as_str() => in_text = true,
            Ok(Event::End(e)) => {
                let n = e.name();
                if n.into_inner() == t.as_str() {
                    in_text = false;
                } else if n.into_inner() == p.as_str() {
                    out.push('\n');
                }
            }
            Ok(Event::Empty(e)) => {
                let n = e.name();
                if n.into_inner() == tab.as_str() {
                    out.push('\t');
                } else if n.into_inner() == br.as_str() || n.into_inner() == p.as_str() {
                    out.push('\n');
                }
            }
            Ok(Event::Text(text)) if in_text => out.push_str(&text.xml10_content()),
            Ok(Event::CData(text)) if in_text => out.push_str(&text.xml10_content()),
            // Entity references arrive as their own events.
            Ok(Event::GeneralRef(r)) if in_text => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    out.push(c);
                } else {
                    out.push_str(&decode_entities(&format!("&{};", &*r)));
                }
            }
            Ok(Event::Eof) => break,
            Err(e) => {
                let at = reader.error_position();
                out.push_str(&format!(
                    "\n[steward: the document's XML is malformed at byte {at}: {e}]\n"
                ));
                break;
            }
            _ => {}
        }
    }
    out
}

/// Decodes the XML/HTML entities documents actually use.
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // Entities are short: look for the ';' within 12 characters (not bytes: the
        // text after '&' may be any script).
        let window = rest.char_indices().nth(12).map_or(rest.len(), |(i, _)| i);
        let Some(semi) = rest[..window].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "pre",
    "blockquote",
    "hr",
    "title",
    "nav",
    "main",
    "dt",
    "dd",
];

/// Readable text of an HTML page: scripts, styles and comments dropped, block elements
/// on their own lines, list items bulleted, entities decoded, blank runs collapsed.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..lt]));
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let tag = rest[1..gt].trim();
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if !closing && (name == "script" || name == "style") {
            // Searched in place, not in a lowercased copy of the rest: a copy per tag
            // made a page of many `<script>` tags quadratic.
            let end = format!("</{name}");
            rest = find_ignoring_case(rest, &end).map_or("", |i| &rest[i..]);
            continue;
        }
        if BLOCK_TAGS.contains(&name.as_str()) {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            if name == "li" && !closing {
                out.push_str("- ");
            }
        } else if name == "td" || name == "th" {
            out.push(' ');
        }
    }
    out.push_str(&decode_entities(rest));
    // Collapse horizontal whitespace and blank-line runs.
    let mut clean = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank += 1;
            if blank > 1 || clean.is_empty() {
                continue;
            }
        } else {
            blank = 0;
        }
        clean.push_str(&line);
        clean.push('\n');
    }
    clean.trim_end().to_string() + "\n"
}

/// Where ASCII `needle` first occurs in `hay`, ignoring ASCII case (a char boundary:
/// `needle` starts with `<`).
fn find_ignoring_case(hay: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    hay.as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_next_to_any_script_never_split_a_character() {
        assert_eq!(decode_entities("A&Bの日本語"), "A&Bの日本語");
        assert_eq!(
            html_to_text("<p>A&Bの日本語 &amp; 東京&lt;</p>"),
            "A&Bの日本語 & 東京<\n"
        );
        // '&' followed by every mix of 1-4 byte characters, at every offset.
        let tail = "é日😀aß本";
        for cut in 0..tail.chars().count() {
            let text: String = format!("x&{}", tail.chars().skip(cut).collect::<String>());
            assert_eq!(decode_entities(&text), text);
        }
    }

    #[test]
    fn html_becomes_readable_text() {
        let html = "<html><head><title>T</title><style>p{}</style><script>var x = '<p>';</script></head>\
                    <body><h1>Hello &amp; welcome</h1><!-- hidden --><p>First   para</p><ul><li>one</li><li>two &#x2713;</li></ul></body></html>";
        assert_eq!(
            html_to_text(html),
            "T\nHello & welcome\nFirst para\n- one\n- two ✓\n"
        );
    }

    #[test]
    fn a_decks_slides_are_capped_together() {
        use std::io::Write as _;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for n in 1..=3 {
            zip.start_file(format!("ppt/slides/slide{n}.xml"), options)
                .unwrap();
            let slide = format!(
                "<p:sld><a:p><a:r><a:t>slide {n}</a:t></a:r></a:p>{}</p:sld>",
                " ".repeat(600)
            );
            zip.write_all(slide.as_bytes()).unwrap();
        }
        let deck = zip.finish().unwrap().into_inner();
        assert_eq!(
            pptx_within(&deck, 1_000),
            Err(ExtractError::TooLarge {
                kind: "PPTX",
                limit: 1_000
            })
        );
        let text = pptx_within(&deck, 10_000).unwrap();
        assert!(text.contains("--- slide 3 ---\nslide 3"), "{text}");
    }

    #[test]
    fn script_and_style_end_in_any_case_and_many_are_cheap() {
        assert_eq!(
            html_to_text("<SCRIPT>x = '<p>'</sCrIpT><p>kept</p><Style>p{}</STYLE>"),
            "kept\n"
        );
        assert_eq!(html_to_text("<p>a</p><script>never closed <p>b</p>"), "a\n");
        // 200,000 tags: each end is found from where its tag is, not in a copy of the
        // rest of the page.
        let many = "<script></script>".repeat(200_000) + "<p>end</p>";
        assert_eq!(html_to_text(&many), "end\n");
    }

    #[test]
    fn office_xml_paragraphs_and_runs() {
        let xml = r#"<w:document><w:body><w:p><w:r><w:t>Hello</w:t></w:r><w:r><w:t xml:space="preserve"> world &amp; co</w:t></w:r></w:p><w:p><w:r><w:t>A</w:t><w:tab/><w:t>B</w:t></w:r></w:p></w:body></w:document>"#;
        assert_eq!(office_text(xml, "w"), "Hello world & co\nA\tB\n");
        // Character references, CDATA and attributes holding '>' are XML, not text.
        let xml = r#"<a:p><a:r><a:rPr alt="x>y"/><a:t>caf&#233; <![CDATA[<b>]]></a:t></a:r></a:p>"#;
        assert_eq!(office_text(xml, "a"), "café <b>\n");
    }

    #[test]
    fn detects_kinds() {
        assert_eq!(DocKind::detect("application/pdf", "x"), Some(DocKind::Pdf));
        assert_eq!(
            DocKind::detect("application/octet-stream", "deck.pptx"),
            Some(DocKind::Pptx)
        );
        assert_eq!(DocKind::detect("text/plain", "notes.txt"), None);
    }

    #[tokio::test]
    async fn garbage_fails_cleanly() {
        let junk = Arc::new(b"%PDF-1.4 this is not really a pdf".to_vec());
        assert!(
            extract(DocKind::Pdf, junk.clone(), DEFAULT_TIMEOUT)
                .await
                .is_err()
        );
        assert!(matches!(
            extract(DocKind::Docx, junk, DEFAULT_TIMEOUT).await,
            Err(ExtractError::Malformed { .. })
        ));
    }
}
