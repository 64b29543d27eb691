//! Folders only steward's user may enter: the scripts' work folders and the skill
//! requirements cache default to shared places (`/tmp`, a cache folder) where anyone on
//! the host could make the name first and then read a run's input files or plant
//! "installed" requirements that every run of a skill would load.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` (and its parents) when missing, and makes sure nobody else can change
/// what is in it: a real folder (not a link), owned by this process's user (or by root
/// and writable by root alone), and then mode 0700 when it is ours. Anything else is an
/// error naming the folder and its owner.
pub fn ensure(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    let refuse = |why: String| std::io::Error::other(format!("{}: {why}", dir.display()));
    if !meta.file_type().is_dir() {
        return Err(refuse("not a folder (a link or a file stands there)".into()));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == me {
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        return Ok(());
    }
    if meta.uid() == 0 && meta.mode() & 0o022 == 0 {
        return Ok(());
    }
    Err(refuse(format!(
        "belongs to user {} (steward runs as {me}) and others may change it: someone may have made it first; remove it, or point steward at a folder of its own",
        meta.uid()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_made_private_and_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        ensure(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        ensure(&dir).unwrap();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o777,
            0o700,
            "tightened again"
        );
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = ensure(&link).unwrap_err().to_string();
        assert!(
            err.ends_with("not a folder (a link or a file stands there)"),
            "{err}"
        );
        // A folder another user made first (only root can stage that here).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = root.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let err = ensure(&theirs).unwrap_err().to_string();
            assert!(
                err.contains("belongs to user 65534 (steward runs as 0) and others may change it"),
                "{err}"
            );
        }
    }
}
