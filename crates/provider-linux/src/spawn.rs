//! Starting an instance's init (pid 1 of a fresh set of namespaces): the
//! crate's only code between `fork` and `exec`. Commands entering an
//! instance are started by the shared `checkfu_sandbox_hostexec` crate
//! (`provider/command.rs` hands it the init's namespaces, root, cgroups,
//! the workload user and the default filter).
//!
//! # Shape
//!
//! ```text
//! provider ──clone(VM, mnt pid net uts ipc)──▶ G: pid 1 of the instance
//!                                              joins the cgroups, mounts, pivot_root, waits
//! ```
//!
//! Killing the instance's init kills every process of the instance and of
//! every PID namespace nested in it (each command's own).
//!
//! # Rules for the code here
//!
//! G shares the provider's address space (`CLONE_VM`, decision 043): no
//! copy of the provider's page tables per instance. It is cloned by a
//! spawner thread that does nothing else, so the `errno` G shares is that
//! thread's, which it reads only when a `clone` fails (`clone_on_spawner`;
//! the provider's thread that asked waits for G's report on a pipe).
//! Before its report a failing call ends G, and on the usual path none is
//! made to fail (the capability bounding set is dropped up to the kernel's last
//! number, decision 051); after it G makes only rustix calls, which never
//! touch `errno`, on a stack of its own that is unmapped once G is
//! collected.
//!
//! The provider is multi-threaded; a forked child only runs system calls
//! on data prepared before the fork (C strings, descriptors), never
//! allocates, and ends in `exec` or `_exit`. That is why this module uses
//! `libc` directly and `unsafe`: each block states what it relies on.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use checkfu_sandbox_hostexec::sys::{errno, read_full, write_all};
use checkfu_sandbox_hostexec::zygote;

/// What a forked child reports through the readiness pipe when a step of
/// the instance set-up fails: the step and `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SetupFailure {
    /// Which step (see [`step_name`]).
    pub(crate) step: u8,
    /// The `errno` it failed with.
    pub(crate) errno: i32,
}

impl SetupFailure {
    /// Whether the init had mounted the instance's root when this step
    /// failed: the start (1, 2), the cgroup join (15), making the mount
    /// tree private (3) and the root's mount itself (4) come first; every
    /// other step runs with the root mounted.
    pub(crate) fn root_was_mounted(&self) -> bool {
        !matches!(self.step, 1..=4 | 15)
    }
}

/// The name of a set-up step, for error messages.
pub(crate) fn step_name(step: u8) -> &'static str {
    match step {
        1 => "unshare(mount, pid, net, uts, ipc)",
        2 => "fork of the instance init",
        3 => "making the mount tree private",
        4 => "mounting the root file system",
        5 => "bind-mounting a mount or the output tree",
        6 => "remounting a bind read-only",
        7 => "mounting /proc",
        8 => "protecting /proc (read-only /proc/sys, masked files)",
        9 => "mounting /dev",
        10 => "creating a /dev node",
        11 => "pivot_root into the root file system",
        12 => "detaching the old root",
        13 => "setting the host name",
        14 => "bringing the loopback interface up",
        15 => "joining the instance cgroups",
        16 => "setting up the init's request socket and bounding set",
        _ => "an unknown step",
    }
}

/// One bind mount of a provider-owned host directory.
#[derive(Debug, Clone)]
pub(crate) struct Bind {
    /// Host directory.
    pub(crate) source: CString,
    /// Mount point (a host path inside the instance's root before
    /// `pivot_root`).
    pub(crate) target: CString,
    /// Remount read-only.
    pub(crate) read_only: bool,
}

/// How the instance's root file system is made.
#[derive(Debug, Clone)]
pub(crate) enum RootMount {
    /// An overlay: `data` is `lowerdir=...,upperdir=...,workdir=...`.
    Overlay {
        /// Mount point.
        target: CString,
        /// Overlay options.
        data: CString,
    },
    /// A private copy bound onto itself (where overlayfs is refused).
    Copy {
        /// The copy, also the mount point.
        target: CString,
    },
}

/// Everything the instance init needs, prepared before the fork.
#[derive(Debug)]
pub(crate) struct InitPlan {
    pub(crate) root: RootMount,
    /// Root path (same as the root mount's target).
    pub(crate) root_path: CString,
    pub(crate) binds: Vec<Bind>,
    /// `<root>/proc`.
    pub(crate) proc_dir: CString,
    /// `<root>/proc/sys` and the other read-only /proc paths.
    pub(crate) proc_read_only: Vec<CString>,
    /// /proc files masked with /dev/null.
    pub(crate) proc_masked: Vec<CString>,
    /// Whether the init checks that each /proc entry exists before it
    /// mounts over it (the lists could not be probed beforehand).
    pub(crate) proc_check_each: bool,
    /// `<root>/dev`, to mount a tmpfs on; `None` where the root shows
    /// `/dev` already (an overlay whose shared tree holds the nodes and
    /// links, `crate::image::dev_ready`), with no nodes and links to add.
    pub(crate) dev_dir: Option<CString>,
    /// (host device, node path inside `<root>/dev`).
    pub(crate) dev_nodes: Vec<(CString, CString)>,
    /// (link target, link path inside `<root>/dev`).
    pub(crate) dev_links: Vec<(CString, CString)>,
    /// Host `/dev/null`.
    pub(crate) dev_null: CString,
    pub(crate) hostname: CString,
    /// `cgroup.procs` (or `tasks`) files the init joins, open for
    /// writing: every instance group but the memory and pids groups.
    pub(crate) cgroups: Vec<OwnedFd>,
    /// The memory and pids groups' join files, which the init keeps for
    /// each command to join (decision 049); empty without cgroups.
    pub(crate) command_cgroups: Vec<OwnedFd>,
    /// The init's end of its request socket
    /// ([`checkfu_sandbox_hostexec::zygote`]).
    pub(crate) requests: Option<OwnedFd>,
    /// The default filters, installed by the init after it has reported
    /// readiness and before it starts any command: every command inherits
    /// them (decision 046). Static: the plan is gone by then.
    pub(crate) filters: &'static [checkfu_sandbox_hostexec::seccomp::SeccompFilter],
}

fn join_cgroups(cgroups: &[RawFd]) -> Result<(), i32> {
    for &fd in cgroups {
        // SAFETY: writes two bytes from a static buffer.
        let n = unsafe { libc::write(fd, b"0\n".as_ptr().cast(), 2) };
        if n < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// The instance's host-side handles, as the parent learns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StartedInit {
    /// Host pid of the init (pid 1 inside).
    pub(crate) pid: i32,
}

/// Clones the instance init (see the module documentation) and waits until
/// it is set up. Blocking: call from a blocking task.
///
/// The init is this process's own child (the host's pid 1 may not reap
/// orphans), so [`reap`] collects it after it is killed.
///
/// # Errors
///
/// The step that failed and its `errno`, or an i/o error of the clone or
/// the readiness pipe.
pub(crate) fn start_init(plan: &InitPlan) -> Result<StartedInit, InitError> {
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| InitError::Io(io::Error::from(e)))?;
    let cgroup_fds: Vec<RawFd> = plan.cgroups.iter().map(AsRawFd::as_raw_fd).collect();
    let stack = InitStack::new().map_err(InitError::Io)?;
    let mut args = InitArgs {
        plan,
        cgroups: &cgroup_fds,
        wfd: write_end.as_raw_fd(),
        requests: plan
            .requests
            .as_ref()
            .map(AsRawFd::as_raw_fd)
            .ok_or_else(|| InitError::Io(io::Error::other("the init has no request socket")))?,
    };
    let flags = libc::CLONE_VM
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::SIGCHLD;
    let pid = clone_on_spawner(Clone {
        args: std::ptr::addr_of_mut!(args).cast(),
        stack_top: stack.top(),
        flags,
    });
    if pid < 0 {
        return Err(InitError::Setup(SetupFailure {
            step: 1,
            errno: -pid,
        }));
    }
    drop(write_end);
    let mut report = [0u8; 5];
    // The child shares this thread's `errno` until its report; `read_full`
    // never touches it.
    let got = read_full(read_end.as_raw_fd(), &mut report);
    // The stack stays mapped while the init lives: `reap` unmaps it.
    INIT_STACKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(pid, stack);
    if got == 5 && report[0] == 0 {
        return Ok(StartedInit { pid });
    }
    // The child exits after reporting (or died): collect it.
    reap(pid, true);
    if got != 5 {
        return Err(InitError::Io(io::Error::other(
            "the init exited during set-up without reporting",
        )));
    }
    Err(InitError::Setup(SetupFailure {
        step: report[0],
        errno: i32::from_le_bytes([report[1], report[2], report[3], report[4]]),
    }))
}

/// Bytes of the stack of an instance's init.
const INIT_STACK: usize = 256 * 1024;

/// The stack of one instance's init (a `CLONE_VM` child), unmapped when
/// the init has been collected.
struct InitStack {
    base: *mut libc::c_void,
}

// SAFETY: the mapping is owned by this value alone; only its address moves
// between threads.
unsafe impl Send for InitStack {}

impl InitStack {
    fn new() -> io::Result<Self> {
        checkfu_sandbox_hostexec::sys::map_stacks(INIT_STACK)
            .map(|base| InitStack { base })
            .ok_or_else(io::Error::last_os_error)
    }

    /// The top of the stack (it grows down).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping.
        unsafe { self.base.cast::<u8>().add(INIT_STACK).cast() }
    }
}

impl Drop for InitStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nobody runs on it any more.
        unsafe { checkfu_sandbox_hostexec::sys::unmap_stacks(self.base, INIT_STACK) }
    }
}

/// The stacks of this process's live inits, by host pid.
static INIT_STACKS: std::sync::Mutex<BTreeMap<i32, InitStack>> =
    std::sync::Mutex::new(BTreeMap::new());

/// One `clone` of an init, made by the spawner thread.
struct Clone {
    /// The init's `InitArgs`.
    args: *mut libc::c_void,
    /// The top of its stack.
    stack_top: *mut libc::c_void,
    /// The `clone` flags.
    flags: libc::c_int,
}

// SAFETY: the pointers are only passed on to `clone`; the caller keeps
// what they point to alive until the init has reported (see
// `start_init`).
unsafe impl Send for Clone {}

type CloneJob = (Clone, std::sync::mpsc::SyncSender<i32>);

/// Clones an init on the spawner thread: its pid, or `-errno`.
///
/// A `CLONE_VM` child shares the memory of the thread that clones it,
/// that thread's `errno` included, and so do the command processes the
/// init clones in turn. Every init is therefore cloned by one thread of
/// its own, started on first use, which does nothing else: the `errno`
/// they write is one no other code of the provider reads. (The spawner
/// itself reads it only when a `clone` fails, so a failure's number may
/// be another instance's in a rare race; it only names the failure.)
fn clone_on_spawner(job: Clone) -> i32 {
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<CloneJob>>> =
        std::sync::OnceLock::new();
    let jobs = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<CloneJob>();
        let spawned = std::thread::Builder::new()
            .name("checkfu-linux-init-spawner".into())
            .spawn(move || {
                while let Ok((job, reply)) = rx.recv() {
                    // SAFETY: the requester keeps the arguments and the
                    // stack alive until the init reports (`start_init`).
                    let pid = unsafe { libc::clone(init_main, job.stack_top, job.flags, job.args) };
                    let _ = reply.send(if pid < 0 { -errno().max(1) } else { pid });
                }
            });
        if let Err(e) = spawned {
            tracing::error!("starting the init spawner thread: {e}");
        }
        std::sync::Mutex::new(tx)
    });
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    let sent = jobs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((job, reply));
    if sent.is_err() {
        return -libc::EAGAIN;
    }
    answer.recv().unwrap_or(-libc::EAGAIN)
}

/// What the init reads before it reports readiness.
struct InitArgs<'a> {
    plan: &'a InitPlan,
    cgroups: &'a [RawFd],
    wfd: RawFd,
    requests: RawFd,
}

extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `start_init`'s `InitArgs`, alive until the report.
    let args = unsafe { &*arg.cast::<InitArgs<'_>>() };
    init_child(args.plan, args.cgroups, args.wfd, args.requests)
}

/// Collects the exit of `pid` if it is this process's child (`block`:
/// wait for it). Returns whether it was collected or is not ours.
pub(crate) fn reap(pid: i32, block: bool) -> bool {
    let mut status = 0;
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: waits for one pid; `status` is a local.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        if r == pid {
            // An init's stack is free once the init is collected.
            INIT_STACKS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&pid);
            return true;
        }
        return r < 0 && errno() == libc::ECHILD;
    }
}

/// Why an init could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InitError {
    /// A set-up step failed inside the child.
    #[error("{}: {}", step_name(.0.step), io::Error::from_raw_os_error(.0.errno))]
    Setup(SetupFailure),
    /// The readiness pipe failed.
    #[error("starting the init: {0}")]
    Io(io::Error),
}

fn g_fail(wfd: RawFd, step: u8) -> ! {
    let e = errno();
    let mut msg = [0u8; 5];
    msg[0] = step;
    msg[1..].copy_from_slice(&e.to_le_bytes());
    write_all(wfd, &msg);
    // SAFETY: ends the forked child.
    unsafe { libc::_exit(1) }
}

fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> bool {
    let p = |c: Option<&CStr>| c.map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string or null.
    unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) == 0 }
}

/// Binds the host's device node `host` onto `target`, then makes that
/// bind read-only: the device still reads and writes, but its inode (the
/// host's own node) cannot be chmodded, chowned or touched from inside,
/// which a uid 0 workload, the node's owner, could do otherwise.
fn bind_node_read_only(host: &CStr, target: &CStr) -> bool {
    mount(Some(host), target, None, libc::MS_BIND, None)
        && mount(
            None,
            target,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
            None,
        )
}

/// Brings `lo` up in the current network namespace.
fn loopback_up() -> bool {
    // SAFETY: a datagram socket and two ioctls on a zeroed `ifreq` naming
    // "lo"; the socket is closed after.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        let mut ok = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req) == 0;
        if ok {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            ok = libc::ioctl(s, libc::SIOCSIFFLAGS, &req) == 0;
        }
        libc::close(s);
        ok
    }
}

/// G: pid 1 of the instance. Joins the cgroups, builds the mount tree,
/// pivots into the root, reports readiness and reaps orphans until it is
/// killed. Never returns.
fn init_child(plan: &InitPlan, cgroups: &[RawFd], wfd: RawFd, requests: RawFd) -> ! {
    // SAFETY (whole function): system calls on prepared C strings.
    unsafe {
        if join_cgroups(cgroups).is_err() {
            g_fail(wfd, 15);
        }
        let root = c"/";
        if !mount(None, root, None, libc::MS_REC | libc::MS_PRIVATE, None) {
            g_fail(wfd, 3);
        }
        match &plan.root {
            RootMount::Overlay { target, data } => {
                let overlay = c"overlay";
                if !mount(
                    Some(overlay),
                    target,
                    Some(overlay),
                    0,
                    Some(data.as_c_str()),
                ) {
                    g_fail(wfd, 4);
                }
            }
            RootMount::Copy { target } => {
                if !mount(
                    Some(target),
                    target,
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    None,
                ) {
                    g_fail(wfd, 4);
                }
            }
        }
        for b in &plan.binds {
            if !mount(
                Some(&b.source),
                &b.target,
                None,
                libc::MS_BIND | libc::MS_REC,
                None,
            ) {
                g_fail(wfd, 5);
            }
            let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV;
            if b.read_only {
                flags |= libc::MS_RDONLY;
            }
            if !mount(None, &b.target, None, flags, None) {
                g_fail(wfd, 6);
            }
        }
        let proc_fs = c"proc";
        if !mount(
            Some(proc_fs),
            &plan.proc_dir,
            Some(proc_fs),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ) {
            g_fail(wfd, 7);
        }
        for p in &plan.proc_read_only {
            // A path this kernel does not have needs no protection.
            if plan.proc_check_each && libc::access(p.as_ptr(), libc::F_OK) != 0 {
                continue;
            }
            if !mount(Some(p), p, None, libc::MS_BIND | libc::MS_REC, None) {
                g_fail(wfd, 8);
            }
            let flags = libc::MS_BIND
                | libc::MS_REMOUNT
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC;
            if !mount(None, p, None, flags, None) {
                g_fail(wfd, 8);
            }
        }
        for p in &plan.proc_masked {
            // A file that does not exist on this kernel needs no mask.
            if (!plan.proc_check_each || libc::access(p.as_ptr(), libc::F_OK) == 0)
                && !bind_node_read_only(&plan.dev_null, p)
            {
                g_fail(wfd, 8);
            }
        }
        let tmpfs = c"tmpfs";
        let dev_opts = c"mode=755,size=65536k";
        if let Some(dev_dir) = &plan.dev_dir {
            if !mount(
                Some(tmpfs),
                dev_dir,
                Some(tmpfs),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                Some(dev_opts),
            ) {
                g_fail(wfd, 9);
            }
        }
        for (host, node) in &plan.dev_nodes {
            let fd = libc::open(
                node.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o666,
            );
            if fd < 0 {
                g_fail(wfd, 10);
            }
            libc::close(fd);
            if !bind_node_read_only(host, node) {
                g_fail(wfd, 10);
            }
        }
        for (target, link) in &plan.dev_links {
            if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                g_fail(wfd, 10);
            }
        }
        if libc::chdir(plan.root_path.as_ptr()) != 0 {
            g_fail(wfd, 11);
        }
        let dot = c".";
        if libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) != 0 {
            g_fail(wfd, 11);
        }
        if libc::umount2(dot.as_ptr(), libc::MNT_DETACH) != 0 {
            g_fail(wfd, 12);
        }
        if libc::chdir(root.as_ptr()) != 0 {
            g_fail(wfd, 12);
        }
        let host = plan.hostname.as_bytes();
        if libc::sethostname(host.as_ptr().cast(), host.len()) != 0 {
            g_fail(wfd, 13);
        }
        if !loopback_up() {
            g_fail(wfd, 14);
        }
        // Every signal blocked: the init waits for children through a
        // signalfd and for requests on its socket.
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        let mut joins = [-1; 2];
        for (slot, fd) in joins.iter_mut().zip(&plan.command_cgroups) {
            *slot = fd.as_raw_fd();
        }
        let count = plan.command_cgroups.len().min(joins.len());
        let wfd = match zygote::init_descriptors(requests, wfd, &joins[..count]) {
            Ok(moved) => moved,
            Err(_) => g_fail(wfd, 16),
        };
        // Read now: the plan is the provider's, gone after the report.
        let filters = plan.filters;
        write_all(wfd, &[0, 0, 0, 0, 0]);
        // The filters deny what the set-up above needed (mount,
        // pivot_root, sethostname) and nothing the init calls from here
        // on. Installed after the report, so that building the kernel's
        // copy of them (about 0.3 ms) overlaps the provider's work after
        // activation; before the first request is read, so that no
        // command ever runs without them. The init has CAP_SYS_ADMIN, so
        // it needs no `no_new_privs` (each command sets that itself). On
        // failure the init ends, and with it the instance: fail closed.
        // (`syscall` writes `errno` only when it fails.)
        for filter in filters {
            if checkfu_sandbox_hostexec::seccomp::install(filter) != 0 {
                libc::_exit(1);
            }
        }
    }
    // From here on the provider's thread runs again and shares this
    // process's memory: only rustix (raw system calls, no `errno`) and
    // this stack. Everything but the request socket and the signalfd is
    // closed (`close_range` cannot fail, so it writes no `errno`).
    zygote::close_all_but_own();
    zygote::serve()
}
