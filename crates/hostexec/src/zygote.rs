//! Commands started by a workload's own pid 1 (the Linux provider's
//! instance init), which is already in the workload's namespaces, root
//! and cgroups: no process of the provider enters namespaces per command
//! (decision 046), and only the command itself joins the memory and pids
//! groups, which the init stays out of (decision 049).
//!
//! # Shape
//!
//! ```text
//! provider ──request (Launch address + 5 descriptors)──▶ init (pid 1 of the workload)
//!          ◀──reply (0 + pidfd of G', or errno)────────  └ clone(VM, NEWPID) ▶ G': pid 1 of a nested namespace
//!                                                                            └ clone(VM, VFORK) ▶ G'': confine, exec
//! ```
//!
//! The provider and the init share one address space (the init is a
//! `CLONE_VM` child of the provider, decision 043), so a request carries
//! the address of a [`Launch`] the provider built (program, confinement,
//! the stacks of G' and G''), not its bytes. The descriptors travel over a
//! `SOCK_SEQPACKET` socket pair as `SCM_RIGHTS`: the command's stdin,
//! stdout and stderr, the launch pipe (a failure code before the `exec`,
//! end of file once the program runs) and the status pipe (G' writes the
//! command's wait status). The reply carries G''s pidfd: the provider
//! signals G' through it and learns from it when G' (and with it
//! everything in the command's namespace) is gone. The init is G''s
//! parent and collects it.
//!
//! G' and G'' are the same code as the chain that enters from the host
//! (`enter`): a nested PID namespace per command, the workload user, no
//! capability, `no_new_privs`, the seccomp filters, the program's own
//! `execve`.
//!
//! # Lifetime of a launch
//!
//! G' runs on the launch's first stack until it exits. A [`Launch`] is
//! therefore freed only once G''s pidfd has reported its exit; a command
//! dropped while G' may still run is killed and its launch is freed by a
//! task that waits for that report (or leaked when no runtime is left to
//! wait: never unmapped under a running process).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd as _, OwnedFd, RawFd};
use std::sync::Arc;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncReadExt as _;
use tokio::io::Interest;

use crate::enter::{namespace_body, Chain, Confinement, CHILD_STACK, ENTER_FAILURE_BASE};
use crate::program::ProgramPlan;
use crate::running::{Running, Started};

/// The descriptor of the init's end of its request socket between
/// requests (the init moves it here before it reports readiness).
pub const INIT_SOCKET: RawFd = 3;
/// The descriptor of the init's `signalfd` for `SIGCHLD` (non-blocking).
pub const INIT_SIGNALS: RawFd = 4;
/// The descriptors of the join files of the instance's memory and pids
/// cgroups, which the init holds (closed where it has none) and each
/// command writes itself into just before its `execve`. The init,
/// which shares the provider's address space, stays out of those groups:
/// the OOM killer never weighs the provider's memory there, and the
/// workload's pids limit counts only its own processes (decision 049).
pub const INIT_COMMAND_CGROUPS: [RawFd; 2] = [5, 6];
/// Where the init puts a request's five descriptors (stdin, stdout,
/// stderr, launch, status) before it clones G', which finds them there.
const SLOTS: [RawFd; 5] = [10, 11, 12, 13, 14];

/// One command for an init to start: the program, its confinement and
/// the stacks of G' and G'', built by the provider before the request.
pub struct Launch {
    confine: Confinement,
    exec: ProgramPlan,
    stacks: Stacks,
    /// The [`INIT_COMMAND_CGROUPS`] the init holds, -1 for the rest.
    join: [RawFd; 2],
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("confine", &self.confine)
            .field("exec", &self.exec)
            .finish_non_exhaustive()
    }
}

impl Launch {
    pub(crate) fn new(
        confine: Confinement,
        exec: ProgramPlan,
        command_cgroups: usize,
    ) -> io::Result<Box<Launch>> {
        let mut join = [-1; 2];
        join[..command_cgroups].copy_from_slice(&INIT_COMMAND_CGROUPS[..command_cgroups]);
        Ok(Box::new(Launch {
            confine,
            exec,
            stacks: Stacks::new()?,
            join,
        }))
    }
}

/// Two [`CHILD_STACK`] stacks in one private mapping, unmapped on drop.
struct Stacks {
    base: *mut libc::c_void,
}

// SAFETY: the mapping is owned by this value alone; only its address moves
// between threads.
unsafe impl Send for Stacks {}
// SAFETY: as for `Send`: the value itself is never written through.
unsafe impl Sync for Stacks {}

impl Stacks {
    fn new() -> io::Result<Stacks> {
        crate::sys::map_stacks(2 * CHILD_STACK)
            .map(|base| Stacks { base })
            .ok_or_else(io::Error::last_os_error)
    }

    /// The lowest address of stack `i` (0 or 1).
    fn at(&self, i: usize) -> *mut libc::c_void {
        // SAFETY: within the mapping.
        unsafe { self.base.cast::<u8>().add(i * CHILD_STACK).cast() }
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours; its owner frees it only once no
        // process runs on it (see the module documentation).
        unsafe { crate::sys::unmap_stacks(self.base, 2 * CHILD_STACK) }
    }
}

/// The provider's end of an init's request socket. Requests are answered
/// in order; one is in flight at a time.
#[derive(Debug)]
pub struct Channel {
    socket: AsyncFd<OwnedFd>,
    turn: tokio::sync::Mutex<()>,
    /// How many of [`INIT_COMMAND_CGROUPS`] the init holds.
    command_cgroups: usize,
}

/// A connected pair of request sockets: (the provider's end, the init's
/// end), both close-on-exec. The init's end goes to the init before it
/// starts (it keeps it as [`INIT_SOCKET`]). Also reads, once per process,
/// the kernel's last capability number, which the init's
/// [`init_descriptors`] drops up to.
///
/// # Errors
///
/// The `socketpair` error.
pub fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    // What the init's `init_descriptors` drops, known before it is cloned.
    crate::enter::learn_last_capability();
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

impl Channel {
    /// The provider's end of a [`socket_pair`], registered with the
    /// current tokio runtime.
    ///
    /// # Errors
    ///
    /// Making it non-blocking or registering it failed.
    ///
    /// `command_cgroups`: how many of [`INIT_COMMAND_CGROUPS`] the init
    /// holds (at most two), which every command then joins.
    pub fn new(provider_end: OwnedFd, command_cgroups: usize) -> io::Result<Channel> {
        set_nonblocking(provider_end.as_fd())?;
        Ok(Channel {
            socket: register(provider_end, Interest::READABLE | Interest::WRITABLE)?,
            turn: tokio::sync::Mutex::new(()),
            command_cgroups: command_cgroups.min(INIT_COMMAND_CGROUPS.len()),
        })
    }

    /// Asks the init to start `launch` with the given stdio; waits until
    /// the program runs. In a task of its own, so that a caller that
    /// gives up cannot leave a reply unread or free a launch G' runs on.
    ///
    /// # Errors
    ///
    /// As `Command::spawn` reports a failed `pre_exec` (a plain `errno`
    /// for the program's `exec`, [`ENTER_FAILURE_BASE`]-encoded for a
    /// step of the chain), or the socket's or a pipe's error.
    pub(crate) async fn start(
        self: &Arc<Channel>,
        launch: Box<Launch>,
        stdin_piped: bool,
    ) -> io::Result<Running> {
        let channel = self.clone();
        tokio::spawn(async move { channel.start_here(launch, stdin_piped).await })
            .await
            .map_err(io::Error::other)?
    }

    async fn start_here(&self, launch: Box<Launch>, stdin_piped: bool) -> io::Result<Running> {
        let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC);
        let (stdin_read, stdin_write) = if stdin_piped {
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            // The host's null device, as `Stdio::null()` gives.
            #[allow(clippy::disallowed_methods)]
            let null = std::fs::File::open("/dev/null")?;
            (OwnedFd::from(null), None)
        };
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        let (launch_read, launch_write) = pipe()?;
        let (status_read, status_write) = pipe()?;
        let address = (std::ptr::from_ref::<Launch>(&launch) as usize as u64).to_le_bytes();
        let (code, pidfd) = {
            let _turn = self.turn.lock().await;
            let fds = [
                stdin_read.as_fd(),
                stdout_write.as_fd(),
                stderr_write.as_fd(),
                launch_write.as_fd(),
                status_write.as_fd(),
            ];
            self.send(&address, &fds).await?;
            self.receive().await?
        };
        // The command's ends now live in G' (or nowhere): only ours stay.
        drop((
            stdin_read,
            stdout_write,
            stderr_write,
            launch_write,
            status_write,
        ));
        let Some(pidfd) = pidfd.filter(|_| code == 0) else {
            // Nothing was cloned: the launch is free at once.
            drop(launch);
            return Err(io::Error::from_raw_os_error(
                ENTER_FAILURE_BASE + 5 * 1000 + code.clamp(0, 999),
            ));
        };
        set_nonblocking(pidfd.as_fd())?;
        let started = Started::new(
            Arc::new(register(pidfd, Interest::READABLE)?),
            launch,
            receiver(status_read)?,
        );
        let mut report = [0u8; 4];
        let mut got = 0;
        let mut launch_pipe = receiver(launch_read)?;
        while got < 4 {
            match launch_pipe.read(&mut report[got..]).await? {
                0 => break,
                n => got += n,
            }
        }
        if got == 4 {
            // A step failed or the program could not be executed; G' ends
            // on its own (dropping `started` waits for that, then frees).
            return Err(io::Error::from_raw_os_error(i32::from_le_bytes(report)));
        }
        Ok(Running::started(
            stdin_write.map(sender).transpose()?,
            receiver(stdout_read)?,
            receiver(stderr_read)?,
            started,
        ))
    }

    async fn send(&self, payload: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        loop {
            let mut ready = self.socket.writable().await?;
            let sent = ready.try_io(|s| {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(5))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                control.push(SendAncillaryMessage::ScmRights(fds));
                rustix::net::sendmsg(
                    s.get_ref(),
                    &[IoSlice::new(payload)],
                    &mut control,
                    SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
                )
                .map_err(io::Error::from)
            });
            match sent {
                Ok(r) => return r.map(drop),
                Err(_would_block) => continue,
            }
        }
    }

    async fn receive(&self) -> io::Result<(i32, Option<OwnedFd>)> {
        loop {
            let mut ready = self.socket.readable().await?;
            let got = ready.try_io(|s| {
                let mut code = [0u8; 4];
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
                let mut control = RecvAncillaryBuffer::new(&mut space);
                let msg = rustix::net::recvmsg(
                    s.get_ref(),
                    &mut [IoSliceMut::new(&mut code)],
                    &mut control,
                    RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
                )?;
                if msg.bytes == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the instance's init closed its request socket",
                    ));
                }
                let mut pidfd = None;
                for message in control.drain() {
                    if let RecvAncillaryMessage::ScmRights(fds) = message {
                        for fd in fds {
                            pidfd.get_or_insert(fd);
                        }
                    }
                }
                Ok((i32::from_le_bytes(code), pidfd))
            });
            match got {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }
}

/// `fd` registered with the current runtime's reactor for `interest`.
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` stays open, and names the same description,
    // for as long as the `AsyncFd` owns it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

fn receiver(fd: OwnedFd) -> io::Result<tokio::net::unix::pipe::Receiver> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
}

fn sender(fd: OwnedFd) -> io::Result<tokio::net::unix::pipe::Sender> {
    tokio::net::unix::pipe::Sender::from_owned_fd(fd)
}

/// A request an init can serve: `launch` on `channel`, with the working
/// directory's messages, credentials and filters of its confinement.
#[derive(Debug)]
pub struct Request {
    pub(crate) channel: Arc<Channel>,
    pub(crate) launch: Box<Launch>,
}

impl Request {
    /// A request for `program` (its own `execve` and `PATH` lookup, as
    /// [`crate::command::prepare`] builds it) in `working_directory`, as
    /// `credentials` under `filters`.
    ///
    /// # Errors
    ///
    /// `None` for a NUL byte in the working directory, the executable, an
    /// argument or the environment; the stacks' `mmap` error otherwise.
    pub(crate) fn new(
        channel: Arc<Channel>,
        working: CString,
        working_directory: &str,
        credentials: crate::Credentials,
        filters: Vec<crate::seccomp::SeccompFilter>,
        exec: ProgramPlan,
    ) -> io::Result<Request> {
        // The init emptied its bounding set (`init_descriptors`).
        let confine = Confinement::new(working, working_directory, credentials, filters, true);
        let join = channel.command_cgroups;
        Ok(Request {
            channel,
            launch: Launch::new(confine, exec, join)?,
        })
    }
}

/// The init's side, after it reported readiness: collects every child
/// as it ends (`SIGCHLD` through [`INIT_SIGNALS`]) and starts each
/// command the provider asks for on [`INIT_SOCKET`], until it is killed.
/// When the provider's end closes, it only collects children. Never
/// returns.
///
/// Runs in a process that shares the provider's memory: only rustix
/// calls, which never touch `errno`, except `dup3` and `clone`, whose
/// `errno` is read only on their failure (see `serve_one`).
pub fn serve() -> ! {
    // SAFETY: the init keeps both descriptors open for its whole life.
    let (sock, signals) = unsafe {
        (
            BorrowedFd::borrow_raw(INIT_SOCKET),
            BorrowedFd::borrow_raw(INIT_SIGNALS),
        )
    };
    let mut serving = true;
    loop {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [
            PollFd::new(&signals, PollFlags::IN),
            PollFd::new(&sock, PollFlags::IN),
        ];
        let n = if serving { 2 } else { 1 };
        if poll(&mut fds[..n], None).is_err() {
            continue;
        }
        let (sig_ready, sock_ready) = (
            !fds[0].revents().is_empty(),
            serving && !fds[1].revents().is_empty(),
        );
        if sig_ready {
            let mut info = [0u8; 128];
            while matches!(rustix::io::read(signals, &mut info), Ok(n) if n > 0) {}
            while let Ok(Some(_)) =
                rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG)
            {}
        }
        if sock_ready {
            serving = serve_one(sock);
        }
    }
}

/// Reads one request and answers it; `false` once the provider's end is
/// closed (or the socket failed). Leaves the init holding only
/// [`INIT_SOCKET`] and [`INIT_SIGNALS`].
fn serve_one(sock: BorrowedFd<'_>) -> bool {
    let mut address = [0u8; 8];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(5))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = match rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut address)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    ) {
        Ok(m) => m,
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return true,
        Err(_) => return false,
    };
    if msg.bytes == 0 {
        return false;
    }
    let mut fds: [RawFd; 5] = [-1; 5];
    let mut count = 0;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            for fd in received {
                if count < fds.len() {
                    fds[count] = fd.into_raw_fd();
                    count += 1;
                }
                // Any more are dropped (closed) here.
            }
        }
    }
    let code = if msg.bytes != address.len() || count != fds.len() {
        (libc::EINVAL, -1)
    } else {
        start_g1(&fds, u64::from_le_bytes(address))
    };
    reply(sock, code.0, code.1);
    // Everything but the socket and the signalfd: the request's
    // descriptors, their slots and the pidfd.
    close_all_but_own();
    true
}

/// Puts a request's descriptors in [`SLOTS`] and clones G' on the
/// launch at `address`: (0, G''s pidfd) or (errno, -1).
fn start_g1(fds: &[RawFd; 5], address: u64) -> (i32, RawFd) {
    for (&fd, &slot) in fds.iter().zip(SLOTS.iter()) {
        // SAFETY: both are descriptors of this process; the slots are
        // above every descriptor the init holds between requests.
        if unsafe { libc::dup3(fd, slot, 0) } < 0 {
            return (crate::sys::errno(), -1);
        }
    }
    let Ok(address) = usize::try_from(address) else {
        return (libc::EINVAL, -1);
    };
    let launch = address as *mut Launch;
    let mut pidfd: libc::c_int = -1;
    // SAFETY: `launch` is the provider's `Launch`, alive until G' has
    // exited (the provider frees it only after G''s pidfd reports the
    // exit). G' runs on its first stack; the stack grows down from its
    // top. CLONE_PIDFD stores G''s pidfd in `pidfd`.
    let pid = unsafe {
        let stack = (*launch).stacks.at(0).cast::<u8>().add(CHILD_STACK).cast();
        libc::clone(
            g1_main,
            stack,
            libc::CLONE_VM | libc::CLONE_NEWPID | libc::CLONE_PIDFD | libc::SIGCHLD,
            launch.cast(),
            std::ptr::addr_of_mut!(pidfd),
        )
    };
    if pid < 0 {
        return (crate::sys::errno(), -1);
    }
    (0, pidfd)
}

/// Sends `code` and, when it is 0, `pidfd`.
fn reply(sock: BorrowedFd<'_>, code: i32, pidfd: RawFd) {
    let bytes = code.to_le_bytes();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    // SAFETY: `pidfd` is open until `close_all_but_own` after this call.
    let borrowed = (pidfd >= 0).then(|| unsafe { BorrowedFd::borrow_raw(pidfd) });
    let fds = borrowed.as_slice();
    if !fds.is_empty() {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    let _ = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(&bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    );
}

/// Closes every descriptor of the init but [`INIT_SOCKET`],
/// [`INIT_SIGNALS`] and [`INIT_COMMAND_CGROUPS`].
pub fn close_all_but_own() {
    // SAFETY: close_range only closes descriptors; it cannot fail for
    // these ranges, so it writes no `errno`.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, 2u32, 0u32);
        libc::syscall(libc::SYS_close_range, 7u32, u32::MAX, 0u32);
    }
}

/// G': pid 1 of the command's PID namespace, cloned by the init. Takes
/// its stdio from the slots, keeps the launch and status pipes, and runs
/// the chain's G' body (which starts G'' and reports its status).
extern "C" fn g1_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the provider's `Launch`, alive until this process
    // has exited.
    let launch = unsafe { &*arg.cast::<Launch>() };
    // SAFETY: descriptor moves in this process's own table.
    unsafe {
        for (i, &slot) in SLOTS[..3].iter().enumerate() {
            libc::dup2(slot, i as RawFd);
        }
        // The init's socket and signalfd; the join files of the groups
        // G'' joins stay.
        libc::syscall(libc::SYS_close_range, 3u32, 4u32, 0u32);
        libc::syscall(libc::SYS_close_range, 7u32, (SLOTS[3] - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (SLOTS[4] + 1) as u32, u32::MAX, 0u32);
    }
    let chain = Chain {
        confine: &launch.confine,
        exec: &launch.exec,
        launch: SLOTS[3],
        status: SLOTS[4],
        stacks: [launch.stacks.at(0), launch.stacks.at(1)],
        join: launch.join,
        failure: std::sync::atomic::AtomicI32::new(0),
    };
    namespace_body(&chain)
}

/// Moves the init's request socket to [`INIT_SOCKET`], a new
/// non-blocking `signalfd` for `SIGCHLD` to [`INIT_SIGNALS`] and
/// `command_cgroups` (the join files of the memory and pids groups, at
/// most two) to [`INIT_COMMAND_CGROUPS`]; `keep` (the init's readiness pipe) is moved
/// out of their way and returned. Then empties the init's capability
/// bounding set, which every command it starts inherits (a command need
/// not drop each capability again). For the init before it reports
/// readiness, with `SIGCHLD` already blocked; the init keeps its
/// effective capabilities.
///
/// # Errors
///
/// The `errno` of the failing call.
pub fn init_descriptors(
    socket: RawFd,
    keep: RawFd,
    command_cgroups: &[RawFd],
) -> Result<RawFd, i32> {
    // SAFETY: descriptor moves in the calling process's own table.
    unsafe {
        let moved = |fd: RawFd| {
            let m = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 100);
            if m < 0 {
                Err(crate::sys::errno())
            } else {
                Ok(m)
            }
        };
        let keep = moved(keep)?;
        let socket = moved(socket)?;
        let mut joins = [-1; 2];
        for (slot, &fd) in joins.iter_mut().zip(command_cgroups) {
            *slot = moved(fd)?;
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        let signals = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if signals < 0 {
            return Err(crate::sys::errno());
        }
        let signals = moved(signals)?;
        if libc::dup3(socket, INIT_SOCKET, libc::O_CLOEXEC) < 0
            || libc::dup3(signals, INIT_SIGNALS, libc::O_CLOEXEC) < 0
        {
            return Err(crate::sys::errno());
        }
        // Whatever a slot held before (a descriptor of the provider's
        // table) must not stay there.
        for (&fd, &slot) in joins.iter().zip(INIT_COMMAND_CGROUPS.iter()) {
            if fd < 0 {
                libc::close(slot);
            } else if libc::dup3(fd, slot, libc::O_CLOEXEC) < 0 {
                return Err(crate::sys::errno());
            }
        }
        crate::enter::drop_bounding_set()?;
        Ok(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slots_are_distinct_and_above_the_inits_own_descriptors() {
        assert!(SLOTS.iter().all(|&s| s > INIT_COMMAND_CGROUPS[1]));
        assert!(SLOTS.windows(2).all(|w| w[0] < w[1]));
        // `close_all_but_own` keeps exactly these four.
        assert_eq!(
            (INIT_SOCKET, INIT_SIGNALS, INIT_COMMAND_CGROUPS),
            (3, 4, [5, 6])
        );
    }

    #[test]
    fn a_socket_pair_carries_descriptors() {
        let (a, b) = socket_pair().unwrap();
        let (r, w) = rustix::pipe::pipe().unwrap();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [w.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
        rustix::net::sendmsg(&a, &[IoSlice::new(b"x")], &mut control, SendFlags::empty()).unwrap();
        drop(w);
        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let msg = rustix::net::recvmsg(
            &b,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::empty(),
        )
        .unwrap();
        assert_eq!(msg.bytes, 1);
        let mut got = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = m {
                got.extend(fds);
            }
        }
        assert_eq!(got.len(), 1);
        rustix::io::write(&got[0], b"ok").unwrap();
        drop(got);
        let mut buf = [0u8; 2];
        rustix::io::read(&r, &mut buf).unwrap();
        assert_eq!(&buf, b"ok");
    }
}
