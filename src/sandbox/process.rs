//! Sandboxed processes for skill scripts in Python, shell or Node. Each run is one
//! bubblewrap sandbox: new user, mount, PID, IPC, UTS, cgroup and network namespaces
//! (so no network at all), no capabilities, the system (`/usr` and the few `/etc`
//! files programs need) read-only, the skill's folder read-only at `/skill`, a private
//! work folder at `/work` holding the input files, a small `/tmp`, a `/proc` that shows
//! only the sandbox's own processes, and an environment with nothing of steward's.
//!
//! Limits: wall time (the sandbox is killed), CPU time and address space (rlimits),
//! memory of all the run's processes together (a memory cgroup, where the host offers
//! one: [`super::cgroup`]), processes (a pids cgroup, or `RLIMIT_NPROC` for a non-root
//! user), output (the
//! sandbox is killed once stdout or stderr passes the cap), and files written (size
//! per file by `RLIMIT_FSIZE`, count and total bytes of the work folder watched while
//! the script runs). Where any of this cannot be had, the sandbox says so once, at
//! start, and refuses to run scripts rather than run them with less.

use std::ffi::{CString, OsString};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::cgroup::{CgroupBase, RunCgroup};

/// Where programs are looked up, on the host and inside the sandbox alike.
const PROGRAM_DIRS: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// `/etc` entries a sandboxed program may need (the dynamic linker's cache, time zone,
/// Python's site configuration); nothing with secrets or accounts.
const ETC_ENTRIES: &[&str] = &[
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "fonts",
];

/// How often the work folder is measured while a script runs.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Size of the sandbox's `/dev/shm`.
const SHM_BYTES: u64 = 16 * 1024 * 1024;

/// Limits of one sandboxed run; each is configurable per agent (`skills.scripts`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLimits {
    pub wall: Duration,
    pub cpu_secs: u64,
    pub memory_bytes: u64,
    pub max_processes: u64,
    /// Kept of stdout and of stderr each; past it the sandbox is stopped.
    pub max_output_bytes: usize,
    /// Files (and folders) in the work folder.
    pub max_files: usize,
    /// Bytes in the work folder, and the size of `/tmp`.
    pub max_written_bytes: u64,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            wall: Duration::from_secs(60),
            cpu_secs: 60,
            memory_bytes: 1024 * 1024 * 1024,
            max_processes: 64,
            max_output_bytes: 1024 * 1024,
            max_files: 100,
            max_written_bytes: 64 * 1024 * 1024,
        }
    }
}

/// A file placed in the work folder, or one the script left there.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkFile {
    /// Relative to the work folder.
    pub name: String,
    pub content: Arc<Vec<u8>>,
}

/// One script to run.
pub struct Job<'a> {
    /// The skill's folder on the host (mounted read-only at `/skill`).
    pub skill_dir: &'a Path,
    /// The script, relative to the skill's folder.
    pub script: &'a str,
    /// The interpreter, an absolute path under the system folders.
    pub interpreter: &'a Path,
    pub args: &'a [String],
    pub stdin: Option<&'a str>,
    /// Files put into the work folder before the script starts.
    pub inputs: &'a [WorkFile],
    /// Installed packages (a skill's requirements: Python's site folder, or Node's
    /// `node_modules`), mounted read-only at `/deps` and named by `PYTHONPATH` and
    /// `NODE_PATH`.
    pub deps: Option<&'a Path>,
    /// The run's egress proxy (`http::proxy::Proxy`): with it, the script's
    /// `HTTP_PROXY` and `HTTPS_PROXY` reach it through the forwarder, the sandbox's only
    /// way out.
    pub proxy: Option<Egress<'a>>,
}

/// A sandbox's way out: its proxy's socket, and what the program needs to use it.
#[derive(Debug, Clone, Copy)]
pub struct Egress<'a> {
    pub socket: &'a Path,
    /// The trust bundle (PEM) for HTTPS the proxy opens to put secrets in: mounted at
    /// [`TRUST_BUNDLE`] and named by `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`,
    /// `CURL_CA_BUNDLE` and `NODE_EXTRA_CA_CERTS`.
    pub trust: Option<&'a Path>,
    /// Secret placeholders, by variable name.
    pub env: &'a [(String, String)],
}

/// Where the trust bundle is inside the sandbox.
pub const TRUST_BUNDLE: &str = "/run/steward/ca.pem";

/// The variables that point programs at the trust bundle (OpenSSL and Python's `ssl`,
/// requests, curl, Node).
const TRUST_VARS: [&str; 4] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

/// Where the script's proxy variables point, on the sandbox's loopback.
pub const PROXY_ADDR: &str = "127.0.0.1:3128";

/// What a sandbox with egress runs first: the forwarder, then (after `--`) the program.
/// The first command in every sandbox: it makes itself, and so everything the sandbox
/// runs, the kernel's first choice when memory runs out (`oom_score_adj` 1000), then
/// runs the rest. Inside the sandbox the process is dumpable and its /proc file its own,
/// whoever steward runs as; outside, before exec, only root could write it
/// ([`die_first_on_oom`]). A sandbox without the file goes on as it is.
const OOM_FIRST: [&str; 4] = [
    "/bin/sh",
    "-c",
    "echo 1000 > /proc/self/oom_score_adj 2>/dev/null; exec \"$@\"",
    "steward-sandbox",
];

const RELAY_COMMAND: [&str; 5] = [
    "/run/steward/forward",
    super::forward::SUBCOMMAND,
    PROXY_ADDR,
    "/run/steward/proxy.sock",
    "--",
];

/// Why a script stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// bubblewrap's exit code: the script's, or 128 + the signal that killed it
    /// (`SIGXCPU` for the CPU limit, `SIGXFSZ` for a file too large).
    Exited(i32),
    /// bubblewrap itself was killed by a signal.
    Signal(i32),
    TimedOut,
    /// stdout or stderr passed the output cap.
    OutputCap,
    /// The work folder passed its file count or byte limit (the reason).
    WriteCap(String),
    /// The kernel killed a process for passing the run's memory cgroup limit.
    MemoryLimit,
}

impl Stop {
    /// What happened, in words for the model; `took` is how long it ran.
    pub fn describe(&self, limits: &ProcessLimits, took: Duration) -> String {
        match self {
            // bubblewrap passes a killed script on as 128 + the signal.
            Stop::Exited(code) if *code == 128 + libc::SIGXCPU => {
                format!("was stopped at its CPU time limit ({} s)", limits.cpu_secs)
            }
            // A script that ignores SIGXCPU meets the hard limit a second later: the
            // kernel's SIGKILL. Past its CPU seconds that is the likely cause (the time
            // limit is reported as such), and the words keep the signal in case it was
            // the memory limit's kill instead.
            Stop::Exited(code)
                if *code == 128 + libc::SIGKILL && took >= Duration::from_secs(limits.cpu_secs) =>
            {
                format!(
                    "was killed (signal 9) after its CPU time limit ({} s; it ignored the warning signal, SIGXCPU, so the hard limit stopped it)",
                    limits.cpu_secs
                )
            }
            Stop::Exited(code) if *code == 128 + libc::SIGXFSZ => format!(
                "was stopped writing a file over the {}-byte limit",
                limits.max_written_bytes
            ),
            Stop::Exited(code) if *code > 128 && *code <= 128 + 64 => {
                format!("exited with code {code} (killed by signal {})", code - 128)
            }
            Stop::Exited(code) => format!("exited with code {code}"),
            Stop::Signal(s) => format!("was killed by signal {s}"),
            Stop::TimedOut => format!("was stopped at its time limit ({} s)", limits.wall.as_secs_f64()),
            Stop::OutputCap => format!(
                "was stopped: its output passed the {}-byte limit",
                limits.max_output_bytes
            ),
            Stop::WriteCap(why) => format!("was stopped: {why}"),
            Stop::MemoryLimit => format!(
                "was killed at its memory limit ({} MB for all its processes together)",
                limits.memory_bytes / (1024 * 1024)
            ),
        }
    }
}

/// The result of one run.
#[derive(Debug)]
pub struct Finished {
    pub stop: Stop,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Files the script created or changed in the work folder, sorted by name.
    pub files: Vec<WorkFile>,
    pub took: Duration,
}

/// Why the sandbox could not run a script at all.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("script sandbox unavailable: {0}")]
    Unavailable(String),
    #[error("cannot prepare the script sandbox: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "every script slot of this process stayed busy for {0:?} (other scripts are running); try again later"
    )]
    Busy(Duration),
}

/// How the process limit is enforced.
#[derive(Debug, Clone)]
enum PidLimit {
    /// Cgroup folders; each run gets children of them.
    Cgroup(CgroupBase),
    /// `RLIMIT_NPROC` on top of the tasks the (non-root) user already has.
    Rlimit,
}

/// The script sandbox of one steward process: bubblewrap found and tried once.
#[derive(Debug)]
pub struct ProcessSandbox {
    bwrap: PathBuf,
    pids: PidLimit,
    /// Where proxies' sockets are, and this process's folder ([`OwnFolder`]).
    work_base: PathBuf,
    /// Parent of this process's runs' work folders, swept by the next process to start
    /// if this one dies with files in it.
    own: Option<super::own_folder::OwnFolder>,
    /// Why scripts cannot run here, when they cannot.
    unavailable: Option<String>,
    /// The steward executable, mounted into sandboxes with egress to run the
    /// forwarder (`steward __forward`).
    forwarder: Option<PathBuf>,
    /// Scripts at once across the process ([`script_slots`]): each may take its
    /// limits' memory, processes and `/tmp`, so a burst (one model turn asks for eight)
    /// waits its turn rather than take the machine.
    slots: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Scripts one process runs at once: two per core, at least four.
pub fn script_slots() -> usize {
    std::thread::available_parallelism().map_or(4, |n| (n.get() * 2).max(4))
}

impl Default for ProcessSandbox {
    fn default() -> Self {
        ProcessSandbox::disabled("no script sandbox was set up in this process")
    }
}

impl ProcessSandbox {
    /// Whether a run's processes are held to its memory limit together (a memory
    /// cgroup), not only each to its address space.
    pub fn limits_memory_together(&self) -> bool {
        matches!(&self.pids, PidLimit::Cgroup(base) if base.limits_memory())
    }

    /// Finds bubblewrap and a way to limit processes, and runs `/bin/true` in a sandbox
    /// to prove it works (some container runtimes forbid namespaces). Blocking; called
    /// once at start.
    pub fn detect(work_base: PathBuf) -> ProcessSandbox {
        let mut sandbox = ProcessSandbox {
            bwrap: PathBuf::new(),
            pids: PidLimit::Rlimit,
            work_base,
            own: None,
            unavailable: None,
            forwarder: None,
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(script_slots())),
        };
        match find_program("bwrap") {
            Some(bwrap) => sandbox.bwrap = bwrap,
            None => {
                sandbox.unavailable =
                    Some("bubblewrap (bwrap) is not installed; install the Debian package bubblewrap".into());
                return sandbox;
            }
        }
        match CgroupBase::detect() {
            Some(base) => sandbox.pids = PidLimit::Cgroup(base),
            // SAFETY: getuid has no preconditions.
            None if unsafe { libc::getuid() } == 0 => {
                sandbox.unavailable = Some(
                    "running as root without a writable pids cgroup, so the process limit cannot be enforced"
                        .into(),
                );
                return sandbox;
            }
            None => {}
        }
        // Under /tmp by default: a folder someone else made first would let them at
        // every run's input files.
        if let Err(e) = super::private_dir::ensure(&sandbox.work_base) {
            sandbox.unavailable = Some(format!("the scripts' work folder cannot be used: {e}"));
            return sandbox;
        }
        match super::own_folder::claim(&sandbox.work_base) {
            Ok(own) => sandbox.own = Some(own),
            Err(e) => {
                sandbox.unavailable = Some(format!("the scripts' work folder cannot be used: {e}"));
                return sandbox;
            }
        }
        let mut args = base_args();
        args.extend(["--remount-ro", "/"].map(OsString::from));
        let probe = BwrapArgs::new(&args).and_then(|fd| {
            let mut probe = std::process::Command::new(&sandbox.bwrap);
            probe
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            fd.attach_std(&mut probe);
            probe.args(["--", "/bin/sh", "-c", "exit 0"]).output()
        });
        match probe {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
                sandbox.unavailable = Some(if said.contains("Unknown option --disable-userns") {
                    format!(
                        "bubblewrap is older than 0.8, so nested user namespaces cannot be refused inside the sandbox ({said}); install bubblewrap 0.8 or later"
                    )
                } else if said.to_ascii_lowercase().contains("seccomp") {
                    format!("bubblewrap cannot load the system call filter ({said})")
                } else {
                    format!("bubblewrap cannot create its namespaces here ({said})")
                })
            }
            Err(e) => sandbox.unavailable = Some(format!("cannot start bubblewrap: {e}")),
        }
        sandbox
    }

    /// This process's own folder for its runs' work folders.
    fn runs_folder(&self) -> &Path {
        self.own
            .as_ref()
            .map_or(self.work_base.as_path(), |o| o.dir.as_path())
    }

    /// A sandbox that refuses every script with `reason` (tests, platforms without it).
    pub fn disabled(reason: impl Into<String>) -> ProcessSandbox {
        ProcessSandbox {
            bwrap: PathBuf::new(),
            pids: PidLimit::Rlimit,
            work_base: PathBuf::new(),
            own: None,
            unavailable: Some(reason.into()),
            forwarder: None,
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(script_slots())),
        }
    }

    /// At most `n` scripts at once in this process (default [`script_slots`]).
    pub fn with_slots(mut self, n: usize) -> ProcessSandbox {
        self.slots = std::sync::Arc::new(tokio::sync::Semaphore::new(n));
        self
    }

    /// Sandboxes with egress run `forwarder` (the steward executable) as the relay to
    /// the proxy; without one, a job with a proxy is refused.
    pub fn with_forwarder(mut self, forwarder: PathBuf) -> ProcessSandbox {
        self.forwarder = Some(forwarder);
        self
    }

    /// The mounts and variables that give a sandbox the proxy at `socket` through the
    /// forwarder (`None` without a proxy); the command then starts with
    /// [`RELAY_COMMAND`].
    fn relay(&self, egress: Option<Egress<'_>>) -> Result<Option<Vec<OsString>>, SandboxError> {
        let Some(egress) = egress else {
            return Ok(None);
        };
        let Some(forwarder) = &self.forwarder else {
            return Err(SandboxError::Unavailable(
                "this process has no forwarder for sandbox egress".into(),
            ));
        };
        let mut args: Vec<OsString> = vec![
            "--ro-bind".into(),
            forwarder.into(),
            "/run/steward/forward".into(),
            "--bind".into(),
            egress.socket.into(),
            "/run/steward/proxy.sock".into(),
        ];
        // Secrets first: the proxy's own variables come after and cannot be shadowed.
        for (name, placeholder) in egress.env {
            args.extend(["--setenv".into(), name.into(), placeholder.into()]);
        }
        if let Some(bundle) = egress.trust {
            args.extend(["--ro-bind".into(), bundle.into(), TRUST_BUNDLE.into()]);
            for name in TRUST_VARS {
                args.extend(["--setenv".into(), name.into(), TRUST_BUNDLE.into()]);
            }
        }
        let url = format!("http://{PROXY_ADDR}");
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            args.extend(["--setenv".into(), name.into(), OsString::from(&url)]);
        }
        // Empty: no host bypasses the proxy (there is no other way out anyway).
        for name in ["NO_PROXY", "no_proxy"] {
            args.extend(["--setenv".into(), name.into(), "".into()]);
        }
        Ok(Some(args))
    }

    /// Where a run's proxy socket goes: beside the runs' work folders, never inside one.
    pub fn socket_path(&self, id: &str) -> PathBuf {
        self.work_base.join(format!("proxy-{id}.sock"))
    }

    /// Why scripts cannot run here, if they cannot.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// bubblewrap started from an empty environment, reading its options from `fd`:
    /// its PID 1 inside the sandbox keeps the environment and command line it was
    /// started with (containers/bubblewrap#725), so neither may hold a secret or a
    /// host path.
    fn command(&self, fd: &BwrapArgs) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.bwrap);
        command.env_clear();
        fd.attach(&mut command);
        command
    }

    /// Runs `job` under `limits`. Errors only when no sandbox could be made; a script
    /// that fails or is stopped is a [`Finished`] with its [`Stop`].
    pub async fn run(&self, job: &Job<'_>, limits: &ProcessLimits) -> Result<Finished, SandboxError> {
        if let Some(why) = &self.unavailable {
            return Err(SandboxError::Unavailable(why.clone()));
        }
        // Waits at most a script's own wall time for a slot. Never closed, so acquiring
        // fails only if it were; then the script runs without one.
        let _slot = match tokio::time::timeout(limits.wall, self.slots.acquire()).await {
            Ok(slot) => slot.ok(),
            Err(_) => return Err(SandboxError::Busy(limits.wall)),
        };
        let started = Instant::now();
        let id = uuid::Uuid::now_v7().simple().to_string();
        let work = Scratch::create(self.runs_folder().join(&id))?;
        write_inputs(&work.0, job.inputs)?;
        let mut args = base_args();
        args.extend(mounts(
            limits.max_written_bytes,
            Some(job.skill_dir),
            "/skill",
            &work.0,
        ));
        let relay = self.relay(job.proxy)?;
        if let Some(mounts) = &relay {
            args.extend(mounts.iter().cloned());
        }
        if let Some(deps) = job.deps {
            args.extend([
                "--ro-bind".into(),
                deps.into(),
                "/deps".into(),
                "--setenv".into(),
                "PYTHONPATH".into(),
                "/deps".into(),
                "--setenv".into(),
                "NODE_PATH".into(),
                "/deps".into(),
            ]);
        }
        args.extend(["--chdir", "/work", "--remount-ro", "/"].map(OsString::from));
        let fd = BwrapArgs::new(&args)?;
        let mut command = self.command(&fd);
        // The command itself stays on the command line (bubblewrap wants it there):
        // only paths inside the sandbox and the script's own arguments.
        command.arg("--").args(OOM_FIRST);
        if relay.is_some() {
            command.args(RELAY_COMMAND);
        }
        command
            .arg(job.interpreter)
            .arg(Path::new("/skill").join(job.script))
            .args(job.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let cgroup = self.confine(&mut command, &id, limits, Some(limits.cpu_secs))?;
        let mut child = command.spawn()?;
        drop(fd);
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SandboxError::Io(std::io::Error::other("child pipes missing")));
        };
        let over = CancellationToken::new();
        let feed = async {
            if let Some(text) = job.stdin {
                // A script that does not read its input closes the pipe: not an error.
                let _ = stdin.write_all(text.as_bytes()).await;
            }
            drop(stdin);
        };
        let supervise = async {
            let deadline = tokio::time::sleep(limits.wall);
            tokio::pin!(deadline);
            let mut watch = tokio::time::interval(WATCH_EVERY);
            let stop = loop {
                tokio::select! {
                    status = child.wait() => break match status {
                        Ok(s) => exit_stop(s),
                        Err(_) => Stop::Signal(libc::SIGKILL),
                    },
                    () = &mut deadline => break Stop::TimedOut,
                    () = over.cancelled() => break Stop::OutputCap,
                    _ = watch.tick() => {
                        if let Some(why) = over_written(&work.0, limits) {
                            break Stop::WriteCap(why);
                        }
                    }
                }
            };
            // Killing bubblewrap kills its namespace's init (`--die-with-parent`), and
            // with it every process of the sandbox.
            let _ = child.kill().await;
            stop
        };
        let cap = limits.max_output_bytes;
        let (stop, stdout, stderr, ()) = tokio::join!(
            supervise,
            read_capped(stdout, cap, &over),
            read_capped(stderr, cap, &over),
            feed
        );
        // A script that passed the output cap may have died of the closed pipe before
        // the supervisor saw the cap: the cap is the reason.
        let stop = match stop {
            Stop::Exited(_) | Stop::Signal(_) if over.is_cancelled() => Stop::OutputCap,
            // The kernel's kill at the run's memory cgroup limit.
            Stop::Exited(_) | Stop::Signal(_) if cgroup.as_ref().is_some_and(RunCgroup::memory_killed) => {
                Stop::MemoryLimit
            }
            other => other,
        };
        drop(cgroup);
        let inputs = job.inputs.to_vec();
        let dir = work.0.clone();
        let (max_files, max_bytes) = (limits.max_files, limits.max_written_bytes);
        let written = tokio::task::spawn_blocking(move || written_files(&dir, &inputs, max_files, max_bytes))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        // The folder is watched while the script runs, not at the instant it exits:
        // what it left is read within the cap, and a script over it leaves nothing.
        let (stop, files) = match (stop, written) {
            (Stop::WriteCap(why), _) | (_, Err(why)) => (Stop::WriteCap(why), Vec::new()),
            (stop, Ok(files)) => (stop, files),
        };
        drop(work);
        Ok(Finished {
            stop,
            stdout,
            stderr,
            files,
            took: started.elapsed(),
        })
    }

    /// Limits `command`'s processes (a pids cgroup `id`, returned, or `RLIMIT_NPROC`),
    /// address space, file size and, when given, CPU seconds.
    fn confine(
        &self,
        command: &mut tokio::process::Command,
        id: &str,
        limits: &ProcessLimits,
        cpu: Option<u64>,
    ) -> Result<Option<RunCgroup>, SandboxError> {
        let cgroup = match &self.pids {
            PidLimit::Cgroup(base) => Some(RunCgroup::create(
                base,
                id,
                limits.max_processes,
                limits.memory_bytes,
            )?),
            PidLimit::Rlimit => None,
        };
        let rlimits = Rlimits {
            cpu,
            address_space: limits.memory_bytes,
            file_size: limits.max_written_bytes,
            nproc: match &cgroup {
                Some(_) => None,
                None => Some(user_tasks() + limits.max_processes),
            },
            cgroup_procs: match &cgroup {
                Some(c) => c.procs_paths()?,
                None => Vec::new(),
            },
            open_files: SANDBOX_OPEN_FILES.min(hard_open_files()),
        };
        rlimits.apply(command);
        Ok(cgroup)
    }

    /// A long-running program (an MCP stdio server) in the same sandbox as scripts:
    /// `dir` read-only at `/server` (its working folder; without one it works in
    /// `/work`), a private work folder at `/work`, no network (but the egress proxy at
    /// `proxy`, when given), nothing of steward's environment but `env`, and the
    /// memory, process and file-size limits of `limits` (no CPU or wall limit: it lives
    /// as long as steward). The [`ServerGuard`] owns the work folder and the process
    /// cgroup; dropping it kills what is left of the server.
    pub fn server_command(
        &self,
        dir: Option<&Path>,
        program: &Path,
        args: &[String],
        env: &std::collections::BTreeMap<String, String>,
        limits: &ProcessLimits,
        proxy: Option<Egress<'_>>,
    ) -> Result<(tokio::process::Command, ServerGuard), SandboxError> {
        if let Some(why) = &self.unavailable {
            return Err(SandboxError::Unavailable(why.clone()));
        }
        let id = format!("server-{}", uuid::Uuid::now_v7().simple());
        let work = Scratch::create(self.runs_folder().join(&id))?;
        let relay = self.relay(proxy)?;
        let mut all = base_args();
        all.extend(mounts(limits.max_written_bytes, dir, "/server", &work.0));
        if let Some(mounts) = &relay {
            all.extend(mounts.iter().cloned());
        }
        for (k, v) in env {
            all.extend(["--setenv".into(), k.into(), v.into()]);
        }
        let cwd = if dir.is_some() { "/server" } else { "/work" };
        all.extend(["--chdir", cwd, "--remount-ro", "/"].map(OsString::from));
        let fd = BwrapArgs::new(&all)?;
        let mut command = self.command(&fd);
        command.arg("--").args(OOM_FIRST);
        if relay.is_some() {
            command.args(RELAY_COMMAND);
        }
        command.arg(program).args(args);
        let cgroup = self.confine(&mut command, &id, limits, None)?;
        command.kill_on_drop(true);
        Ok((
            command,
            ServerGuard {
                _args: fd,
                _cgroup: cgroup,
                _work: work,
            },
        ))
    }
}

/// What a sandboxed server needs kept while it runs (see
/// [`ProcessSandbox::server_command`]).
#[derive(Debug)]
pub struct ServerGuard {
    _args: BwrapArgs,
    _cgroup: Option<RunCgroup>,
    _work: Scratch,
}

/// The program `name` (a bare name) in the system's program folders.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    PROGRAM_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| runnable(p))
}

/// Whether `path` is a file someone may execute.
fn runnable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The bubblewrap arguments every run shares: namespaces, the read-only system, an
/// empty environment. The root is remounted read-only after the run's own mounts.
fn base_args() -> Vec<OsString> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        // No nested user namespace: `unshare -r` inside would give uid 0 there.
        "--disable-userns",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        // The system call filter (sandbox/seccomp.rs), from descriptor 4.
        "--seccomp",
        "4",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(String::from)
    .to_vec();
    // Merged-/usr systems link /bin, /lib... into /usr; others have real folders.
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::read_link(top) {
            Ok(target) => args.extend([
                "--symlink".into(),
                target.to_string_lossy().into_owned(),
                top.into(),
            ]),
            Err(_) if Path::new(top).is_dir() => args.extend(["--ro-bind".into(), top.into(), top.into()]),
            Err(_) => {}
        }
    }
    let mut etc: Vec<String> = ETC_ENTRIES.iter().map(|e| e.to_string()).collect();
    if let Ok(entries) = std::fs::read_dir("/etc") {
        etc.extend(
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("python")),
        );
    }
    for entry in etc {
        let path = format!("/etc/{entry}");
        args.extend(["--ro-bind-try".into(), path.clone(), path]);
    }
    args.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            // Not the work folder: an input named `.curlrc` or `.gitconfig` (a
            // person's attachment) would configure the programs a script runs.
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "SKILL_DIR",
            "/skill",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            "--setenv",
            "PYTHONIOENCODING",
            "utf-8",
        ]
        .map(String::from),
    );
    args.into_iter().map(OsString::from).collect()
}

/// The writable mounts of a sandbox: a capped `/tmp`, `/dev/shm`, `dir` read-only at
/// `at`, and `work` at `/work`.
fn mounts(max_written: u64, dir: Option<&Path>, at: &str, work: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--size", &max_written.to_string(), "--tmpfs", "/tmp"]
        .map(OsString::from)
        .to_vec();
    args.extend(
        [
            "--size",
            &SHM_BYTES.to_string(),
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
        ]
        .map(OsString::from),
    );
    if let Some(dir) = dir {
        args.extend(["--ro-bind".into(), dir.into(), at.into()]);
    }
    args.extend(["--bind".into(), work.into(), "/work".into()]);
    args
}

/// bubblewrap's options in a memory file, passed as `--args 3` (as Flatpak does), so
/// host paths (the bind mounts' sources) never appear on its command line, which a
/// sandboxed process can read from `/proc/1/cmdline`; only the command to run, a path
/// inside the sandbox, follows. Beside it, the seccomp filter as descriptor 4
/// (`--seccomp 4`, in [`base_args`]). bubblewrap closes both once read.
#[derive(Debug)]
pub struct BwrapArgs {
    args: std::os::fd::OwnedFd,
    seccomp: std::os::fd::OwnedFd,
}

/// The descriptor numbers bubblewrap reads its options and its filter from.
const ARGS_FD: libc::c_int = 3;
const SECCOMP_FD: libc::c_int = 4;

/// A memory file holding `bytes`, rewound, closed on exec.
fn memory_file(name: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::{Seek, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: the name is a valid C string; the result is checked.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}

impl BwrapArgs {
    fn new(args: &[OsString]) -> std::io::Result<BwrapArgs> {
        let mut joined = Vec::new();
        for a in args {
            let bytes = a.as_encoded_bytes();
            if bytes.contains(&0) {
                return Err(std::io::Error::other("a sandbox argument contains a NUL byte"));
            }
            joined.extend_from_slice(bytes);
            joined.push(0);
        }
        Ok(BwrapArgs {
            args: memory_file(c"steward-bwrap-args", &joined)?,
            seccomp: memory_file(c"steward-seccomp", &super::seccomp::filter_bytes())?,
        })
    }

    /// In the child: the options at descriptor 3, the filter at 4, every other
    /// descriptor closed on exec. Both are first copied above 4 so that neither
    /// `dup2` overwrites the other's source.
    fn dup_into_child(args: libc::c_int, seccomp: libc::c_int) -> std::io::Result<()> {
        close_on_exec_from(SECCOMP_FD + 1);
        die_first_on_oom();
        // SAFETY: dup2 and fcntl are async-signal-safe and touch only descriptors;
        // dup2 leaves the new descriptor open across exec.
        unsafe {
            let high_args = libc::fcntl(args, libc::F_DUPFD_CLOEXEC, SECCOMP_FD + 1);
            let high_seccomp = libc::fcntl(seccomp, libc::F_DUPFD_CLOEXEC, SECCOMP_FD + 1);
            if high_args < 0
                || high_seccomp < 0
                || libc::dup2(high_args, ARGS_FD) < 0
                || libc::dup2(high_seccomp, SECCOMP_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    fn raw(&self) -> (libc::c_int, libc::c_int) {
        use std::os::fd::AsRawFd;
        (self.args.as_raw_fd(), self.seccomp.as_raw_fd())
    }

    /// Hands the options to `command` as descriptor 3 and adds `--args 3`; the filter
    /// goes as descriptor 4.
    fn attach(&self, command: &mut tokio::process::Command) {
        let (args, seccomp) = self.raw();
        command.args(["--args", "3"]);
        // SAFETY: the closure runs between fork and exec and only calls dup2/fcntl.
        unsafe {
            command.pre_exec(move || Self::dup_into_child(args, seccomp));
        }
    }

    fn attach_std(&self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let (args, seccomp) = self.raw();
        command.env_clear().args(["--args", "3"]);
        // SAFETY: as in `attach`.
        unsafe {
            command.pre_exec(move || Self::dup_into_child(args, seccomp));
        }
    }
}

/// Marks every descriptor from `first` up close-on-exec, in a child between fork and
/// exec: descriptors steward inherited without that flag (from whatever started it)
/// must not reach a sandbox or a worker. Async-signal-safe.
fn close_on_exec_from(first: libc::c_int) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range and fcntl only change descriptor flags.
    unsafe {
        let done = libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
        if done != 0 {
            // Kernels before 5.11: one descriptor at a time, up to the usual limit.
            for fd in first..4096 {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
}

/// Makes the calling process (and what it starts) the kernel's first choice when memory
/// runs out: `oom_score_adj` 1000, which any process may raise for itself. A script,
/// server or document worker that takes the host's (or the pod's) memory then dies,
/// not steward with every run it holds. Only system calls: safe between fork and exec.
///
/// A child between fork and exec inherits steward's "not dumpable", which gives its
/// /proc files to root: there the write works only when steward runs as root. Making
/// the child dumpable first would open steward's memory and environment (the child's
/// copy) to same-user processes until exec, so it is not done; the document worker
/// calls this itself once it runs (`cli::main`), and sandboxes start with
/// [`OOM_FIRST`].
pub fn die_first_on_oom() {
    // SAFETY: a valid C string path; the buffer is four valid bytes; the descriptor is
    // this call's own. Best effort: without /proc, or without the right, nothing changes.
    unsafe {
        let fd = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, b"1000".as_ptr().cast(), 4);
            libc::close(fd);
        }
    }
}

/// A command running `program` with `args` outside any sandbox that is the kernel's
/// first choice when memory runs out whoever steward runs as: through [`OOM_FIRST`]
/// when `/bin/sh` is there (before exec only root can set it, see
/// [`die_first_on_oom`]). The program is looked up on `path` first, so a missing one is
/// this call's error, not a shell's exit status.
pub fn dying_first(
    program: &str,
    args: &[String],
    path: Option<&std::ffi::OsStr>,
) -> std::io::Result<tokio::process::Command> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| runnable(p))
    } else {
        path.into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(program))
            .find(|p| runnable(p))
    };
    let Some(found) = found else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{program} is not an executable file here or on PATH"),
        ));
    };
    let shell = Path::new(OOM_FIRST[0]);
    let mut command = match runnable(shell) {
        true => {
            let mut c = tokio::process::Command::new(shell);
            c.args(&OOM_FIRST[1..]).arg(&found);
            c
        }
        false => tokio::process::Command::new(&found),
    };
    command.args(args);
    Ok(command)
}

/// Has a child command start with only descriptors 0 to 2 (and whatever the command
/// itself passes on): see [`close_on_exec_from`].
pub fn inherit_only_stdio(command: &mut tokio::process::Command) {
    // SAFETY: the closure only changes descriptor flags (async-signal-safe).
    unsafe {
        command.pre_exec(|| {
            close_on_exec_from(3);
            die_first_on_oom();
            Ok(())
        });
    }
}

/// A run's work folder, removed when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn create(path: PathBuf) -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Links the script may have left are not followed; folders it closed to
        // steward are opened again first.
        let _ = super::remove::remove_all(&self.0);
    }
}

/// Whether `name` is a plain relative path (no `..`, not absolute).
fn plain(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

fn write_inputs(dir: &Path, inputs: &[WorkFile]) -> std::io::Result<()> {
    for f in inputs {
        if !plain(&f.name) {
            return Err(std::io::Error::other(format!("bad input file name '{}'", f.name)));
        }
        let path = dir.join(&f.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, f.content.as_slice())?;
    }
    Ok(())
}

/// Reads a pipe keeping at most `cap` bytes; past it, cancels `over` and stops.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize, over: &CancellationToken) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    over.cancel();
                    return kept;
                }
            }
        }
    }
}

fn exit_stop(status: std::process::ExitStatus) -> Stop {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Stop::Exited(code),
        (None, sig) => Stop::Signal(sig.unwrap_or(0)),
    }
}

/// Regular files under `dir` (links and special files skipped), with the number of
/// entries seen; stops counting once past `max_entries`. A folder that cannot be read
/// is the reason it failed: a script that closes a folder to steward (`chmod 000`), or
/// nests one past the longest path, would otherwise write there unseen by the limits.
fn walk(dir: &Path, max_entries: usize) -> Result<(Vec<(String, u64)>, usize), String> {
    let unreadable = |e: std::io::Error| format!("it made a folder of its work folder unreadable ({e})");
    let mut files = Vec::new();
    let mut entries = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let read = match std::fs::read_dir(&d) {
            Ok(read) => read,
            // Removed by the script since it was listed (or swapped for a file).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                continue;
            }
            Err(e) => return Err(unreadable(e)),
        };
        for e in read {
            let e = e.map_err(unreadable)?;
            entries += 1;
            if entries > max_entries {
                return Ok((files, entries));
            }
            let meta = match e.path().symlink_metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(unreadable(e)),
            };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file()
                && let Ok(rel) = e.path().strip_prefix(dir)
            {
                files.push((rel.to_string_lossy().into_owned(), meta.len()));
            }
        }
    }
    Ok((files, entries))
}

/// Why the work folder is over its limits, if it is.
fn over_written(dir: &Path, limits: &ProcessLimits) -> Option<String> {
    let (files, entries) = match walk(dir, limits.max_files) {
        Ok(found) => found,
        Err(why) => return Some(why),
    };
    if entries > limits.max_files {
        return Some(format!(
            "it created more than {} files in its work folder",
            limits.max_files
        ));
    }
    let bytes: u64 = files.iter().map(|(_, n)| n).sum();
    (bytes > limits.max_written_bytes).then(|| {
        format!(
            "it wrote more than {} bytes into its work folder",
            limits.max_written_bytes
        )
    })
}

/// The regular file `rel` (`a/b/c.txt`) under `dir`, opened one component at a time
/// without following a link in any of them: a script still running (its processes die
/// after bubblewrap, not with it) can swap a folder of its work folder for a link to
/// steward's own files between the walk and the read, and `O_NOFOLLOW` alone guards only
/// the last component.
fn open_beneath(dir: &Path, rel: &str) -> std::io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut at = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(std::io::Error::other("not a plain path"));
        }
        let last = i + 1 == parts.len();
        let name = std::ffi::CString::new(*part).map_err(std::io::Error::other)?;
        // The last component without waiting (a pipe swapped in does not block).
        let kind = if last { libc::O_NONBLOCK } else { libc::O_DIRECTORY };
        // SAFETY: `at` is an open descriptor and `name` a NUL-terminated string, both
        // alive for the call; the returned descriptor is owned by the `File` below.
        let fd = unsafe {
            libc::openat(
                at.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | kind,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        at = unsafe { std::fs::File::from_raw_fd(fd) };
    }
    if !at.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(at)
}

/// Files in the work folder that are new or differ from the inputs, or `Err` (why)
/// once the folder holds more than `max_bytes`: no more than that is ever read (sparse
/// files can claim gigabytes the disk does not hold).
fn written_files(
    dir: &Path,
    inputs: &[WorkFile],
    max_files: usize,
    max_bytes: u64,
) -> std::io::Result<Result<Vec<WorkFile>, String>> {
    use std::io::Read as _;
    let found = match walk(dir, max_files) {
        Ok((found, _)) => found,
        Err(why) => return Ok(Err(why)),
    };
    let mut out = Vec::new();
    let mut total: u64 = 0;
    for (name, _) in found {
        // A file swapped for a link (or a folder on its path swapped for one) since the
        // walk was no file the script wrote here: skipped.
        let Ok(file) = open_beneath(dir, &name) else {
            continue;
        };
        let mut content = Vec::new();
        file.take(max_bytes - total + 1).read_to_end(&mut content)?;
        total += content.len() as u64;
        if total > max_bytes {
            return Ok(Err(format!(
                "it wrote more than {max_bytes} bytes into its work folder"
            )));
        }
        let unchanged = inputs
            .iter()
            .any(|i| i.name == name && i.content.as_slice() == content.as_slice());
        if !unchanged {
            out.push(WorkFile {
                name,
                content: Arc::new(content),
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Ok(out))
}

/// Tasks (processes and threads) of this process's real user, for `RLIMIT_NPROC`.
fn user_tasks() -> u64 {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() }.to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .flatten()
        .filter_map(|p| std::fs::read_to_string(p.path().join("status")).ok())
        .filter(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                == Some(uid.as_str())
        })
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Limits set in the child between fork and exec.
struct Rlimits {
    /// CPU seconds: `SIGXCPU` at the limit, `SIGKILL` a second later (equal soft and
    /// hard limits would kill with `SIGKILL` alone, which names no reason).
    cpu: Option<u64>,
    address_space: u64,
    file_size: u64,
    nproc: Option<u64>,
    /// `cgroup.procs` of the run's cgroups, joined before exec.
    cgroup_procs: Vec<CString>,
    /// Open files, soft and hard: `serve` raises its own limit for connections, and a
    /// sandboxed program must not inherit that.
    open_files: u64,
}

/// The open-file limit of a sandboxed program: the usual default of a login session.
const SANDBOX_OPEN_FILES: u64 = 1024;

/// This process's hard limit on open files (a child may not go above it).
fn hard_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for the call to fill in.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_max,
        _ => SANDBOX_OPEN_FILES,
    }
}

impl Rlimits {
    fn apply(self, command: &mut tokio::process::Command) {
        // SAFETY: the closure runs in the child between fork and exec and calls only
        // setrlimit, open, write and close, which are async-signal-safe; it reads only
        // values moved into it before the fork.
        unsafe {
            command.pre_exec(move || {
                let set_range = |resource, soft: u64, hard: u64| {
                    let rl = libc::rlimit {
                        rlim_cur: soft as libc::rlim_t,
                        rlim_max: hard as libc::rlim_t,
                    };
                    if libc::setrlimit(resource, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                let set = |resource, value: u64| set_range(resource, value, value);
                if let Some(cpu) = self.cpu {
                    set_range(libc::RLIMIT_CPU, cpu, cpu + 1)?;
                }
                set(libc::RLIMIT_AS, self.address_space)?;
                set(libc::RLIMIT_FSIZE, self.file_size)?;
                set(libc::RLIMIT_CORE, 0)?;
                if let Some(n) = self.nproc {
                    set(libc::RLIMIT_NPROC, n)?;
                }
                for path in &self.cgroup_procs {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                    if written != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // Last: until exec the child holds steward's descriptors, and an `open`
                // above could find every number under the limit taken.
                set(libc::RLIMIT_NOFILE, self.open_files)?;
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of the work folder swapped for a link (to steward's own files) is not
    /// followed, nor is a file that is a link, nor a path that climbs.
    #[test]
    fn files_are_opened_beneath_the_work_folder_only() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join(".env"), "STEWARD_DATA_KEY=secret").unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join("d")).unwrap();
        std::fs::write(work.path().join("d/out.txt"), "written").unwrap();
        std::os::unix::fs::symlink(outside.path(), work.path().join("l")).unwrap();
        std::os::unix::fs::symlink(outside.path().join(".env"), work.path().join("d/env")).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_beneath(work.path(), "d/out.txt").unwrap(), &mut text)
            .unwrap();
        assert_eq!(text, "written");
        for refused in ["l/.env", "d/env", "../x", "d/../d/out.txt", "d", "missing"] {
            assert!(open_beneath(work.path(), refused).is_err(), "{refused}");
        }
        let files = written_files(work.path(), &[], 100, 1 << 20).unwrap().unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["d/out.txt"]);
    }

    /// Files nested past the longest path the walk can name are not hidden from the
    /// limits: the walk fails, and so does reading the results.
    #[test]
    fn a_folder_the_walk_cannot_read_is_over_the_limits() {
        use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
        let work = tempfile::tempdir().unwrap();
        // 30 levels of 200-byte names (6,000 bytes of path), made one level at a time
        // through descriptors, as a script's `mkdir` and `cd` would.
        let name = std::ffi::CString::new("d".repeat(200)).unwrap();
        let mut at = std::fs::File::open(work.path()).map(OwnedFd::from).unwrap();
        for _ in 0..30 {
            // SAFETY: valid names and descriptors.
            let fd = unsafe {
                assert_eq!(libc::mkdirat(at.as_raw_fd(), name.as_ptr(), 0o700), 0);
                libc::openat(at.as_raw_fd(), name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY)
            };
            assert!(fd >= 0);
            // SAFETY: just opened.
            at = unsafe { OwnedFd::from_raw_fd(fd) };
        }
        let limits = ProcessLimits {
            max_files: 1_000_000,
            ..ProcessLimits::default()
        };
        let why = over_written(work.path(), &limits).expect("over");
        assert!(why.contains("unreadable"), "{why}");
        assert!(written_files(work.path(), &[], 100, 1 << 20).unwrap().is_err());
    }

    /// A child started the way scripts, servers and the document worker are is the
    /// kernel's first choice when memory runs out.
    #[tokio::test]
    async fn children_are_killed_before_steward_when_memory_runs_out() {
        let mut command = tokio::process::Command::new("/bin/sh");
        command.args(["-c", "cat /proc/self/oom_score_adj"]);
        inherit_only_stdio(&mut command);
        let out = command.output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1000");
    }

    /// A program run outside a sandbox (an MCP server with `sandbox: false`) sets its
    /// own score through the shell, whoever runs it; a missing program is an error of
    /// the call, not the shell's exit status.
    #[tokio::test]
    async fn a_program_outside_the_sandbox_dies_first_and_a_missing_one_is_named() {
        let path = std::ffi::OsString::from("/usr/bin:/bin");
        let args = ["/proc/self/oom_score_adj".to_string()];
        let mut command = dying_first("cat", &args, Some(&path)).unwrap();
        let out = command.output().await.unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1000");
        let err = dying_first("no-such-server-xyz", &[], Some(&path)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert!(err.to_string().contains("no-such-server-xyz"), "{err}");
    }
}
