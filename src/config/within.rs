//! Files a config names (a prompt, a coordinator script, an eval case's attachment):
//! inside the config folder, regular, and bounded. An agent's YAML is written by one
//! team and read by a service that holds every team's keys: `prompt: /srv/steward/.env`
//! or `../../proc/self/environ` would send steward's own secrets to the model, and
//! `prompt: /dev/zero` would read until memory ran out.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Most bytes of a prompt or a coordinator script.
pub const MAX_TEXT_BYTES: u64 = 1024 * 1024;

/// Why a named file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WithinError {
    #[error(
        "'{0}' is outside the config folder: paths are relative to it, without '..', and a link may not lead out of it"
    )]
    Outside(String),
    #[error("'{0}' is not a regular file")]
    NotAFile(String),
    #[error("'{path}' is larger than {cap} bytes")]
    TooLarge { path: String, cap: u64 },
    #[error("'{path}' is not UTF-8 text")]
    NotText { path: String },
    #[error("cannot read '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `rel` under `root`, refused when it is absolute, climbs with `..`, or resolves
/// (through links) outside `root`.
pub fn resolve(root: &Path, rel: &Path) -> Result<PathBuf, WithinError> {
    let shown = || rel.display().to_string();
    if !rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(WithinError::Outside(shown()));
    }
    let io = |source| WithinError::Io {
        path: shown(),
        source,
    };
    let base = root.canonicalize().map_err(io)?;
    let full = root.join(rel).canonicalize().map_err(io)?;
    if !full.starts_with(&base) {
        return Err(WithinError::Outside(shown()));
    }
    Ok(full)
}

/// The bytes of `rel` under `root` (see [`resolve`]): a regular file of at most `cap`
/// bytes. The resolved path is opened without following a link and without waiting
/// (a pipe swapped in after the check does not block), and what was opened is checked.
pub fn read_bytes(root: &Path, rel: &Path, cap: u64) -> Result<Vec<u8>, WithinError> {
    use std::os::unix::fs::OpenOptionsExt;
    let full = resolve(root, rel)?;
    let shown = || rel.display().to_string();
    let io = |source| WithinError::Io {
        path: shown(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&full)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(WithinError::NotAFile(shown()));
    }
    if meta.len() > cap {
        return Err(WithinError::TooLarge { path: shown(), cap });
    }
    let mut out = Vec::new();
    file.take(cap + 1).read_to_end(&mut out).map_err(io)?;
    // It grew between the look and the read.
    if out.len() as u64 > cap {
        return Err(WithinError::TooLarge { path: shown(), cap });
    }
    Ok(out)
}

/// The text of `rel` under `root`: as [`read_bytes`], at most [`MAX_TEXT_BYTES`], UTF-8.
pub fn read_text(root: &Path, rel: &Path) -> Result<String, WithinError> {
    read_text_at_most(root, rel, MAX_TEXT_BYTES)
}

/// [`read_text`] with its own cap (an eval case holds its recorded tool results).
pub fn read_text_at_most(root: &Path, rel: &Path, cap: u64) -> Result<String, WithinError> {
    let bytes = read_bytes(root, rel, cap)?;
    String::from_utf8(bytes).map_err(|_| WithinError::NotText {
        path: rel.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_root_are_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("config");
        std::fs::create_dir_all(root.join("prompts")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("prompts/p.md"), "hello").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(".env"), "SLACK_BOT_TOKEN=xoxb").unwrap_or_else(|e| panic!("{e}"));
        let read = |p: &str| read_text(&root, Path::new(p));
        assert_eq!(read("prompts/p.md").unwrap_or_else(|e| panic!("{e}")), "hello");
        assert_eq!(read("./prompts/p.md").unwrap_or_else(|e| panic!("{e}")), "hello");
        for outside in ["../.env", "prompts/../../.env", "/etc/passwd"] {
            assert!(
                matches!(read(outside), Err(WithinError::Outside(_))),
                "{outside}: {:?}",
                read(outside)
            );
        }
        // A link inside the folder that leads out of it.
        std::os::unix::fs::symlink(dir.path().join(".env"), root.join("prompts/env.md"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read("prompts/env.md"), Err(WithinError::Outside(_))));
        // A link to a device inside is not a file (and is never opened).
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read("zero"), Err(WithinError::Outside(_))));
        std::fs::create_dir_all(root.join("folder")).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read("folder"), Err(WithinError::NotAFile(_))));
        std::fs::write(root.join("big.md"), vec![b'x'; 2 << 20]).unwrap_or_else(|e| panic!("{e}"));
        let too_large = read("big.md").map(|_| ()).unwrap_err().to_string();
        assert_eq!(too_large, "'big.md' is larger than 1048576 bytes");
        assert!(matches!(read("missing.md"), Err(WithinError::Io { .. })));
    }
}
