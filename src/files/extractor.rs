//! Bounded extraction: how much a document may inflate and how much memory its
//! extraction may use.
//!
//! PDF libraries inflate whole streams in memory, and an allocation failure aborts the
//! process (no `catch_unwind` can stop that), so a 1.5 MB PDF that inflates to 1.5 GB
//! would take the service down. Two bounds apply: a pre-scan counts the bytes every
//! Flate stream of a PDF inflates to, as they are produced, and refuses the file past
//! [`Extractor::max_inflated`]; and, when a worker executable is configured (the
//! `steward` binary itself), extraction runs in a child process whose address space is
//! capped with `RLIMIT_AS`, so whatever the pre-scan cannot see still cannot exhaust
//! the service's memory.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::extract::{self, DocKind, ExtractError};

/// Default cap on the bytes a document's compressed streams may inflate to.
pub const DEFAULT_MAX_INFLATED: u64 = 256 * 1024 * 1024;
/// Default cap on extracted text.
pub const DEFAULT_MAX_OUTPUT: u64 = 32 * 1024 * 1024;
/// Default address-space limit of an extraction worker.
pub const DEFAULT_MEMORY_LIMIT: u64 = 2 * 1024 * 1024 * 1024;

/// How documents are extracted.
#[derive(Debug, Clone)]
pub struct Extractor {
    /// Executable run as `<worker> extract-worker <kind>` (stdin: the document, stdout:
    /// the text). `None` extracts in-process, bounded by the pre-scan only.
    pub worker: Option<PathBuf>,
    pub memory_limit: u64,
    pub max_inflated: u64,
    pub max_output: u64,
    pub timeout: Duration,
    /// Extractions at once across every run sharing this extractor (one per process):
    /// each worker may take up to `memory_limit`, so a burst of documents waits its
    /// turn rather than taking the machine's memory.
    pub slots: Arc<tokio::sync::Semaphore>,
}

/// Extractions at once by default: the machine's cores, at least 2.
pub fn default_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

impl Default for Extractor {
    fn default() -> Self {
        Extractor {
            worker: None,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            max_inflated: DEFAULT_MAX_INFLATED,
            max_output: DEFAULT_MAX_OUTPUT,
            timeout: extract::DEFAULT_TIMEOUT,
            slots: Arc::new(tokio::sync::Semaphore::new(default_slots())),
        }
    }
}

impl Extractor {
    /// Extraction in child processes of `worker` (normally `std::env::current_exe()`).
    pub fn with_worker(worker: PathBuf) -> Extractor {
        Extractor {
            worker: Some(worker),
            ..Extractor::default()
        }
    }

    /// Extracts `bytes` as `kind` within every bound; a breach fails this file only.
    pub async fn extract(&self, kind: DocKind, bytes: Arc<Vec<u8>>) -> Result<String, ExtractError> {
        let span = tracing::info_span!(
            parent: crate::telemetry::parent(),
            "extract_file",
            otel.name = format!("extract_file {}", kind.label()).as_str(),
            "steward.file.kind" = kind.label(),
            "steward.file.bytes" = bytes.len() as u64,
            "steward.file.text_bytes" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
        );
        // Not entered: nothing inside makes spans or events, and entering on every poll
        // costs more than the span. It measures the extraction by living across it.
        let result = self.extract_bounded(kind, bytes).await;
        match &result {
            Ok(text) => span.record("steward.file.text_bytes", text.len() as u64),
            Err(e) => span.record("error.type", e.kind()),
        };
        result
    }

    async fn extract_bounded(&self, kind: DocKind, bytes: Arc<Vec<u8>>) -> Result<String, ExtractError> {
        // A burst of documents waits its turn, for as long as one may take: past that
        // the call fails with the reason rather than wait without end. Never closed,
        // so acquiring fails only if it were; then extract unbounded.
        let _slot = match tokio::time::timeout(self.timeout, self.slots.acquire()).await {
            Ok(slot) => slot.ok(),
            Err(_) => return Err(ExtractError::Busy(self.timeout)),
        };
        let max_inflated = self.max_inflated;
        let scan_bytes = bytes.clone();
        let scanned = tokio::task::spawn_blocking(move || check_inflation(kind, &scan_bytes, max_inflated));
        match tokio::time::timeout(self.timeout, scanned).await {
            Err(_) => return Err(ExtractError::Timeout(self.timeout)),
            // Not the panic's message: it can quote the document.
            Ok(Err(_)) => return Err(ExtractError::Crashed("the extraction task panicked".into())),
            Ok(Ok(result)) => result?,
        }
        let text = match &self.worker {
            Some(worker) => self.in_child(worker, kind, &bytes).await?,
            None => extract::extract(kind, bytes, self.timeout).await?,
        };
        if text.len() as u64 > self.max_output {
            return Err(ExtractError::TooLarge {
                kind: kind.label(),
                limit: self.max_output,
            });
        }
        Ok(text)
    }

    async fn in_child(&self, worker: &PathBuf, kind: DocKind, bytes: &[u8]) -> Result<String, ExtractError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let crashed = |m: String| ExtractError::Crashed(m);
        let mut command = tokio::process::Command::new(worker);
        // The worker gets nothing of steward's: no environment (keys, tokens, the
        // database URL) and no descriptor but its pipes.
        command
            .env_clear()
            .args(["extract-worker", kind.label()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        limit_memory(&mut command, self.memory_limit);
        crate::sandbox::process::inherit_only_stdio(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| crashed(format!("cannot start the extraction worker: {e}")))?;
        let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(crashed("the extraction worker has no pipes".into()));
        };
        let input = bytes.to_vec();
        let cap = self.max_output;
        let work = async move {
            let feed = async move {
                // A worker that dies early closes its stdin; that is reported by its exit.
                let _ = stdin.write_all(&input).await;
                drop(stdin);
            };
            let mut text = Vec::new();
            let mut errors = Vec::new();
            let mut limited = stdout.take(cap + 1);
            let read = limited.read_to_end(&mut text);
            let read_err = stderr.read_to_end(&mut errors);
            let (_, out, _) = tokio::join!(feed, read, read_err);
            out.map_err(|e| crashed(e.to_string()))?;
            let status = child.wait().await.map_err(|e| crashed(e.to_string()))?;
            Ok::<_, ExtractError>((status, text, errors))
        };
        let (status, text, errors) = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| ExtractError::Timeout(self.timeout))??;
        if text.len() as u64 > cap {
            return Err(ExtractError::TooLarge {
                kind: kind.label(),
                limit: cap,
            });
        }
        let message = String::from_utf8_lossy(&errors).trim().to_string();
        match status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&text).into_owned()),
            Some(2) if !message.is_empty() => Err(ExtractError::Malformed {
                kind: kind.label(),
                reason: message,
            }),
            Some(4) => Err(ExtractError::Crashed(message)),
            _ => Err(ExtractError::Crashed(format!(
                "the extraction worker stopped ({status}) within its {}-byte memory limit",
                self.memory_limit
            ))),
        }
    }
}

/// Caps the worker's address space and puts it under the script sandbox's system
/// call filter (`sandbox::seccomp`): a document that took over the parser still cannot
/// mount, trace, load modules or reach the kernel's rarer interfaces.
#[cfg(unix)]
fn limit_memory(command: &mut tokio::process::Command, limit: u64) {
    let filter = crate::sandbox::seccomp::Program::default();
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // setrlimit, prctl and seccomp, which are async-signal-safe; the filter was built
    // before the fork.
    unsafe {
        command.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            filter.install()
        });
    }
}

#[cfg(not(unix))]
fn limit_memory(_command: &mut tokio::process::Command, _limit: u64) {}

/// Most streams a PDF may hold (a 10,000-page document holds far fewer).
const MAX_PDF_STREAMS: usize = 100_000;

/// Refuses a document whose compressed content inflates past `max`. For PDFs, every
/// stream is inflated into a counter (nothing is kept) the ways lopdf could decode it,
/// whatever its dictionary says (a filter can be written many ways): Flate (up to three
/// layers, each read as raw deflate when its zlib header does not read, as lopdf does)
/// and LZW, each also behind ASCII85 (all the text read together at most twice the
/// document; more is refused). A PDF of more than [`MAX_PDF_STREAMS`] streams is
/// refused. DOCX and PPTX parts are read with caps by the extractor itself. Other chains
/// are left to the worker's address-space limit.
pub fn check_inflation(kind: DocKind, bytes: &[u8], max: u64) -> Result<(), ExtractError> {
    if kind != DocKind::Pdf {
        return Ok(());
    }
    // Where stream data starts (after `stream` and its end of line).
    let mut streams: Vec<usize> = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"stream") {
        let keyword = at + found;
        let mut start = keyword + b"stream".len();
        at = start;
        // `endstream` also contains `stream`, and only a keyword followed by an end of
        // line starts data: as lopdf reads it, spaces or tabs, then `\r\n`, `\n` or
        // `\r`. Each decoder stops where its data ends, so the search goes on from the
        // data's start: nothing a stream says about its extent is believed.
        if keyword >= 3 && &bytes[keyword - 3..keyword] == b"end" {
            continue;
        }
        while matches!(bytes.get(start), Some(b' ' | b'\t')) {
            start += 1;
        }
        if bytes.get(start..start + 2) == Some(b"\r\n") {
            start += 2;
        } else if matches!(bytes.get(start), Some(b'\n' | b'\r')) {
            start += 1;
        } else {
            continue;
        }
        streams.push(start);
        // Each stream costs a few decoders' state however small it is: a document made
        // of nothing but stream keywords would keep a thread busy for minutes.
        if streams.len() > MAX_PDF_STREAMS {
            return Err(ExtractError::Malformed {
                kind: "PDF",
                reason: format!("more than {MAX_PDF_STREAMS} streams (steward reads at most that many)"),
            });
        }
    }
    let mut total: u64 = 0;
    // ASCII85 text is read as lopdf reads it, to its end (`~`, or a byte outside its
    // alphabet), whatever keywords it holds. Streams can be made to overlap, so all
    // the text read together may be at most twice the document; a document that
    // needs more is refused rather than let through unread.
    let mut text_left = bytes.len().saturating_mul(2);
    for &start in &streams {
        let text = &bytes[start..start + ascii85_extent(&bytes[start..])];
        if !text.is_empty() {
            text_left = text_left
                .checked_sub(text.len())
                .ok_or_else(|| ExtractError::Malformed {
                    kind: "PDF",
                    reason: "more ASCII85 text than steward reads to check it".into(),
                })?;
        }
        total = total.saturating_add(stream_inflated(
            &bytes[start..],
            text,
            max.saturating_sub(total).saturating_add(1),
        ));
        if total > max {
            return Err(ExtractError::TooLarge {
                kind: "PDF",
                limit: max,
            });
        }
    }
    Ok(())
}

/// How much of `data` is ASCII85 text as lopdf reads it: none unless it starts (after
/// whitespace) with one of its characters, else up to `~` or the first byte outside
/// its alphabet.
fn ascii85_extent(data: &[u8]) -> usize {
    let letter = |b: &u8| (b'!'..=b'u').contains(b) || *b == b'z';
    match data.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b) if letter(b) => data
            .iter()
            .position(|b| !(b.is_ascii_whitespace() || letter(b)))
            .unwrap_or(data.len()),
        _ => 0,
    }
}

/// What the stream starting at `data` inflates to, the most of every decoding lopdf
/// could use (stopping past `cap`): Flate, up to three layers, each falling back to raw
/// deflate as lopdf's does ([`flate_layer`]); LZW; and each of those behind ASCII85
/// (`[/ASCII85Decode /FlateDecode]`) over `text`, the ASCII85 text the stream starts
/// with (empty when it starts with none). Data that is none of them fails each within a
/// few bytes.
fn stream_inflated(data: &[u8], text: &[u8], cap: u64) -> u64 {
    let plain = decoded_most(|| data, cap);
    if text.is_empty() || plain > cap {
        return plain;
    }
    plain.max(decoded_most(|| super::ascii85::Ascii85::new(text), cap))
}

/// The most of Flate (one to three layers, each as [`flate_layer`] reads it) and LZW
/// over what `open` reads (each decoding opens it anew).
fn decoded_most<R: Read>(open: impl Fn() -> R, cap: u64) -> u64 {
    // Each layer of Flate the way lopdf reads it; a deeper layer reads what the one
    // before gave, so when one gives nothing the deeper ones are not made.
    let once = counted(&mut flate_layer(open()), cap);
    let twice = match once {
        0 => 0,
        _ => counted(&mut flate_layer(flate_layer(open())), cap),
    };
    let thrice = match twice {
        0 => 0,
        _ => counted(&mut flate_layer(flate_layer(flate_layer(open()))), cap),
    };
    [
        once,
        twice,
        thrice,
        lzw_inflated(std::io::BufReader::with_capacity(1024, open()), cap),
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

/// One Flate layer over `input` as lopdf decodes it: zlib under a zlib header (deflate,
/// a window lopdf's decoder takes, no preset dictionary, its check a multiple of 31),
/// else raw deflate after the two bytes that were not one (lopdf's fallback when zlib
/// gives nothing: a damaged header, an encrypted PDF's checksum). Nested, each layer
/// falls back on its own, as lopdf's do.
fn flate_layer<'a>(mut input: impl Read + 'a) -> Box<dyn Read + 'a> {
    use flate2::read::{DeflateDecoder, ZlibDecoder};
    let mut head = [0u8; 2];
    if input.read_exact(&mut head).is_err() {
        return Box::new(std::io::empty());
    }
    let zlib = head[0] & 0x0f == 8
        && head[0] >> 4 <= 7
        && head[1] & 0x20 == 0
        && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
    match zlib {
        true => Box::new(ZlibDecoder::new(std::io::Cursor::new(head).chain(input))),
        false => Box::new(DeflateDecoder::new(input)),
    }
}

/// How many bytes `decoder` gives before it ends, fails or passes `cap`.
fn counted(decoder: &mut impl Read, cap: u64) -> u64 {
    // Small: most streams a document holds fail within a few bytes.
    let mut sink = [0u8; 4 * 1024];
    let mut out: u64 = 0;
    loop {
        match decoder.read(&mut sink) {
            Ok(0) | Err(_) => return out,
            Ok(n) => {
                out += n as u64;
                if out > cap {
                    return out;
                }
            }
        }
    }
}

/// How many bytes an LZW stream (PDF's bit order and default `EarlyChange`, as lopdf
/// decodes it) inflates to, stopping past `cap`. Data that is not LZW gives little.
fn lzw_inflated(data: impl std::io::BufRead, cap: u64) -> u64 {
    struct Counter(u64, u64);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            if self.0 > self.1 {
                return Err(std::io::Error::other("past the cap"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0, cap);
    let mut decoder = weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
    let _ = decoder.into_stream(&mut counter).decode_all(data);
    counter.0
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `steward extract-worker <kind>`: the child side. Reads the document from stdin,
/// then confines itself ([`Program::confined`](crate::sandbox::seccomp::Program::confined))
/// and writes the text to stdout; exits 2 with the reason on stderr when the file is
/// bad, 4 when it cannot be confined.
pub fn worker_main(kind: &str) -> std::process::ExitCode {
    let Some(kind) = DocKind::from_label(kind) else {
        eprintln!("unknown document kind '{kind}'");
        return std::process::ExitCode::from(2);
    };
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("cannot read the document: {e}");
        return std::process::ExitCode::from(2);
    }
    // Everything the worker reads is read: from here it only computes and writes to
    // its pipes (no file, socket, program or signal to another process).
    #[cfg(unix)]
    if let Err(e) = crate::sandbox::seccomp::Program::confined().install() {
        eprintln!("cannot confine the extraction worker: {e}");
        return std::process::ExitCode::from(4);
    }
    match std::panic::catch_unwind(|| extract::extract_sync(kind, &bytes)) {
        Ok(Ok(text)) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_err() {
                return std::process::ExitCode::from(3);
            }
            std::process::ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("{e}");
            std::process::ExitCode::from(2)
        }
        Err(_) => std::process::ExitCode::from(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A PDF-shaped file with one Flate stream inflating to `size` zero bytes.
    pub fn pdf_bomb(size: usize) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let chunk = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len());
            z.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
        let data = z.finish().unwrap();
        let mut pdf = format!(
            "%PDF-1.4\n1 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
            data.len()
        )
        .into_bytes();
        pdf.extend_from_slice(&data);
        pdf.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
        pdf
    }

    #[test]
    fn inflation_is_counted_and_capped() {
        let bomb = pdf_bomb(64 << 20);
        assert!(bomb.len() < 200_000, "the bomb is small: {}", bomb.len());
        assert_eq!(
            check_inflation(DocKind::Pdf, &bomb, 16 << 20),
            Err(ExtractError::TooLarge {
                kind: "PDF",
                limit: 16 << 20
            })
        );
        assert_eq!(check_inflation(DocKind::Pdf, &bomb, 128 << 20), Ok(()));
        assert_eq!(check_inflation(DocKind::Pdf, b"%PDF-1.4 no streams", 10), Ok(()));
    }

    #[tokio::test]
    async fn a_document_waits_for_a_slot_no_longer_than_an_extraction_may_take() {
        let extractor = Extractor {
            timeout: Duration::from_millis(50),
            slots: Arc::new(tokio::sync::Semaphore::new(1)),
            ..Extractor::default()
        };
        let held = extractor.slots.clone().acquire_owned().await.unwrap();
        let html = Arc::new(b"<p>hi</p>".to_vec());
        assert_eq!(
            extractor.extract(DocKind::Html, html.clone()).await,
            Err(ExtractError::Busy(Duration::from_millis(50)))
        );
        drop(held);
        assert_eq!(extractor.extract(DocKind::Html, html).await.unwrap(), "hi\n");
    }

    fn too_large(limit: u64) -> Result<(), ExtractError> {
        Err(ExtractError::TooLarge { kind: "PDF", limit })
    }

    /// lopdf reads a Flate stream whose zlib header is damaged as raw deflate, and
    /// decodes LZW: the pre-scan counts both the same way.
    #[test]
    fn a_damaged_header_or_lzw_does_not_hide_a_bomb() {
        let mut damaged = pdf_bomb(32 << 20);
        let data = damaged.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
        damaged[data] = 0;
        damaged[data + 1] = 0;
        assert_eq!(
            check_inflation(DocKind::Pdf, &damaged, 8 << 20),
            too_large(8 << 20)
        );

        let mut encoder = weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
        let lzw = encoder.encode(&vec![0u8; 32 << 20]).unwrap();
        let mut pdf = format!(
            "%PDF-1.4\n1 0 obj\n<< /Length {} /Filter /LZWDecode >>\nstream\n",
            lzw.len()
        )
        .into_bytes();
        pdf.extend_from_slice(&lzw);
        pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        assert!(
            pdf.len() < 2 << 20,
            "smaller than what it inflates to: {}",
            pdf.len()
        );
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, 8 << 20), too_large(8 << 20));
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, 64 << 20), Ok(()));

        // Flate inside Flate: the outer layer inflates to little, the inner to much.
        let bomb = pdf_bomb(32 << 20);
        let data_at = bomb.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
        let end = bomb.windows(10).position(|w| w == b"\nendstream").unwrap();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&bomb[data_at..end]).unwrap();
        let twice = z.finish().unwrap();
        let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter [/FlateDecode /FlateDecode] >>\nstream\n".to_vec();
        pdf.extend_from_slice(&twice);
        pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, 8 << 20), too_large(8 << 20));
        // A harmless stream first, the bomb second: every stream is counted.
        let harmless = {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(b"BT (hello) Tj ET").unwrap();
            z.finish().unwrap()
        };
        let mut two = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\n".to_vec();
        two.extend_from_slice(&harmless);
        two.extend_from_slice(b"\nendstream\nendobj\n2 0 obj\n<< /Filter /LZWDecode >>\nstream\n");
        two.extend_from_slice(&lzw);
        two.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        assert_eq!(check_inflation(DocKind::Pdf, &two, 8 << 20), too_large(8 << 20));
        // Opened wide, the cap's arithmetic does not overflow.
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, u64::MAX), Ok(()));
    }

    /// lopdf starts a stream's data after spaces or tabs and a lone `\r` too, and falls
    /// back to raw deflate layer by layer: a raw outer layer over a zlib bomb counts.
    #[test]
    fn every_end_of_line_and_each_layers_fallback_count() {
        let bomb = pdf_bomb(32 << 20);
        let data_at = bomb.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
        let end = bomb.windows(10).position(|w| w == b"\nendstream").unwrap();
        let zlib = &bomb[data_at..end];
        let pdf = |eol: &[u8], data: &[u8]| {
            let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream".to_vec();
            pdf.extend_from_slice(eol);
            pdf.extend_from_slice(data);
            pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
            pdf
        };
        for eol in [&b" \r"[..], b"\t\r\n", b"\r"] {
            assert_eq!(
                check_inflation(DocKind::Pdf, &pdf(eol, zlib), 8 << 20),
                too_large(8 << 20),
                "{eol:?}"
            );
        }
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        raw.write_all(zlib).unwrap();
        let mut layered = b"\0\0".to_vec();
        layered.extend_from_slice(&raw.finish().unwrap());
        assert_eq!(
            check_inflation(DocKind::Pdf, &pdf(b"\n", &layered), 8 << 20),
            too_large(8 << 20)
        );
    }

    /// ASCII85 text as PDF writers make it (groups of five, `~>` at the end).
    fn ascii85(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in data.chunks(4) {
            let mut group = [0u8; 4];
            group[..chunk.len()].copy_from_slice(chunk);
            let mut value = u32::from_be_bytes(group);
            let mut digits = [0u8; 5];
            for d in digits.iter_mut().rev() {
                *d = (value % 85) as u8 + b'!';
                value /= 85;
            }
            out.extend_from_slice(&digits[..chunk.len() + 1]);
        }
        out.extend_from_slice(b"~>");
        out
    }

    /// lopdf decodes ASCII85 before the filters after it: a Flate bomb written as
    /// ASCII85 text is counted as the bomb it is.
    #[test]
    fn ascii85_does_not_hide_a_bomb() {
        let bomb = pdf_bomb(32 << 20);
        let data_at = bomb.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
        let end = bomb.windows(10).position(|w| w == b"\nendstream").unwrap();
        let text = ascii85(&bomb[data_at..end]);
        let mut decoded = Vec::new();
        super::super::ascii85::Ascii85::new(&text)
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, &bomb[data_at..end], "the reader undoes the encoding");
        let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter [/ASCII85Decode /FlateDecode] >>\nstream\n".to_vec();
        pdf.extend_from_slice(&text);
        pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, 8 << 20), too_large(8 << 20));
        assert_eq!(check_inflation(DocKind::Pdf, &pdf, 64 << 20), Ok(()));
        // Many stream keywords with no end: each text stops at the next keyword, so
        // the scan stays linear.
        let many = b"%PDF-1.4\n"
            .iter()
            .chain(b"stream\n\xff".repeat(20_000).iter())
            .copied()
            .collect::<Vec<u8>>();
        assert_eq!(check_inflation(DocKind::Pdf, &many, 1 << 20), Ok(()));
        // ASCII85 text full of stream keywords would be read again from each: past
        // twice the document, it is refused rather than let through unread.
        let overlapping = b"stream\n".repeat(1000);
        assert!(matches!(
            check_inflation(DocKind::Pdf, &overlapping, 1 << 20),
            Err(ExtractError::Malformed { .. })
        ));
        let too_many = b"stream\n\xff".repeat(MAX_PDF_STREAMS + 1);
        assert!(matches!(
            check_inflation(DocKind::Pdf, &too_many, 1 << 20),
            Err(ExtractError::Malformed { .. })
        ));
        // Plain text streams (not ASCII85, or ASCII85 of something small) pass.
        let mut page = b"%PDF-1.4\n1 0 obj\n<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 712 Td (Hello world) Tj ET\nendstream\nendobj\n".to_vec();
        page.extend_from_slice(b"%%EOF\n");
        assert_eq!(check_inflation(DocKind::Pdf, &page, 1 << 20), Ok(()));
    }
}
