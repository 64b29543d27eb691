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
/// and no program, and no signal reaches another process (the worker runs as steward's
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
    libc::SYS_fchownat,
    libc::SYS_truncate,
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
];

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

fn errno(code: libc::c_int) -> u32 {
    libc::SECCOMP_RET_ERRNO | (code as u32 & libc::SECCOMP_RET_DATA)
}

/// The program: check the architecture, then the call number against the lists
/// (`denied` fail with `EPERM`, [`ABSENT`] with `ENOSYS`). Every jump goes forward to
/// one of the three returns at the end.
fn program(denied: &[&[libc::c_long]]) -> Vec<Insn> {
    let mut code = vec![Insn {
        code: LOAD_WORD,
        jt: 0,
        jf: 0,
        k: ARCH_OFFSET,
    }];
    // Jump targets are patched once the returns' positions are known.
    enum Target {
        Next,
        Eperm,
        Enosys,
    }
    let mut jumps: Vec<(usize, Target, Target)> = Vec::new();
    jumps.push((code.len(), Target::Next, Target::Eperm));
    code.push(Insn {
        code: JUMP_EQ,
        jt: 0,
        jf: 0,
        k: NATIVE_ARCH,
    });
    code.push(Insn {
        code: LOAD_WORD,
        jt: 0,
        jf: 0,
        k: NR_OFFSET,
    });
    if let Some(bit) = X32_SYSCALL_BIT {
        jumps.push((code.len(), Target::Eperm, Target::Next));
        code.push(Insn {
            code: JUMP_GE,
            jt: 0,
            jf: 0,
            k: bit,
        });
    }
    let lists = denied.iter().map(|list| (*list, true)).chain([(ABSENT, false)]);
    for (list, target) in lists {
        for &nr in list {
            jumps.push((
                code.len(),
                if target { Target::Eperm } else { Target::Enosys },
                Target::Next,
            ));
            code.push(Insn {
                code: JUMP_EQ,
                jt: 0,
                jf: 0,
                k: nr as u32,
            });
        }
    }
    code.push(Insn {
        code: RETURN,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    });
    let eperm = code.len();
    code.push(Insn {
        code: RETURN,
        jt: 0,
        jf: 0,
        k: errno(libc::EPERM),
    });
    let enosys = code.len();
    code.push(Insn {
        code: RETURN,
        jt: 0,
        jf: 0,
        k: errno(libc::ENOSYS),
    });
    let offset = |at: usize, t: &Target| -> u8 {
        let to = match t {
            Target::Next => at + 1,
            Target::Eperm => eperm,
            Target::Enosys => enosys,
        };
        // Offsets count from the instruction after the jump. The lists are far
        // shorter than a u8's reach (a test checks); were one to outgrow it, the
        // kernel would refuse the program and the sandbox would say it cannot load it
        // (no script runs unfiltered).
        u8::try_from(to - at - 1).unwrap_or(u8::MAX)
    };
    for (at, on_true, on_false) in &jumps {
        code[*at].jt = offset(*at, on_true);
        code[*at].jf = offset(*at, on_false);
    }
    code
}

/// The program as bubblewrap reads it from a descriptor: `struct sock_filter`s in the
/// machine's byte order.
pub fn filter_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in program(&[DENIED]) {
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
        Program::of(program(&[DENIED]))
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
        Program::of(program(&[DENIED, WORKER_DENIED]))
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
        verdict_of(&program(&[DENIED]), arch, nr)
    }

    fn verdict_of(code: &[Insn], arch: u32, nr: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = code[pc];
            match i.code {
                LOAD_WORD => {
                    acc = if i.k == ARCH_OFFSET { arch } else { nr };
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
            assert_eq!(verdict(NATIVE_ARCH, nr as u32), errno(libc::EPERM), "call {nr}");
        }
        for &nr in ABSENT {
            assert_eq!(verdict(NATIVE_ARCH, nr as u32), errno(libc::ENOSYS), "call {nr}");
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
        assert_eq!(verdict(0x4000_0003, libc::SYS_read as u32), errno(libc::EPERM));
        if let Some(bit) = X32_SYSCALL_BIT {
            assert_eq!(
                verdict(NATIVE_ARCH, bit | libc::SYS_read as u32),
                errno(libc::EPERM)
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
        let code = program(&[DENIED]);
        assert_eq!(filter_bytes().len(), code.len() * 8);
        for code in [code, program(&[DENIED, WORKER_DENIED])] {
            // Jumps reach at most 255 instructions; the kernel takes up to 4096.
            assert!(code.len() < 255, "{} instructions", code.len());
            assert!(code.iter().all(|i| i.jt < u8::MAX && i.jf < u8::MAX));
        }
    }

    #[test]
    fn the_confined_program_adds_the_workers_list() {
        let code = program(&[DENIED, WORKER_DENIED]);
        for &nr in DENIED.iter().chain(WORKER_DENIED) {
            assert_eq!(
                verdict_of(&code, NATIVE_ARCH, nr as u32),
                errno(libc::EPERM),
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
