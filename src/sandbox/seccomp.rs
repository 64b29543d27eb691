//! The seccomp filter every sandboxed process runs under: a classic-BPF program that
//! bubblewrap loads (`--seccomp FD`) just before it starts the command, after
//! `PR_SET_NO_NEW_PRIVS`, so it holds for the script and everything it starts.
//!
//! It is a deny list, as Flatpak's and Docker's are at heart: the calls a Python,
//! shell or Node script never needs and that are the kernel's usual way in (mounts and
//! namespaces, keyrings, tracing other processes, BPF, userfaultfd, io_uring, modules,
//! clocks and the machine itself) fail with `EPERM` (`io_uring_*` with `ENOSYS`, so
//! runtimes that try it fall back as on a kernel without it). Calls of another
//! architecture's numbering (32-bit `int 0x80`, x32 on x86_64) would slip past a
//! list of native numbers, so every one of them fails with `EPERM`.

/// Offsets in the kernel's `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// `args[0]`; each further argument is 8 bytes on (little-endian) x86_64 and aarch64.
const ARG_OFFSET: u32 = 16;

/// `AUDIT_ARCH_*` of the architecture steward was built for.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7;

/// On x86_64, system call numbers with this bit are the x32 ABI's.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

/// Calls that fail with `EPERM`.
const DENIED: &[libc::c_long] = &[
    // Mounts, namespaces, the root: bubblewrap has set all of these up already.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    // Keyrings are not namespaced.
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    // Reading or steering other processes and the kernel's view of them.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_perf_event_open,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_lookup_dcookie,
    libc::SYS_syslog,
    // Memory placement (kernel memory layout, a history of bugs).
    libc::SYS_move_pages,
    libc::SYS_mbind,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy,
    libc::SYS_migrate_pages,
    // The machine itself.
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
    libc::SYS_nfsservctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Calls a document extraction worker never makes once it has read its document
/// ([`Program::confined`]): nothing new is opened, created, renamed or removed, no socket
/// and no program, no signal reaches another process (nor is a descriptor's signal
/// pointed at one: [`SIGNAL_OWNER`]), and no other process's limits or scheduling change (the worker runs as steward's
/// user, so without this a parser taken over by a document could read the database or
/// the service's `/proc/<pid>/environ`, call out, or kill the service). An allocation
/// failure still ends the worker: glibc's `abort` falls back to a faulting instruction
/// when raising `SIGABRT` fails.
const WORKER_DENIED: &[libc::c_long] = &[
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_pidfd_getfd,
    libc::SYS_unlinkat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_mkdirat,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_mknodat,
    libc::SYS_fchmodat,
    SYS_FCHMODAT2,
    libc::SYS_fchownat,
    libc::SYS_truncate,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_utimensat,
    // Limits, priorities and placement of any process of the user: `prlimit64` on
    // steward with a one-second CPU limit would have the kernel kill it.
    libc::SYS_prlimit64,
    libc::SYS_setrlimit,
    libc::SYS_setpriority,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_ioprio_set,
    // The older path calls x86_64 still has (aarch64 has only the `*at` forms).
    #[cfg(target_arch = "x86_64")]
    libc::SYS_open,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_creat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_unlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mkdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rmdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_link,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_symlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mknod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// `fchmodat2` (Linux 6.6; the same number on x86_64 and aarch64, which the libc crate
/// lists for x86_64 only).
const SYS_FCHMODAT2: libc::c_long = 452;

/// Calls that fail with `ENOSYS`, as if the kernel had none.
const ABSENT: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LOAD_WORD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JUMP_EQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JUMP_GE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn errno_ret(code: libc::c_int) -> u32 {
    libc::SECCOMP_RET_ERRNO | (code as u32 & libc::SECCOMP_RET_DATA)
}

/// A rule on one argument of one call (its low 32 bits: the kernel reads `int` and
/// `unsigned int` arguments from them).
struct ArgRule {
    nr: libc::c_long,
    arg: u32,
    /// The values that decide.
    values: &'static [u32],
    /// `true`: only `values` are allowed, anything else fails with `errno`; `false`:
    /// `values` fail with `errno`, anything else is allowed.
    only: bool,
    errno: libc::c_int,
}

/// Sockets of the families a script or a runtime uses (local, IPv4, IPv6, and netlink,
/// which glibc's address lookup asks for its interfaces); `AF_VSOCK`, `AF_PACKET`,
/// Bluetooth and the rest fail with `EAFNOSUPPORT`, as under Flatpak (vsock, for one,
/// reaches the host past the network namespace).
const SOCKET_FAMILIES: ArgRule = ArgRule {
    nr: libc::SYS_socket,
    arg: 0,
    values: &[
        libc::AF_UNIX as u32,
        libc::AF_INET as u32,
        libc::AF_INET6 as u32,
        libc::AF_NETLINK as u32,
    ],
    only: true,
    errno: libc::EAFNOSUPPORT,
};

/// Linux's `F_SETSIG` and `F_SETOWN_EX` (the same on x86_64 and aarch64; the libc crate
/// leaves them out).
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;

/// `fcntl` commands that point a descriptor's signals at a process
/// (`F_SETOWN`, `F_SETSIG`, `F_SETOWN_EX`): a worker could aim `SIGKILL` at steward.
const SIGNAL_OWNER: ArgRule = ArgRule {
    nr: libc::SYS_fcntl,
    arg: 1,
    values: &[libc::F_SETOWN as u32, F_SETSIG as u32, F_SETOWN_EX as u32],
    only: false,
    errno: libc::EPERM,
};

/// Where a jump goes; patched once the returns' positions are known.
#[derive(Clone, Copy)]
enum Target {
    Next,
    /// The instruction after the current argument rule's block.
    AfterRule,
    Allow,
    Errno(libc::c_int),
}

/// The program: check the architecture, then the call number against the lists
/// (`denied` fail with `EPERM`, [`ABSENT`] with `ENOSYS`), then the argument rules.
/// Every jump goes forward, to the next rule or to a return at the end.
fn program(denied: &[&[libc::c_long]], rules: &[ArgRule]) -> Vec<Insn> {
    let mut code: Vec<(Insn, Target, Target)> = Vec::new();
    let load = |k: u32| {
        (
            Insn {
                code: LOAD_WORD,
                jt: 0,
                jf: 0,
                k,
            },
            Target::Next,
            Target::Next,
        )
    };
    let jump = |op: u16, k: u32, on_true: Target, on_false: Target| {
        (
            Insn {
                code: op,
                jt: 0,
                jf: 0,
                k,
            },
            on_true,
            on_false,
        )
    };
    code.push(load(ARCH_OFFSET));
    code.push(jump(
        JUMP_EQ,
        NATIVE_ARCH,
        Target::Next,
        Target::Errno(libc::EPERM),
    ));
    code.push(load(NR_OFFSET));
    if let Some(bit) = X32_SYSCALL_BIT {
        code.push(jump(JUMP_GE, bit, Target::Errno(libc::EPERM), Target::Next));
    }
    let lists = denied
        .iter()
        .map(|list| (*list, libc::EPERM))
        .chain([(ABSENT, libc::ENOSYS)]);
    for (list, errno) in lists {
        for &nr in list {
            code.push(jump(JUMP_EQ, nr as u32, Target::Errno(errno), Target::Next));
        }
    }
    // Each rule's block: not its call, on to the next block; its call, the argument
    // decides. The accumulator then holds the argument, so a block never falls
    // through into the next one.
    let mut blocks = Vec::new();
    for rule in rules {
        let begin = code.len();
        code.push(jump(JUMP_EQ, rule.nr as u32, Target::Next, Target::AfterRule));
        code.push(load(ARG_OFFSET + 8 * rule.arg));
        for (i, &value) in rule.values.iter().enumerate() {
            let last = i + 1 == rule.values.len();
            let (hit, miss) = match (rule.only, last) {
                (true, false) => (Target::Allow, Target::Next),
                (true, true) => (Target::Allow, Target::Errno(rule.errno)),
                (false, false) => (Target::Errno(rule.errno), Target::Next),
                (false, true) => (Target::Errno(rule.errno), Target::Allow),
            };
            code.push(jump(JUMP_EQ, value, hit, miss));
        }
        blocks.push((begin, code.len()));
    }
    let allow = code.len();
    code.push(jump(RETURN, libc::SECCOMP_RET_ALLOW, Target::Next, Target::Next));
    let mut errnos: Vec<(libc::c_int, usize)> = Vec::new();
    for errno in [libc::EPERM, libc::ENOSYS]
        .into_iter()
        .chain(rules.iter().map(|r| r.errno))
    {
        if !errnos.iter().any(|(e, _)| *e == errno) {
            errnos.push((errno, code.len()));
            code.push(jump(RETURN, errno_ret(errno), Target::Next, Target::Next));
        }
    }
    let resolve = |at: usize, t: Target| -> u8 {
        let to = match t {
            Target::Next => at + 1,
            Target::AfterRule => blocks
                .iter()
                .find(|(begin, end)| (*begin..*end).contains(&at))
                .map_or(at + 1, |(_, end)| *end),
            Target::Allow => allow,
            Target::Errno(e) => errnos.iter().find(|(x, _)| *x == e).map_or(at + 1, |(_, i)| *i),
        };
        // Offsets count from the instruction after the jump. The program is far
        // shorter than a u8's reach (a test checks); were one to outgrow it, the
        // kernel would refuse the program and the sandbox would say it cannot load it
        // (no script runs unfiltered).
        u8::try_from(to - at - 1).unwrap_or(u8::MAX)
    };
    code.iter()
        .enumerate()
        .map(|(at, (insn, on_true, on_false))| {
            let mut insn = *insn;
            if insn.code == JUMP_EQ || insn.code == JUMP_GE {
                insn.jt = resolve(at, *on_true);
                insn.jf = resolve(at, *on_false);
            }
            insn
        })
        .collect()
}

/// The filter of every sandboxed process (scripts, MCP servers, the extraction worker
/// until it has read its document).
fn sandbox_program() -> Vec<Insn> {
    program(&[DENIED], &[SOCKET_FAMILIES])
}

/// The extraction worker's filter once it has read its document ([`Program::confined`]).
fn worker_program() -> Vec<Insn> {
    program(&[DENIED, WORKER_DENIED], &[SIGNAL_OWNER])
}

/// The program as bubblewrap reads it from a descriptor: `struct sock_filter`s in the
/// machine's byte order.
pub fn filter_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in sandbox_program() {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// The filter as `seccomp(2)` takes it, for a child steward starts without bubblewrap
/// (the document extraction worker). Built before the fork, so installing it in the
/// child allocates nothing.
pub struct Program(Vec<libc::sock_filter>);

impl Default for Program {
    /// The sandbox's filter, as bubblewrap loads it for scripts.
    fn default() -> Self {
        Program::of(sandbox_program())
    }
}

impl Program {
    fn of(code: Vec<Insn>) -> Program {
        Program(
            code.into_iter()
                .map(|i| libc::sock_filter {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                })
                .collect(),
        )
    }

    /// The sandbox's filter and, on top, [`WORKER_DENIED`]: for a process that has
    /// everything it will read and only computes and writes to descriptors it holds.
    pub fn confined() -> Program {
        Program::of(worker_program())
    }

    /// In a child between fork and exec: no new privileges, then the filter, which
    /// holds across exec for the process and its children. Calls only `prctl` and
    /// `seccomp` (async-signal-safe).
    pub fn install(&self) -> std::io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.0.len() as libc::c_ushort,
            filter: self.0.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points into `self.0`, alive for the call; both calls only
        // change this process's privileges and filters.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program the way the kernel does, for one call.
    fn verdict(arch: u32, nr: u32) -> u32 {
        verdict_of(&sandbox_program(), arch, nr)
    }

    fn verdict_of(code: &[Insn], arch: u32, nr: u32) -> u32 {
        verdict_with(code, arch, nr, [0; 6])
    }

    fn verdict_with(code: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = code[pc];
            match i.code {
                LOAD_WORD => {
                    acc = match i.k {
                        ARCH_OFFSET => arch,
                        NR_OFFSET => nr,
                        k => args[((k - ARG_OFFSET) / 8) as usize] as u32,
                    };
                    pc += 1;
                }
                JUMP_EQ | JUMP_GE => {
                    let hit = if i.code == JUMP_EQ { acc == i.k } else { acc >= i.k };
                    pc += 1 + usize::from(if hit { i.jt } else { i.jf });
                }
                RETURN => return i.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn denied_calls_fail_and_everything_else_is_allowed() {
        for &nr in DENIED {
            assert_eq!(
                verdict(NATIVE_ARCH, nr as u32),
                errno_ret(libc::EPERM),
                "call {nr}"
            );
        }
        for &nr in ABSENT {
            assert_eq!(
                verdict(NATIVE_ARCH, nr as u32),
                errno_ret(libc::ENOSYS),
                "call {nr}"
            );
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_execve,
            libc::SYS_clone,
            libc::SYS_getpid,
        ] {
            assert_eq!(
                verdict(NATIVE_ARCH, nr as u32),
                libc::SECCOMP_RET_ALLOW,
                "call {nr}"
            );
        }
        // Another architecture's numbering, e.g. i386's through int 0x80.
        assert_eq!(
            verdict(0x4000_0003, libc::SYS_read as u32),
            errno_ret(libc::EPERM)
        );
        if let Some(bit) = X32_SYSCALL_BIT {
            assert_eq!(
                verdict(NATIVE_ARCH, bit | libc::SYS_read as u32),
                errno_ret(libc::EPERM)
            );
        }
    }

    /// A child started with [`Program::install`] (as the extraction worker is) runs
    /// under the filter, and so does what it executes.
    #[test]
    fn an_installed_program_holds_in_the_child_and_across_exec() {
        use std::os::unix::process::CommandExt;
        let probe = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
                     r = libc.unshare(0); print(r, ctypes.get_errno())";
        let run = |filtered: bool| {
            let mut command = std::process::Command::new("python3");
            command.args(["-c", probe]);
            if filtered {
                let filter = Program::default();
                // SAFETY: install calls only prctl and seccomp.
                unsafe {
                    command.pre_exec(move || filter.install());
                }
            }
            let out = command.output().expect("python3 runs");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(run(false), "0 0");
        assert_eq!(run(true), format!("-1 {}", libc::EPERM));
    }

    #[test]
    fn the_program_fits_the_kernel_limits() {
        let code = sandbox_program();
        assert_eq!(filter_bytes().len(), code.len() * 8);
        for code in [code, worker_program()] {
            // Jumps reach at most 255 instructions; the kernel takes up to 4096.
            assert!(code.len() < 255, "{} instructions", code.len());
            assert!(code.iter().all(|i| i.jt < u8::MAX && i.jf < u8::MAX));
        }
    }

    #[test]
    fn sockets_of_other_families_and_signal_owners_are_refused() {
        let sandbox = sandbox_program();
        let socket = |family: u64| {
            verdict_with(
                &sandbox,
                NATIVE_ARCH,
                libc::SYS_socket as u32,
                [family, 1, 0, 0, 0, 0],
            )
        };
        for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK] {
            assert_eq!(socket(family as u64), libc::SECCOMP_RET_ALLOW, "family {family}");
        }
        for family in [libc::AF_VSOCK, libc::AF_PACKET, libc::AF_BLUETOOTH, libc::AF_ALG] {
            assert_eq!(
                socket(family as u64),
                errno_ret(libc::EAFNOSUPPORT),
                "family {family}"
            );
        }
        // The kernel reads the family as an int: high bits do not hide AF_VSOCK.
        assert_eq!(
            socket((1 << 32) | libc::AF_VSOCK as u64),
            errno_ret(libc::EAFNOSUPPORT)
        );
        // Calls after the rule's block are still decided by their number.
        assert_eq!(
            verdict_of(&sandbox, NATIVE_ARCH, libc::SYS_read as u32),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            verdict_of(&sandbox, NATIVE_ARCH, libc::SYS_mount as u32),
            errno_ret(libc::EPERM)
        );

        let worker = worker_program();
        let fcntl = |cmd: libc::c_int| {
            verdict_with(
                &worker,
                NATIVE_ARCH,
                libc::SYS_fcntl as u32,
                [1, cmd as u64, 0, 0, 0, 0],
            )
        };
        for cmd in [libc::F_SETOWN, F_SETSIG, F_SETOWN_EX] {
            assert_eq!(fcntl(cmd), errno_ret(libc::EPERM), "fcntl {cmd}");
        }
        for cmd in [libc::F_GETFL, libc::F_SETFD, libc::F_GETFD, libc::F_DUPFD_CLOEXEC] {
            assert_eq!(fcntl(cmd), libc::SECCOMP_RET_ALLOW, "fcntl {cmd}");
        }
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_setpriority,
            libc::SYS_sched_setaffinity,
        ] {
            assert_eq!(
                verdict_of(&worker, NATIVE_ARCH, nr as u32),
                errno_ret(libc::EPERM),
                "call {nr}"
            );
        }
    }

    #[test]
    fn the_confined_program_adds_the_workers_list() {
        let code = worker_program();
        for &nr in DENIED.iter().chain(WORKER_DENIED) {
            assert_eq!(
                verdict_of(&code, NATIVE_ARCH, nr as u32),
                errno_ret(libc::EPERM),
                "call {nr}"
            );
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_brk,
            libc::SYS_futex,
            libc::SYS_clone,
            libc::SYS_exit_group,
        ] {
            assert_eq!(
                verdict_of(&code, NATIVE_ARCH, nr as u32),
                libc::SECCOMP_RET_ALLOW,
                "call {nr}"
            );
        }
    }

    /// Under the real kernel: once confined, a process opens no file and no socket,
    /// signals no other process, and starts no program.
    #[test]
    fn a_confined_process_opens_signals_and_starts_nothing() {
        use std::os::unix::process::CommandExt;
        let filter = Program::confined();
        let parent = std::process::id() as libc::pid_t;
        let mut command = std::process::Command::new("/bin/true");
        // SAFETY: the closure calls only prctl, seccomp, open, socket, kill and close,
        // which are async-signal-safe; the filter and the path were made before the fork.
        unsafe {
            command.pre_exec(move || {
                filter.install()?;
                let denied = |r: libc::c_int| {
                    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
                };
                let opened = libc::open(c"/etc/hostname".as_ptr(), libc::O_RDONLY);
                if !denied(opened) {
                    return Err(std::io::Error::from_raw_os_error(libc::EEXIST));
                }
                if !denied(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0)) {
                    return Err(std::io::Error::from_raw_os_error(libc::EADDRINUSE));
                }
                // Signal 0 only checks that the signal could be sent.
                if !denied(libc::kill(parent, 0)) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        // Every check passed, and then the exec itself is refused.
        let err = command.spawn().expect_err("a confined process started a program");
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
    }
}
