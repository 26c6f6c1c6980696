//! Entering a running workload to run a command: the `pre_exec` body of
//! the command's `std::process::Command` (C') and the processes it starts.
//!
//! # Shape
//!
//! ```text
//! provider ──fork──▶ C' (host) join cgroups, setns(workload) chroot ──clone(VM)──▶ G1 (workload pid ns)
//!   (std Command)     └ mirrors G1's status,                      unshare(pid) ──clone(VM)──▶ G': pid 1 of a
//!                       forwards signals                                                     nested namespace
//!                                                                    └ clone(VM, VFORK) ▶ G'': confine, exec
//! ```
//!
//! Every command runs as the child of the pid 1 (G') of a PID namespace of
//! its own, nested in the workload's: when the command exits, or G' is
//! killed (C' killed: `PR_SET_PDEATHSIG`), the kernel kills everything
//! left in that namespace, so neither a background child nor `setsid`
//! outlives the command. Killing the workload's own pid 1 kills every
//! process of it and of every nested namespace.
//!
//! # Why the chain shares one address space
//!
//! C' is a `fork` of the provider, and a `fork` copies the page tables of
//! the whole provider; the copy is torn down again when the process exits.
//! Both costs grow with the provider's resident memory (measured: a warm
//! execute of `true` took 2.5 ms in a provider of a few MiB and 18.5 ms in
//! one holding 200 MiB). So only C' is a `fork`: G' and its supervisor
//! (G1 here) are `clone(CLONE_VM)` children running on stacks of their
//! own in C''s address space, and the command G'' is a
//! `clone(CLONE_VM | CLONE_VFORK)` child that execs the program itself,
//! the way `posix_spawn` does. One copy and one teardown per command
//! instead of four of each.
//!
//! Each of them is a process of its own (no `CLONE_THREAD`, no
//! `CLONE_FILES`, no `CLONE_SIGHAND`): separate descriptor tables, signal
//! dispositions, credentials and namespaces; they share only memory, and
//! touch only their own stack, the plan and the signal-safe calls below.
//! Nothing here reads `errno` across processes to decide anything but a
//! failure's message (the processes share the variable).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::program::ProgramPlan;
use crate::seccomp::SeccompFilter;
use crate::sys::{close_from, errno, read_full, write_all};
use crate::Credentials;

/// What confines a command once it is inside the workload: where it
/// starts, whom it runs as and its seccomp filters. Shared by both ways a
/// command starts (entering from the host, [`EnterPlan`], and through a
/// workload's own pid 1, [`crate::zygote`]).
#[derive(Debug)]
pub(crate) struct Confinement {
    /// Working directory inside the workload.
    pub(crate) working_directory: CString,
    /// Messages written to stderr (then exit 126) when `chdir` fails with
    /// ENOENT, ENOTDIR, EACCES or anything else.
    pub(crate) chdir_messages: [Vec<u8>; 4],
    /// The user, group and supplementary groups the command runs as.
    pub(crate) credentials: Credentials,
    /// The seccomp filters, oldest first, each installed as it is.
    pub(crate) filters: Vec<SeccompFilter>,
    /// Whether the process the command is started from has an empty
    /// capability bounding set already (a workload's own pid 1 empties
    /// its own once, [`crate::zygote::init_descriptors`]), so the command
    /// inherits it and need not drop each capability again.
    pub(crate) bounding_set_empty: bool,
}

impl Confinement {
    /// The confinement of a command started in `working_directory` (no
    /// NUL byte: the caller checked) as `credentials` under `filters`.
    pub(crate) fn new(
        working: CString,
        working_directory: &str,
        credentials: Credentials,
        filters: Vec<SeccompFilter>,
        bounding_set_empty: bool,
    ) -> Confinement {
        learn_last_capability();
        let message = |what: &str| format!("chdir to {working_directory:?}: {what}\n").into_bytes();
        Confinement {
            working_directory: working,
            chdir_messages: [
                message("no such file or directory"),
                message("not a directory"),
                message("permission denied"),
                message("cannot change into it"),
            ],
            credentials,
            filters,
            bounding_set_empty,
        }
    }
}

/// The kernel's last capability number, once [`learn_last_capability`]
/// read it; `u32::MAX` until then.
static LAST_CAPABILITY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// Reads the kernel's last capability number
/// (`/proc/sys/kernel/cap_last_cap`) once per process. For the provider,
/// before it forks or clones the processes that call
/// [`drop_bounding_set`]: they then drop exactly the kernel's
/// capabilities, and no `prctl` of theirs fails on the way, so none writes
/// the `errno` a `CLONE_VM` child shares with its parent's thread.
pub(crate) fn learn_last_capability() {
    use std::sync::atomic::Ordering;
    if LAST_CAPABILITY.load(Ordering::Relaxed) != u32::MAX {
        return;
    }
    // The host's own proc file, not a path of a workload's.
    #[allow(clippy::disallowed_methods)]
    let read = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap");
    if let Some(last) = read
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&n| n < 64)
    {
        LAST_CAPABILITY.store(last, Ordering::Relaxed);
    }
}

/// Drops every capability from the calling thread's bounding set
/// (`CAP_SETPCAP` in its effective set required); async-signal-safe.
/// Up to the last number [`learn_last_capability`] read; without it,
/// until the first number the kernel refuses with `EINVAL` (capabilities
/// are numbered without gaps).
///
/// # Errors
///
/// Any other refusal's `errno` (`ENOMEM`, say): the caller fails rather
/// than leave the rest of the set.
pub(crate) fn drop_bounding_set() -> Result<(), i32> {
    let last = LAST_CAPABILITY.load(std::sync::atomic::Ordering::Relaxed);
    let known = last != u32::MAX;
    let end = if known { last } else { 63 };
    for cap in 0..=libc::c_ulong::from(end) {
        // SAFETY: a prctl on the calling thread's own credentials.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let e = errno();
            if e == libc::EINVAL && !known {
                break;
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Everything a command needs to enter a workload, prepared before the
/// fork. Descriptors are `O_CLOEXEC`: a successful `exec` closes them.
#[derive(Debug)]
pub(crate) struct EnterPlan {
    /// Namespace files of the workload's pid 1, entered in this order
    /// (the mount namespace last).
    pub(crate) namespaces: Vec<OwnedFd>,
    /// `/proc/<pid 1>/root`.
    pub(crate) root: OwnedFd,
    /// `cgroup.procs` (or `tasks`) files C' joins.
    pub(crate) cgroups: Vec<OwnedFd>,
    /// The memory and pids groups' join files (at most two), which G''
    /// joins (decision 049).
    pub(crate) command_cgroups: Vec<OwnedFd>,
    /// Where the command starts, whom it runs as, its filters.
    pub(crate) confine: Confinement,
    /// The program to exec (its own `execve` and `PATH` lookup,
    /// [`crate::program`]); `None` is refused before anything is cloned.
    pub(crate) exec: Option<ProgramPlan>,
}

/// Base of the `errno` values [`enter`] reports for its own failures:
/// `ENTER_FAILURE_BASE + step * 1000 + errno`, so that they are never
/// taken for the program's `exec` failure (a plain `errno`).
pub(crate) const ENTER_FAILURE_BASE: i32 = 1_000_000;

/// Bytes of stack of each `CLONE_VM` child.
pub(crate) const CHILD_STACK: usize = 256 * 1024;

/// The name of a step of [`enter`], for error messages.
pub(crate) fn enter_step_name(step: i32) -> &'static str {
    match step {
        1 => "joining the instance cgroups",
        2 => "setns into the instance",
        3 => "chroot into the instance root",
        4 => "unshare of the command's pid namespace",
        5 => "fork of the command's supervisor",
        6 => "dropping to the workload user",
        7 => "dropping capabilities",
        8 => "no_new_privs",
        9 => "the seccomp filter",
        10 => "joining the instance's memory and pids cgroups",
        _ => "an unknown step",
    }
}

fn enter_code(step: i32) -> i32 {
    ENTER_FAILURE_BASE + step * 1000 + errno().clamp(0, 999)
}

fn enter_error(step: i32) -> io::Error {
    io::Error::from_raw_os_error(enter_code(step))
}

/// Signals C' and G' forward to the command.
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The signal that asks a supervisor to end its child with `SIGKILL` and
/// then end as that child did (never forwarded): the provider's way to
/// kill a command's whole chain so that every supervisor is collected by
/// its own parent. A `SIGKILL` of C' itself would leave G1 to whatever
/// reaps orphans on the host, and the workload's PID namespace waits for
/// that before it can be torn down.
pub(crate) const KILL_CHAIN: libc::c_int = libc::SIGPWR;

fn wait_set() -> libc::sigset_t {
    // SAFETY: initialises a local signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigaddset(&mut set, KILL_CHAIN);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Waits for `child`, forwarding the forwarded signals to it; returns its
/// wait status. Every signal waited for is blocked, so nothing is
/// interrupted and no `errno` is consulted.
fn supervise(child: libc::pid_t) -> libc::c_int {
    let set = wait_set();
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a local.
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG | libc::__WALL) };
        if r == child {
            return status;
        }
        if r < 0 {
            return 0;
        }
        // SAFETY: `info` is a local; the signals waited for are blocked.
        let sig = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::sigwaitinfo(&set, &mut info)
        };
        if sig == KILL_CHAIN {
            // SAFETY: kills our own child; the loop collects it.
            unsafe { libc::kill(child, libc::SIGKILL) };
        } else if sig > 0 && sig != libc::SIGCHLD {
            // SAFETY: forwards a signal to our own child.
            unsafe { libc::kill(child, sig) };
        }
    }
}

/// Ends the calling process the way `status` says its child ended.
fn mirror(status: libc::c_int) -> ! {
    // SAFETY: resets one signal's disposition, unblocks it and raises it;
    // `_exit` otherwise.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

fn block_forwarded() {
    let set = wait_set();
    // SAFETY: changes this process's signal mask.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn unblock_all() {
    // SAFETY: changes this process's signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// What the `CLONE_VM` children read, on the stack of the process that
/// clones them (which outlives them: it waits for them).
pub(crate) struct Chain<'a> {
    pub(crate) confine: &'a Confinement,
    pub(crate) exec: &'a ProgramPlan,
    /// Write end of the launch pipe: a failure code before the `exec`, end
    /// of file once the program runs (`O_CLOEXEC`) or the command exited.
    pub(crate) launch: RawFd,
    /// Write end of the status pipe G' reports the command's status on
    /// (set by G1 for G' and G'').
    pub(crate) status: RawFd,
    /// The stacks of G' and G''.
    pub(crate) stacks: [*mut libc::c_void; 2],
    /// Cgroup join files G'' writes itself into just before its
    /// `execve`, while it is still a `vfork` child (the memory and pids
    /// groups, which no supervisor joins, decision 049); -1 for none.
    pub(crate) join: [RawFd; 2],
    /// The failure code of G'', 0 while there is none: set by G'' before
    /// it exits, reported by G' on the launch pipe.
    pub(crate) failure: std::sync::atomic::AtomicI32,
}

/// Ends G'' with a failure `code`, which G' reports on the launch pipe
/// once the `vfork` returns: writing to a pipe can take memory, which
/// G'' may already be charged for in the workload's memory group.
fn command_fail(chain: &Chain<'_>, code: i32) -> ! {
    chain
        .failure
        .store(code, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: ends this process.
    unsafe { libc::_exit(1) }
}

/// Reports a failure code on the launch pipe and ends the process.
pub(crate) fn fail(launch: RawFd, code: i32) -> ! {
    write_all(launch, &code.to_le_bytes());
    // SAFETY: ends this process.
    unsafe { libc::_exit(1) }
}

/// `clone` of `main` sharing this address space, on `stack` (the top of
/// a [`CHILD_STACK`] region), as a child process (`SIGCHLD` on exit).
///
/// # Safety
///
/// `arg` must stay valid for as long as the child reads it, and `stack`
/// must be unused by anyone else.
pub(crate) unsafe fn clone_vm(
    main: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    stack: *mut libc::c_void,
    vfork: bool,
    arg: *mut libc::c_void,
) -> libc::pid_t {
    let mut flags = libc::CLONE_VM | libc::SIGCHLD;
    if vfork {
        flags |= libc::CLONE_VFORK;
    }
    // SAFETY: the caller's contract; the stack grows down from its top.
    unsafe {
        let top = stack.cast::<u8>().add(CHILD_STACK).cast::<libc::c_void>();
        libc::clone(main, top, flags, arg)
    }
}

/// G1: in the instance's PID namespace; its child G' is pid 1 of a
/// namespace nested in it. Mirrors G''s report of the command's status.
extern "C" fn supervisor_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is C''s `Chain`, alive until C' exits, and C' outlives
    // G1 or kills it (PR_SET_PDEATHSIG).
    let chain = unsafe { &*arg.cast::<Chain<'_>>() };
    // SAFETY (rest): system calls on the chain's descriptors and locals.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            fail(chain.launch, enter_code(4));
        }
        let mut status_pipe = [0; 2];
        if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            fail(chain.launch, enter_code(5));
        }
        let mut inner = Chain {
            confine: chain.confine,
            exec: chain.exec,
            launch: chain.launch,
            status: status_pipe[1],
            stacks: chain.stacks,
            join: chain.join,
            failure: std::sync::atomic::AtomicI32::new(0),
        };
        let g2 = clone_vm(
            namespace_main,
            chain.stacks[0],
            false,
            std::ptr::addr_of_mut!(inner).cast(),
        );
        if g2 < 0 {
            fail(chain.launch, enter_code(5));
        }
        close_from(0, Some(status_pipe[0]));
        let status = supervise(g2);
        let mut buf = [0u8; 4];
        let got = read_full(status_pipe[0], &mut buf);
        mirror(if got == 4 {
            i32::from_le_bytes(buf)
        } else {
            status
        })
    }
}

/// G': pid 1 of the command's own PID namespace. Starts the command and
/// reports its status; returning ends the namespace, and with it anything
/// the command left behind.
extern "C" fn namespace_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is G1's `Chain`; G1 outlives G' or kills it.
    let chain = unsafe { &*arg.cast::<Chain<'_>>() };
    // SAFETY: the death signal of this process only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    namespace_body(chain)
}

/// The body of G' (see [`namespace_main`]): starts G'' on the chain's
/// second stack, waits for it and writes its wait status to the status
/// pipe. Never returns.
pub(crate) fn namespace_body(chain: &Chain<'_>) -> ! {
    // SAFETY (whole function): system calls on the chain's descriptors
    // and locals; `chain` outlives G'' until it execs (CLONE_VFORK).
    unsafe {
        // With CLONE_VFORK this returns once the command has exec'd or
        // exited; `chain` stays valid meanwhile.
        let g3 = clone_vm(
            command_main,
            chain.stacks[1],
            true,
            std::ptr::from_ref(chain).cast_mut().cast(),
        );
        if g3 < 0 {
            fail(chain.launch, enter_code(5));
        }
        // G'' exec'd (its launch descriptor closed with the exec) or
        // failed, leaving its code here.
        let failed = chain.failure.load(std::sync::atomic::Ordering::Relaxed);
        if failed != 0 {
            write_all(chain.launch, &failed.to_le_bytes());
        }
        close_from(0, Some(chain.status));
        let status = supervise(g3);
        write_all(chain.status, &status.to_le_bytes());
        libc::_exit(0)
    }
}

/// G'': drops to the workload user, empties every capability set, sets
/// `no_new_privs`, loads the seccomp filters and execs the program.
extern "C" fn command_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is G1's `Chain`; G' is suspended until this process
    // execs or exits (CLONE_VFORK).
    let chain = unsafe { &*arg.cast::<Chain<'_>>() };
    let plan = chain.confine;
    // SAFETY (rest): system calls on buffers prepared before the fork.
    unsafe {
        // Until its `execve` this process shares the address space of its
        // supervisors, which is the provider's own on the path through
        // the workload's init (C''s copy of it on the path from the
        // host). Once it has dropped its capabilities, a workload process
        // with its uid (a uid 0 workload, whose ids do not change, or any
        // uid where `fs.suid_dumpable` is 1) passes the kernel's ptrace
        // access check on it, and `/proc/<pid>/mem`, `environ` and
        // `maps` (no system call the filter could refuse) would read and
        // write that address space for as long as they stay open. Not
        // dumpable, it needs `CAP_SYS_PTRACE`. The flag belongs to the
        // address space, so the provider (root) is not dumpable from
        // here on either; the program's `execve` gives it a fresh one.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::close(chain.status);
        // Nothing but stdio reaches the program: descriptors the provider
        // inherited without close-on-exec (its own caller's, say) would
        // otherwise be the workload's way to host files. Marked, not
        // closed: the launch pipe must stay open until the exec.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        unblock_all();
        if libc::chdir(plan.working_directory.as_ptr()) != 0 {
            let msg = match errno() {
                libc::ENOENT => &plan.chdir_messages[0],
                libc::ENOTDIR => &plan.chdir_messages[1],
                libc::EACCES => &plan.chdir_messages[2],
                _ => &plan.chdir_messages[3],
            };
            write_all(2, msg);
            libc::_exit(126);
        }
        // Inherited empty from a workload's pid 1, or dropped here.
        if !plan.bounding_set_empty && drop_bounding_set().is_err() {
            command_fail(chain, enter_code(7));
        }
        // Raw system calls: the C library's wrappers would broadcast the
        // change to the threads it believes this process has.
        let creds = &plan.credentials;
        let (uid, gid) = (libc::c_long::from(creds.uid), libc::c_long::from(creds.gid));
        if libc::syscall(
            libc::SYS_setgroups,
            creds.groups.len(),
            creds.groups.as_ptr(),
        ) != 0
            || libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0
            || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
        {
            command_fail(chain, enter_code(6));
        }
        // No capability survives, for uid 0 too (setuid(0) keeps them).
        #[repr(C)]
        struct CapHeader {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        struct CapData {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = CapHeader {
            version: 0x2008_0522,
            pid: 0,
        };
        let empty = || CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        };
        let data = [empty(), empty()];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            command_fail(chain, enter_code(7));
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            command_fail(chain, enter_code(8));
        }
        for filter in &plan.filters {
            if crate::seccomp::install(filter) != 0 {
                command_fail(chain, enter_code(9));
            }
        }
        // Last, once the program is found and just before its `execve`:
        // the groups that hold the memory and pids limits (decision 049).
        // Still a `vfork` child sharing its parent's address space, which
        // the OOM killer passes over; every step before was charged
        // outside the limit, so a limit too small for the program fails
        // its `execve` (or gets it killed), never a step of the start.
        // The join files were opened by the provider, whose credentials
        // the kernel checks.
        let failed = crate::program::exec_program(chain.exec, || {
            for &fd in &chain.join {
                if fd >= 0 && libc::write(fd, b"0\n".as_ptr().cast(), 2) < 0 {
                    return Err(enter_code(10));
                }
            }
            Ok(())
        });
        command_fail(
            chain,
            failed
                .err()
                .and_then(|e| e.raw_os_error())
                .unwrap_or(libc::EINVAL),
        )
    }
}

/// The `pre_exec` body of a command: runs in C' (forked by
/// `std::process::Command` after it set up stdio), enters the instance,
/// starts G1, G' and G'' (see the module documentation) and waits until
/// the program runs. Never returns `Ok`: C' stays the command's outermost
/// supervisor and ends the way the command ends.
///
/// # Errors
///
/// An `errno` from `setns`, `chroot`, `unshare` or `clone`
/// ([`ENTER_FAILURE_BASE`] encoded), or the program's `exec` failure (a
/// plain `errno`), which `Command::spawn` reports.
pub(crate) fn enter(plan: &EnterPlan) -> io::Result<()> {
    let Some(exec) = plan.exec.as_ref() else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY (whole function): system calls on descriptors and buffers
    // prepared before the fork; the chain lives on this stack until this
    // process ends.
    unsafe {
        for fd in &plan.cgroups {
            if libc::write(fd.as_raw_fd(), b"0\n".as_ptr().cast(), 2) < 0 {
                return Err(enter_error(1));
            }
        }
        for fd in &plan.namespaces {
            if libc::setns(fd.as_raw_fd(), 0) != 0 {
                return Err(enter_error(2));
            }
        }
        if libc::fchdir(plan.root.as_raw_fd()) != 0 || libc::chroot(c".".as_ptr()) != 0 {
            return Err(enter_error(3));
        }
        let Some(stacks) = crate::sys::map_stacks(3 * CHILD_STACK) else {
            return Err(enter_error(5));
        };
        let stack = |i: usize| stacks.cast::<u8>().add(i * CHILD_STACK).cast();
        let mut launch = [0; 2];
        if libc::pipe2(launch.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(enter_error(5));
        }
        block_forwarded();
        let mut chain = Chain {
            confine: &plan.confine,
            exec,
            launch: launch[1],
            status: -1,
            stacks: [stack(1), stack(2)],
            // C' joined the others before it entered.
            join: [0, 1].map(|i| plan.command_cgroups.get(i).map_or(-1, AsRawFd::as_raw_fd)),
            failure: std::sync::atomic::AtomicI32::new(0),
        };
        let g1 = clone_vm(
            supervisor_main,
            stack(0),
            false,
            std::ptr::addr_of_mut!(chain).cast(),
        );
        if g1 < 0 {
            return Err(enter_error(5));
        }
        libc::close(launch[1]);
        let mut report = [0u8; 4];
        if read_full(launch[0], &mut report) == 4 {
            // A step failed or the program could not be executed: `spawn`
            // reports it; G1 and its children end with this process.
            return Err(io::Error::from_raw_os_error(i32::from_le_bytes(report)));
        }
        // The program runs (or the command ended): keep nothing of the
        // command's stdio or of `Command`'s error pipe, so end of file and
        // spawn's answer come from the command alone.
        close_from(0, None);
        mirror(supervise(g1))
    }
}
