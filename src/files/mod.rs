//! Virtual files: every attachment, large tool output, extracted document and compacted
//! transcript of a run is a file with an id (`f_1`, `f_2`, ...). The model sees only
//! metadata and reads what it needs through the file tools.

mod ascii85;
pub mod extract;
pub mod extractor;
pub mod mime;
pub mod ranges;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use ranges::ReadState;

use crate::store::{Store, StoreError, StoredFile};
use crate::tokens::{Encoding, TokenCounter};

/// Where a file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileSource {
    Attachment,
    ToolOutput,
    Extracted,
    CompactedContext,
    Message,
    /// Written by a sandboxed skill script.
    ScriptOutput,
    /// What one person's search found (with their own access): kept with its run, never
    /// carried into later runs of the conversation, which others may start.
    SearchResults,
}

impl FileSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FileSource::Attachment => "attachment",
            FileSource::ToolOutput => "tool output",
            FileSource::Extracted => "extracted",
            FileSource::CompactedContext => "compacted context",
            FileSource::Message => "message",
            FileSource::ScriptOutput => "script output",
            FileSource::SearchResults => "search results",
        }
    }
}

/// What the model (and the run record) knows about a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size_bytes: u64,
    pub size_tokens: u64,
    pub tokens_estimated: bool,
    /// Line count for text files; 0 for binary ones.
    pub lines: u64,
    pub text: bool,
    pub source: FileSource,
    pub read: ReadState,
    /// For extracted files, the file they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<String>,
}

impl FileMeta {
    /// One line for the status message and file listings.
    pub fn describe(&self) -> String {
        let tokens = if self.tokens_estimated {
            format!("~{}", self.size_tokens)
        } else {
            self.size_tokens.to_string()
        };
        let lines = if self.text {
            format!(", {} lines", self.lines)
        } else {
            String::new()
        };
        format!(
            "{} {} ({}, {} bytes, {} tokens{}, {}); read: {}",
            self.id,
            self.name,
            self.mime,
            self.size_bytes,
            tokens,
            lines,
            self.source.as_str(),
            self.read.describe()
        )
    }
}

/// A file to add.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub name: String,
    pub mime: String,
    pub content: Vec<u8>,
}

/// What part of a file was read.
#[derive(Debug, Clone, Copy)]
pub enum ReadKind {
    Whole,
    Lines(u64, u64),
    Bytes(u64, u64),
}

/// A failure of a file operation that the model should see.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("unknown file id '{id}'; known files: {known}")]
    Unknown { id: String, known: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

struct Entry {
    meta: FileMeta,
    content: Arc<Vec<u8>>,
}

/// Most bytes one run's files hold together. Each is at most an attachment's or a
/// fetch's cap (20 MiB), but a run that fetched or made file after file would otherwise
/// hold them all in memory, up to 20 MiB × `max_tool_calls`, per run at once.
pub const MAX_RUN_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The files of one run. Cheap to share (`Arc`); every change is written to the store
/// (except for private runs, whose files stay in memory).
pub struct RunFiles {
    run_id: String,
    store: Option<Arc<dyn Store>>,
    tokens: Arc<TokenCounter>,
    encoding: Encoding,
    entries: Mutex<Vec<Entry>>,
    /// Largest read a file tool may put into context (the file threshold).
    pub max_read_tokens: u64,
    /// Tokens left before compaction; set by the coordinator every turn.
    budget: AtomicU64,
    /// How documents among these files are extracted (bounds, worker process).
    extractor: Arc<extractor::Extractor>,
    /// Set once the run holds private content: files made from then on stay in memory.
    in_memory: std::sync::atomic::AtomicBool,
    /// [`MAX_RUN_FILE_BYTES`] (smaller in tests).
    max_bytes: u64,
}

impl RunFiles {
    pub fn new(
        run_id: &str,
        store: Option<Arc<dyn Store>>,
        tokens: Arc<TokenCounter>,
        encoding: Encoding,
        max_read_tokens: u64,
    ) -> Self {
        RunFiles {
            run_id: run_id.to_string(),
            store,
            tokens,
            encoding,
            entries: Mutex::new(Vec::new()),
            max_read_tokens,
            budget: AtomicU64::new(u64::MAX),
            extractor: Default::default(),
            in_memory: Default::default(),
            max_bytes: MAX_RUN_FILE_BYTES,
        }
    }

    /// These files with a smaller cap than [`MAX_RUN_FILE_BYTES`].
    #[cfg(test)]
    pub(crate) fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Why `bytes` more would not fit among this run's files, if they would not.
    pub fn room_for(&self, bytes: u64) -> Result<(), String> {
        let held: u64 = self.lock().iter().map(|e| e.content.len() as u64).sum();
        self.fits(held, bytes)
    }

    fn fits(&self, held: u64, bytes: u64) -> Result<(), String> {
        if held.saturating_add(bytes) <= self.max_bytes {
            return Ok(());
        }
        let mb = |b: u64| b.div_ceil(1024 * 1024);
        Err(format!(
            "this run's files hold {} MB, and {} MB more would pass {} MB, the most one run keeps; \
             work from the files it has (file_regex, file_read), or start a new run",
            mb(held),
            mb(bytes),
            mb(self.max_bytes)
        ))
    }

    /// From now on, new files of this run stay in memory (the run read a private
    /// conversation); those already stored hold nothing private.
    pub fn keep_in_memory(&self) {
        self.in_memory.store(true, Ordering::SeqCst);
    }

    /// Extracts documents with `extractor` instead of the in-process default.
    pub fn with_extractor(mut self, extractor: Arc<extractor::Extractor>) -> Self {
        self.extractor = extractor;
        self
    }

    pub fn extractor(&self) -> &extractor::Extractor {
        &self.extractor
    }

    /// Reloads the files of a run from the store (after a restart).
    pub async fn restore(&self) -> Result<(), StoreError> {
        let Some(store) = &self.store else { return Ok(()) };
        let files = store.run_files(&self.run_id).await?;
        let mut entries = self.lock();
        entries.clear();
        for f in files {
            let meta = serde_json::from_value(f.meta)
                .map_err(|e| StoreError::Corrupt(format!("file {} of run {}: {e}", f.id, self.run_id)))?;
            entries.push(Entry {
                meta,
                content: Arc::new(f.content),
            });
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn tokens(&self) -> &TokenCounter {
        &self.tokens
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    pub fn set_budget(&self, tokens: u64) {
        self.budget.store(tokens, Ordering::Relaxed);
    }

    /// Tokens that may still enter the context before compaction.
    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Adds a file and persists it; returns its metadata with the new id.
    pub async fn add(
        &self,
        file: NewFile,
        source: FileSource,
        derived_from: Option<&str>,
    ) -> Result<FileMeta, StoreError> {
        let is_text =
            mime::is_textual(&file.mime, &file.content) && std::str::from_utf8(&file.content).is_ok();
        let content = Arc::new(file.content);
        let text = if is_text {
            std::str::from_utf8(&content).ok()
        } else {
            None
        };
        let (count, lines) = match text {
            Some(t) => (self.tokens.count(self.encoding, t), line_count(t)),
            None => (
                crate::tokens::Count {
                    tokens: (content.len() as u64).div_ceil(4),
                    estimated: true,
                },
                0,
            ),
        };
        let meta = {
            let mut entries = self.lock();
            let held = entries.iter().map(|e| e.content.len() as u64).sum();
            self.fits(held, content.len() as u64).map_err(StoreError::Full)?;
            // After the highest id held: a subagent's files keep its parent's ids
            // (`f_2` alone), so a count would hand out an id already taken.
            let next = entries
                .iter()
                .filter_map(|e| e.meta.id.strip_prefix("f_")?.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
                + 1;
            let meta = FileMeta {
                id: format!("f_{next}"),
                name: file.name,
                mime: file.mime,
                size_bytes: content.len() as u64,
                size_tokens: count.tokens,
                tokens_estimated: count.estimated,
                lines,
                text: text.is_some(),
                source,
                read: ReadState::default(),
                derived_from: derived_from.map(str::to_string),
            };
            entries.push(Entry {
                meta: meta.clone(),
                content: content.clone(),
            });
            meta
        };
        if let Some(store) = &self.store
            && !self.in_memory.load(Ordering::SeqCst)
        {
            let stored = StoredFile {
                id: meta.id.clone(),
                meta: meta_json(&meta)?,
                content: content.to_vec(),
            };
            store.put_file(&self.run_id, &stored).await?;
        }
        Ok(meta)
    }

    /// The file's metadata and content.
    pub fn get(&self, id: &str) -> Result<(FileMeta, Arc<Vec<u8>>), FileError> {
        let entries = self.lock();
        match entries.iter().find(|e| e.meta.id == id) {
            Some(e) => Ok((e.meta.clone(), e.content.clone())),
            None => {
                let known: Vec<&str> = entries.iter().map(|e| e.meta.id.as_str()).collect();
                Err(FileError::Unknown {
                    id: id.to_string(),
                    known: if known.is_empty() {
                        "(none)".into()
                    } else {
                        known.join(", ")
                    },
                })
            }
        }
    }

    /// A file extracted earlier from `id`, if any.
    pub fn derived(&self, id: &str) -> Option<FileMeta> {
        self.lock()
            .iter()
            .find(|e| e.meta.derived_from.as_deref() == Some(id))
            .map(|e| e.meta.clone())
    }

    pub fn list(&self) -> Vec<FileMeta> {
        self.lock().iter().map(|e| e.meta.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Records that part of a file entered the context.
    pub async fn mark_read(&self, id: &str, kind: ReadKind) -> Result<(), StoreError> {
        let meta = {
            let mut entries = self.lock();
            let Some(e) = entries.iter_mut().find(|e| e.meta.id == id) else {
                return Ok(());
            };
            match kind {
                ReadKind::Whole => e.meta.read.whole = true,
                ReadKind::Lines(a, b) => e.meta.read.add_lines(a, b),
                ReadKind::Bytes(a, b) => e.meta.read.add_bytes(a, b),
            }
            e.meta.clone()
        };
        if let Some(store) = &self.store {
            store
                .update_file(&self.run_id, &meta.id, &meta_json(&meta)?)
                .await?;
        }
        Ok(())
    }

    /// A view for a subagent holding only `ids`, with their ids and read state.
    pub fn subset(
        &self,
        ids: &[String],
        run_id: &str,
        store: Option<Arc<dyn Store>>,
    ) -> Result<RunFiles, FileError> {
        let child = RunFiles::new(
            run_id,
            store,
            self.tokens.clone(),
            self.encoding,
            self.max_read_tokens,
        )
        .with_extractor(self.extractor.clone());
        {
            let mut out = child.lock();
            for id in ids {
                let (meta, content) = self.get(id)?;
                out.push(Entry { meta, content });
            }
        }
        Ok(child)
    }
}

/// Lines as a reader counts them: a trailing newline does not start a new line.
pub fn line_count(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let n = text.bytes().filter(|&b| b == b'\n').count() as u64;
    if text.ends_with('\n') { n } else { n + 1 }
}

/// File metadata as the store keeps it.
fn meta_json(meta: &FileMeta) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(meta).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod cap_tests {
    use super::*;

    fn files(max_bytes: u64) -> RunFiles {
        RunFiles::new("r", None, Arc::new(TokenCounter::new()), Encoding::O200k, 10_000)
            .with_max_bytes(max_bytes)
    }

    fn text(n: usize) -> NewFile {
        NewFile {
            name: "out.txt".into(),
            mime: "text/plain".into(),
            content: vec![b'x'; n],
        }
    }

    /// A run's files hold at most the cap together: the file that would pass it is
    /// refused with the reason, and what the run holds stays.
    #[tokio::test]
    async fn a_runs_files_stop_at_the_cap() {
        let files = files(3 * 1024 * 1024);
        files
            .add(text(2 * 1024 * 1024), FileSource::ToolOutput, None)
            .await
            .unwrap();
        assert!(files.room_for(1024 * 1024).is_ok());
        let why = files.room_for(1024 * 1024 + 1).unwrap_err();
        assert_eq!(
            why,
            "this run's files hold 2 MB, and 2 MB more would pass 3 MB, the most one run keeps; \
             work from the files it has (file_regex, file_read), or start a new run"
        );
        let refused = files
            .add(text(1024 * 1024 + 1), FileSource::ToolOutput, None)
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("the most one run keeps"),
            "{refused}"
        );
        assert!(files.get("f_1").is_ok() && files.get("f_2").is_err());
        files
            .add(text(1024 * 1024), FileSource::ToolOutput, None)
            .await
            .unwrap();
    }
}
