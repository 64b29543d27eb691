//! Removing a script's work folder, whatever the script left in it: folders closed to
//! steward (`chmod 000`), links (removed, never followed) and trees nested tens of
//! thousands deep. `std::fs::remove_dir_all` recurses once per level on the calling
//! thread, so such a tree would overflow a worker thread's stack and abort the process;
//! here each folder's entries are moved up into the top folder before it is removed, so
//! nothing recurses and at most two folders are open at once.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// Entries read from a folder at a time.
const BATCH: usize = 4096;

/// Removes `dir` and everything in it (nothing when it is gone already; a file or link
/// at `dir` is removed itself).
pub fn remove_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(meta) if !meta.is_dir() => return std::fs::remove_file(dir),
        Ok(_) => {}
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let path = CString::new(dir.as_os_str().as_bytes())?;
    let top = open_dir(libc::AT_FDCWD, &path)?;
    empty(&top)?;
    drop(top);
    std::fs::remove_dir(dir)
}

/// Empties the folder `top` is open on: files and links are removed; a folder's entries
/// are moved up into `top` (under a name not taken there), then the folder is removed.
/// Each entry moves at most once.
fn empty(top: &OwnedFd) -> io::Result<()> {
    let mut fresh = 0u64;
    loop {
        let batch = entries(top)?;
        if batch.is_empty() {
            return Ok(());
        }
        for (name, is_dir) in batch {
            if !is_dir {
                unlink_at(top, &name, 0)?;
                continue;
            }
            let folder = open_dir(top.as_raw_fd(), &name)?;
            loop {
                let inner = entries(&folder)?;
                if inner.is_empty() {
                    break;
                }
                for (inner_name, inner_dir) in inner {
                    if inner_dir {
                        // Moving a folder rewrites its `..`: it must be writable.
                        give_back(folder.as_raw_fd(), &inner_name);
                    }
                    move_up(&folder, &inner_name, top, &mut fresh)?;
                }
            }
            drop(folder);
            unlink_at(top, &name, libc::AT_REMOVEDIR)?;
        }
    }
}

/// Opens the folder `name` under `parent` without following a link, giving it back to
/// steward's user first when the script closed it.
fn open_dir(parent: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let open = || {
        // SAFETY: `name` is a valid C string; the flags open a folder only.
        let fd = unsafe {
            libc::openat(
                parent,
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            give_back(parent, name);
            open()
        }
        other => other,
    }
}

/// Makes the folder `name` under `parent` steward's user's to read, write and enter,
/// never following a link: it is opened as a path only (`O_PATH`, which needs no
/// permission on it, with `O_NOFOLLOW` and `O_DIRECTORY`), and that very folder is
/// changed through `/proc/self/fd` (`fchmodat` would follow a link a script swapped in).
fn give_back(parent: RawFd, name: &CStr) {
    // SAFETY: `name` is a valid C string; the descriptor is this call's own and closed
    // here. Best effort: an open or move after it fails with the reason when this did
    // not help (no /proc, say).
    unsafe {
        let fd = libc::openat(
            parent,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        if let Ok(path) = CString::new(format!("/proc/self/fd/{fd}")) {
            libc::chmod(path.as_ptr(), 0o700);
        }
        libc::close(fd);
    }
}

/// Removes `name` under `dir` (`flags`: 0 or `AT_REMOVEDIR`); gone already is fine.
fn unlink_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: `name` is a valid C string and `dir` an open descriptor.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if e.kind() == io::ErrorKind::NotFound => Ok(()),
        e => Err(e),
    }
}

/// Moves `name` from `from` into `to` under a fresh name, one no script could have
/// made ahead (a random part: with only a counter, a script that made those names as
/// non-empty folders kept every move from landing). A name taken anyway is passed over.
fn move_up(from: &OwnedFd, name: &CStr, to: &OwnedFd, fresh: &mut u64) -> io::Result<()> {
    for _ in 0..1000 {
        *fresh += 1;
        let target = CString::new(format!(".steward-rm-{}-{fresh}", uuid::Uuid::now_v7().simple()))?;
        // SAFETY: both names are valid C strings and both descriptors open folders.
        let moved =
            unsafe { libc::renameat(from.as_raw_fd(), name.as_ptr(), to.as_raw_fd(), target.as_ptr()) };
        if moved == 0 {
            return Ok(());
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            e if matches!(
                e.raw_os_error(),
                Some(libc::EEXIST | libc::ENOTEMPTY | libc::ENOTDIR | libc::EISDIR)
            ) => {}
            e => return Err(e),
        }
    }
    Err(io::Error::other("no free name to move an entry to"))
}

/// A directory stream, closed when dropped.
struct Stream(*mut libc::DIR);

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream was opened by `fdopendir` and is closed once, here.
        unsafe { libc::closedir(self.0) };
    }
}

/// Up to [`BATCH`] entries of `dir` (not `.` or `..`), each with whether it is a
/// folder (a link is not).
fn entries(dir: &OwnedFd) -> io::Result<Vec<(CString, bool)>> {
    // A stream of its own (the duplicate shares the offset: rewound below).
    // SAFETY: `dir` is an open descriptor.
    let fd = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is an open folder descriptor the stream takes over.
    let raw = unsafe { libc::fdopendir(fd) };
    if raw.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: the stream did not take `fd`.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let stream = Stream(raw);
    // SAFETY: a valid stream.
    unsafe { libc::rewinddir(stream.0) };
    let mut out = Vec::new();
    while out.len() < BATCH {
        // `readdir` tells its end from an error only through errno.
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: a valid stream; the entry is read before the next call.
        let entry = unsafe { libc::readdir(stream.0) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            if e.raw_os_error().is_some_and(|n| n != 0) {
                return Err(e);
            }
            break;
        }
        // SAFETY: `d_name` is NUL-terminated within the entry.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        // SAFETY: as above.
        let is_dir = match unsafe { (*entry).d_type } {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => is_folder(dir, name),
            _ => false,
        };
        out.push((name.to_owned(), is_dir));
    }
    Ok(out)
}

/// Whether `name` under `dir` is a folder (not a link to one).
fn is_folder(dir: &OwnedFd, name: &CStr) -> bool {
    // SAFETY: zeroed is a valid `stat` for the call to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid C string, `st` a valid out-pointer.
    let ok =
        unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0;
    ok && st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` folders nested in `dir`, made one level at a time through descriptors
    /// (its path is far past `PATH_MAX`), with a file at the bottom.
    fn nest(dir: &Path, levels: usize) {
        let path = CString::new(dir.as_os_str().as_bytes()).unwrap();
        let mut at = open_dir(libc::AT_FDCWD, &path).unwrap();
        for _ in 0..levels {
            // SAFETY: valid names and descriptors.
            assert_eq!(unsafe { libc::mkdirat(at.as_raw_fd(), c"d".as_ptr(), 0o700) }, 0);
            at = open_dir(at.as_raw_fd(), c"d").unwrap();
        }
        // SAFETY: as above.
        let fd = unsafe {
            libc::openat(
                at.as_raw_fd(),
                c"f".as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o600,
            )
        };
        assert!(fd >= 0);
        // SAFETY: just opened.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn removes_a_deep_tree_on_a_small_stack_without_following_links() {
        let base = tempfile::tempdir().unwrap();
        let work = base.path().join("work");
        std::fs::create_dir(&work).unwrap();
        nest(&work, 30_000);
        // Links out of the folder are removed, what they point at kept.
        let outside = base.path().join("keep.txt");
        std::fs::write(&outside, "steward's own").unwrap();
        std::fs::create_dir(base.path().join("keep")).unwrap();
        std::fs::write(base.path().join("keep/inner.txt"), "kept").unwrap();
        std::os::unix::fs::symlink(&outside, work.join("link")).unwrap();
        std::os::unix::fs::symlink(base.path().join("keep"), work.join("dirlink")).unwrap();
        // Names a counter alone would pick, made ahead as non-empty folders.
        for n in 1..=1_100 {
            std::fs::create_dir_all(work.join(format!(".steward-rm-{n}/x"))).unwrap();
        }
        // A folder closed to its owner.
        std::fs::create_dir_all(work.join("closed/inside")).unwrap();
        std::fs::write(work.join("closed/inside/secret.txt"), "private input").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(work.join("closed"), std::fs::Permissions::from_mode(0o0)).unwrap();
        // 256 KiB: std's remove_dir_all overflows it well before 30,000 levels.
        let removed = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove_all(&work).map(|()| work))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(!removed.exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "steward's own");
        assert_eq!(
            std::fs::read_to_string(base.path().join("keep/inner.txt")).unwrap(),
            "kept"
        );
        // Gone already: fine.
        remove_all(&removed).unwrap();
    }
}
