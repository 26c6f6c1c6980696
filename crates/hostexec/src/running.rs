//! A started command, whichever way it started: a supervisor the
//! provider forked (C', [`crate::command::prepare`]), which the provider
//! waits for as its child, or a command a workload's own pid 1 started
//! ([`crate::zygote`]), which the provider follows through G''s pidfd
//! and status pipe.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite};

use crate::zygote::Launch;

/// A command's stdin as the provider writes it.
pub type Input = Box<dyn AsyncWrite + Send + Unpin>;
/// A command's stdout or stderr as the provider reads it.
pub type Output = Box<dyn AsyncRead + Send + Unpin>;

/// A command that runs (its program was executed).
pub struct Running {
    /// Its stdin, when it was started with a piped one.
    pub stdin: Option<Input>,
    /// Its stdout.
    pub stdout: Option<Output>,
    /// Its stderr.
    pub stderr: Option<Output>,
    kind: Kind,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("stdin", &self.stdin.is_some())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Kind {
    /// C', the provider's own child.
    Forked(tokio::process::Child),
    /// G', the workload init's child.
    Started(Started),
}

/// How the provider signals a running command.
#[derive(Debug, Clone)]
pub enum Signaller {
    /// The host pid of C' (see [`crate::command::kill_chain`]).
    Supervisor(rustix::process::Pid),
    /// G''s pidfd.
    PidFd(Arc<AsyncFd<OwnedFd>>),
    /// Nothing left to signal.
    None,
}

impl Signaller {
    /// Sends `signal` to the command's outermost supervisor, which
    /// forwards SIGINT and SIGTERM to the program and kills the chain on
    /// the kill chain signal (`SIGPWR`).
    ///
    /// # Errors
    ///
    /// The `kill` or `pidfd_send_signal` error.
    pub fn send(&self, signal: rustix::process::Signal) -> io::Result<()> {
        match self {
            Signaller::Supervisor(pid) => Ok(rustix::process::kill_process(*pid, signal)?),
            Signaller::PidFd(fd) => Ok(rustix::process::pidfd_send_signal(fd.get_ref(), signal)?),
            Signaller::None => Ok(()),
        }
    }

    /// Ends the command and everything it started: for C', the kill
    /// chain signal (every supervisor collected by its parent); for G',
    /// `SIGKILL` (the init collects it, the kernel ends its namespace).
    ///
    /// # Errors
    ///
    /// As [`Signaller::send`].
    pub fn kill_chain(&self) -> io::Result<()> {
        match self {
            Signaller::Supervisor(_) => self.send(rustix::process::Signal::POWER),
            _ => self.send(rustix::process::Signal::KILL),
        }
    }
}

impl Running {
    pub(crate) fn forked(mut child: tokio::process::Child) -> Running {
        Running {
            stdin: child.stdin.take().map(|w| Box::new(w) as Input),
            stdout: child.stdout.take().map(|r| Box::new(r) as Output),
            stderr: child.stderr.take().map(|r| Box::new(r) as Output),
            kind: Kind::Forked(child),
        }
    }

    pub(crate) fn started(
        stdin: Option<tokio::net::unix::pipe::Sender>,
        stdout: tokio::net::unix::pipe::Receiver,
        stderr: tokio::net::unix::pipe::Receiver,
        started: Started,
    ) -> Running {
        Running {
            stdin: stdin.map(|w| Box::new(w) as Input),
            stdout: Some(Box::new(stdout)),
            stderr: Some(Box::new(stderr)),
            kind: Kind::Started(started),
        }
    }

    /// How to signal the command.
    pub fn signaller(&self) -> Signaller {
        match &self.kind {
            Kind::Forked(child) => child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw)
                .map_or(Signaller::None, Signaller::Supervisor),
            Kind::Started(s) => Signaller::PidFd(s.pidfd.clone()),
        }
    }

    /// Waits until the command and everything in its PID namespace has
    /// ended; its wait status (killed by `SIGKILL` when its supervisor
    /// was killed before it could report).
    ///
    /// # Errors
    ///
    /// Waiting failed.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.kind {
            Kind::Forked(child) => child.wait().await,
            Kind::Started(s) => s.wait().await,
        }
    }

    /// Kills the command's whole chain and waits for its supervisor,
    /// within [`crate::command::KILL_CHAIN_BOUND`] (then `SIGKILL`).
    pub async fn kill_chain(&mut self) {
        match &mut self.kind {
            Kind::Forked(child) => crate::command::kill_chain(child).await,
            Kind::Started(s) => {
                let _ = rustix::process::pidfd_send_signal(
                    s.pidfd.get_ref(),
                    rustix::process::Signal::KILL,
                );
                let _ = tokio::time::timeout(crate::command::KILL_CHAIN_BOUND, s.gone()).await;
            }
        }
    }

    /// Starts killing the command without waiting (as a drop does).
    pub fn start_kill(&mut self) {
        match &mut self.kind {
            Kind::Forked(child) => {
                let _ = child.start_kill();
            }
            Kind::Started(s) => {
                let _ = rustix::process::pidfd_send_signal(
                    s.pidfd.get_ref(),
                    rustix::process::Signal::KILL,
                );
            }
        }
    }
}

/// G' as the provider follows it: its pidfd, its status pipe and the
/// launch it runs on, freed once the pidfd reports its exit.
#[derive(Debug)]
pub(crate) struct Started {
    pidfd: Arc<AsyncFd<OwnedFd>>,
    status: tokio::net::unix::pipe::Receiver,
    launch: Option<Box<Launch>>,
    /// The wait status once read.
    exit: Option<ExitStatus>,
}

impl Started {
    pub(crate) fn new(
        pidfd: Arc<AsyncFd<OwnedFd>>,
        launch: Box<Launch>,
        status: tokio::net::unix::pipe::Receiver,
    ) -> Started {
        Started {
            pidfd,
            status,
            launch: Some(launch),
            exit: None,
        }
    }

    /// Waits until G' has exited, then frees its launch.
    async fn gone(&mut self) {
        if self.launch.is_none() {
            return;
        }
        // A pidfd is readable once its process has exited.
        if let Ok(mut ready) = self.pidfd.readable().await {
            ready.retain_ready();
            self.launch = None;
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exit {
            return Ok(status);
        }
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.status.read(&mut buf[got..]).await? {
                0 => break,
                n => got += n,
            }
        }
        self.gone().await;
        let status = if got == 4 {
            ExitStatus::from_raw(i32::from_le_bytes(buf))
        } else {
            // G' was killed before it could report.
            ExitStatus::from_raw(libc::SIGKILL)
        };
        self.exit = Some(status);
        Ok(status)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let Some(launch) = self.launch.take() else {
            return;
        };
        // G' may still run on the launch's stack: kill it, and free the
        // launch only once the pidfd reports its exit.
        let _ =
            rustix::process::pidfd_send_signal(self.pidfd.get_ref(), rustix::process::Signal::KILL);
        let pidfd = self.pidfd.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if pidfd.readable().await.is_ok() {
                        drop(launch);
                    } else {
                        std::mem::forget(launch);
                    }
                });
            }
            // No runtime to wait in: never unmap a stack a process may
            // still run on.
            Err(_) => std::mem::forget(launch),
        }
    }
}
