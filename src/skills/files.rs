//! The files a skill ships besides its `SKILL.md`, with which are binary (fonts,
//! images, archives), so they are listed as such and never offered as text.

use std::io::Read;
use std::path::Path;

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Relative to the skill's folder, with `/` separators.
    pub path: String,
    pub bytes: u64,
    pub binary: bool,
}

/// Extensions that are binary whatever their first bytes look like.
const BINARY_EXTENSIONS: &[&str] = &[
    "ttf", "otf", "woff", "woff2", "png", "jpg", "jpeg", "gif", "webp", "ico", "pdf", "zip", "gz", "tar",
    "xlsx", "docx", "pptx", "bin", "so", "pyc", "wasm",
];

/// Every file under `dir` except its instructions file `skill_md`, sorted. Links are
/// listed only when they stay inside the folder.
pub fn inventory(dir: &Path, skill_md: &str) -> Vec<SkillFile> {
    let mut out = Vec::new();
    let base = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    collect(&base, &base, &mut out);
    out.retain(|f| f.path != skill_md);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn collect(base: &Path, dir: &Path, out: &mut Vec<SkillFile>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(path) = e.path().canonicalize() else {
            continue;
        };
        if !path.starts_with(base) {
            continue;
        }
        if path.is_dir() {
            collect(base, &path, out);
        } else if let Ok(rel) = e.path().strip_prefix(base) {
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            out.push(SkillFile {
                path: rel.to_string_lossy().replace('\\', "/"),
                bytes,
                binary: is_binary(&path),
            });
        }
    }
}

/// Binary by extension, or by a NUL or invalid UTF-8 in the first 8 KiB.
fn is_binary(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if BINARY_EXTENSIONS.contains(&ext.as_str()) {
        return true;
    }
    let mut head = Vec::with_capacity(8192);
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(8192).read_to_end(&mut head).is_err() {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(&head) {
        Ok(_) => false,
        // A multi-byte character cut at the 8 KiB boundary is still text.
        Err(e) => e.error_len().is_some(),
    }
}
