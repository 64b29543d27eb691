//! Per-run cgroups of the script sandbox: a pids cgroup holds a run's processes to its
//! process limit, and, where the host offers a writable memory cgroup, a memory cgroup
//! holds them together to its memory limit (`RLIMIT_AS` alone bounds each process, so
//! 64 processes could otherwise take 64 times the limit). Each run's folders are
//! removed, and anything left in them killed, when the run ends.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The folders runs' cgroups are made in: `pids` always; `memory` on cgroup v1 (its own
/// hierarchy). On v2 the memory controller, when enabled, is in the pids folder itself.
#[derive(Debug, Clone)]
pub(super) struct CgroupBase {
    pids: PathBuf,
    memory: Option<PathBuf>,
}

impl CgroupBase {
    /// The writable cgroup folders of this host for sandbox runs, if it offers a pids
    /// cgroup (cgroup v1's `pids` hierarchy, or v2 with `pids` delegated to us).
    pub(super) fn detect() -> Option<CgroupBase> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let pids = find_base(&own, "pids", |base, name| {
            let probe = RunCgroup::create_dir(base, name).ok()?;
            let works =
                probe.join("cgroup.procs").exists() && std::fs::write(probe.join("pids.max"), "1").is_ok();
            remove(&probe);
            works.then_some(())
        })?;
        // v1 only: on v2 the same folder carries `memory.max` when the controller is on.
        let memory = find_base(&own, "memory", |base, name| {
            if base.starts_with("/sys/fs/cgroup/memory") {
                let probe = RunCgroup::create_dir(base, name).ok()?;
                let works = std::fs::write(probe.join("memory.limit_in_bytes"), "67108864").is_ok();
                remove(&probe);
                works.then_some(())
            } else {
                None
            }
        });
        Some(CgroupBase { pids, memory })
    }
}

impl CgroupBase {
    /// Whether runs get a memory limit for all their processes together: a v1 memory
    /// hierarchy, or a v2 folder with the memory controller enabled.
    pub(super) fn limits_memory(&self) -> bool {
        self.memory.is_some() || v2_memory_delegated(&self.pids)
    }
}

/// Whether v2 children of `base` get the memory controller.
fn v2_memory_delegated(base: &Path) -> bool {
    std::fs::read_to_string(base.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"))
}

/// The first `steward-sandbox` folder under this process's own cgroup for `controller`
/// (its v1 hierarchy, else the v2 unified one) that `works` accepts a probe in.
fn find_base(own: &str, controller: &str, works: impl Fn(&Path, &str) -> Option<()>) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == controller) {
            candidates.push(Path::new("/sys/fs/cgroup").join(controller).join(path));
        } else if controllers.is_empty() {
            candidates.push(Path::new("/sys/fs/cgroup").join(path));
        }
    }
    candidates.into_iter().find_map(|parent| {
        let base = parent.join("steward-sandbox");
        std::fs::create_dir_all(&base).ok()?;
        // Unique per probe: several sandboxes may be probed at once in one process.
        let name = format!("probe-{}", uuid::Uuid::now_v7().simple());
        works(&base, &name).map(|()| base)
    })
}

/// One run's cgroups, removed when dropped (also when the run is cancelled).
#[derive(Debug)]
pub(super) struct RunCgroup {
    /// The folders the run's processes join: the pids one, then a v1 memory one.
    dirs: Vec<PathBuf>,
    /// The folder whose `memory.*` files hold the run's memory limit, when one does.
    memory: Option<PathBuf>,
}

impl RunCgroup {
    /// Folders named `id` under `base`, limited to `max_processes` processes (plus
    /// bubblewrap and the namespace's init) and, where the host allows, `memory_bytes`
    /// of memory (and swap) for all of them together.
    pub(super) fn create(
        base: &CgroupBase,
        id: &str,
        max_processes: u64,
        memory_bytes: u64,
    ) -> std::io::Result<RunCgroup> {
        let pids = Self::create_dir(&base.pids, id)?;
        let mut cg = RunCgroup {
            dirs: vec![pids.clone()],
            memory: None,
        };
        std::fs::write(pids.join("pids.max"), (max_processes + 2).to_string())?;
        let limit = memory_bytes.to_string();
        if let Some(memory_base) = &base.memory {
            let dir = Self::create_dir(memory_base, id)?;
            cg.dirs.push(dir.clone());
            std::fs::write(dir.join("memory.limit_in_bytes"), &limit)?;
            // Memory plus swap, where swap is accounted; never below the first.
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &limit);
            cg.memory = Some(dir);
        } else if pids.join("memory.max").exists() {
            std::fs::write(pids.join("memory.max"), &limit)?;
            let _ = std::fs::write(pids.join("memory.swap.max"), "0");
            cg.memory = Some(pids);
        }
        Ok(cg)
    }

    fn create_dir(base: &Path, id: &str) -> std::io::Result<PathBuf> {
        let dir = base.join(id);
        std::fs::create_dir(&dir)?;
        Ok(dir)
    }

    /// The `cgroup.procs` files a child writes itself into before exec.
    pub(super) fn procs_paths(&self) -> std::io::Result<Vec<CString>> {
        self.dirs
            .iter()
            .map(|d| {
                CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .map_err(std::io::Error::other)
            })
            .collect()
    }

    /// Whether the kernel killed a process of the run for passing its memory limit.
    pub(super) fn memory_killed(&self) -> bool {
        let Some(dir) = &self.memory else {
            return false;
        };
        // v1: `memory.oom_control`; v2: `memory.events`. Both say `oom_kill N`.
        ["memory.oom_control", "memory.events"].iter().any(|f| {
            std::fs::read_to_string(dir.join(f)).is_ok_and(|text| {
                text.lines().any(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse::<u64>().ok())
                        .is_some_and(|n| n > 0)
                })
            })
        })
    }
}

impl Drop for RunCgroup {
    /// Kills anything left and removes the folders.
    fn drop(&mut self) {
        for dir in &self.dirs {
            remove(dir);
        }
    }
}

/// Kills what is left in cgroup folder `dir` and removes it.
fn remove(dir: &Path) {
    for _ in 0..20 {
        if let Ok(pids) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: kill has no memory preconditions; the pid is in our cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if std::fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
