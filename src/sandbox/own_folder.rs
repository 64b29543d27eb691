//! One process's share of the scripts' work folder: `<base>/p-<id>/`, held by a lock on
//! `<base>/p-<id>.lock` for as long as the process lives. A run's input files (a private
//! run's attachment, say) are written there for its script, and removed when the script
//! ends; a process that dies first (killed, out of memory) leaves them behind. The next
//! process to start removes every share whose lock no one holds, so they do not stay at
//! rest, while processes that share the base (`serve` and a `steward run` beside it)
//! never touch each other's.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::remove::remove_all;

/// How old something of an earlier layout (a run folder straight under the base) must
/// be to be removed: older than any script may run.
const LEFTOVER_AGE: Duration = Duration::from_secs(24 * 3600);

/// A process's own folder under the base, locked while this value lives.
#[derive(Debug)]
pub struct OwnFolder {
    pub dir: PathBuf,
    /// Held for the process's life: the lock ends with the descriptor, however the
    /// process ends.
    _lock: File,
}

/// Removes what dead processes left under `base`, then claims a folder of this
/// process's own there. `base` must be steward's alone (`private_dir::ensure`).
pub fn claim(base: &Path) -> std::io::Result<OwnFolder> {
    sweep(base);
    let id = uuid::Uuid::now_v7().simple().to_string();
    // Locked under a name no sweep reads, then renamed into place: a sweep never sees
    // the lock file unlocked while its process lives.
    let fresh = base.join(format!("p-{id}.lock.new"));
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&fresh)?;
    if !try_lock(&lock) {
        return Err(std::io::Error::other("cannot lock a new file of its own"));
    }
    std::fs::rename(&fresh, base.join(format!("p-{id}.lock")))?;
    let dir = base.join(format!("p-{id}"));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(OwnFolder { dir, _lock: lock })
}

/// Whether an exclusive lock on `file` was taken without waiting.
fn try_lock(file: &File) -> bool {
    // SAFETY: `file` holds an open descriptor for the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Removes the shares of processes that are gone (their lock free), and run folders of
/// an earlier layout older than a day. Best effort: what cannot be removed stays.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_prefix("p-").and_then(|n| n.strip_suffix(".lock")) {
            let Ok(lock) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(entry.path())
            else {
                continue;
            };
            if try_lock(&lock) {
                // Held while removing, so no one else sweeps it at the same time; kept
                // when the folder stays, so the next start tries again.
                if remove_all(&base.join(format!("p-{id}"))).is_ok() {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        } else if name.ends_with(".lock.new") && old(&entry) {
            // A process that died between making its lock and taking it.
            let _ = std::fs::remove_file(entry.path());
        } else if !name.starts_with("p-") && !name.starts_with("proxy-") && old(&entry) {
            let _ = remove_all(&entry.path());
        }
    }
}

fn old(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > LEFTOVER_AGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live process's folder is kept; a dead one's (its lock free) is removed with
    /// the files in it.
    #[test]
    fn folders_of_dead_processes_are_swept_and_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        let live = claim(base.path()).unwrap();
        std::fs::write(live.dir.join("input.pdf"), "private").unwrap();
        let dead = claim(base.path()).unwrap();
        let dead_dir = dead.dir.clone();
        std::fs::write(dead_dir.join("input.pdf"), "private").unwrap();
        // A script that locked its folder against steward does not keep it on disk.
        std::fs::create_dir(dead_dir.join("kept")).unwrap();
        std::fs::write(dead_dir.join("kept/input.pdf"), "private").unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dead_dir.join("kept"), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        drop(dead);
        let third = claim(base.path()).unwrap();
        assert!(live.dir.join("input.pdf").exists(), "a live process's files stay");
        assert!(!dead_dir.exists(), "a dead process's files are removed");
        assert!(third.dir.is_dir());
        let locks = std::fs::read_dir(base.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".lock"))
            .count();
        assert_eq!(locks, 2, "the dead one's lock is gone too");
    }
}
