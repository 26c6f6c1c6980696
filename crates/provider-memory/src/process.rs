//! openProcess: a simulated long-lived process with real async byte streams
//! (spec "openProcess").
//!
//! Each stream is one end of a bounded [`tokio::io::duplex`] pipe of
//! [`PIPE_CAPACITY_BYTES`], exposed through `tokio_util::compat` as
//! `futures_io` streams: writes to `input` pend while the child does not
//! read (real backpressure), `output` ends with a real end of file when the
//! child ends, and closing `input` is the half-close the child observes as
//! end of file. The child is a tokio task; `signal` ends it with that signal,
//! and `wait` settles once and is re-readable. The provider imposes no idle
//! timeout and no output ceiling.
//!
//! Behaviours: `cat` (stdin or files, streamed), `head -c N` (from
//! `/dev/zero` or stdin, streamed), `sleep N` (waits N seconds of tokio
//! time: real time on a normal runtime, virtual in a paused test runtime;
//! the injected clock is not moved), `sh -c 'cat > PATH'` (the shell
//! creates or truncates PATH, then stdin is appended to it as it arrives),
//! and every other probe command, which runs to completion on the
//! instance's tree with standard input closed and then writes its output.
//! A `sh -c` script opening with `trap '' SIGNAL...` ignores those signals
//! (SIGTERM, SIGINT; SIGKILL cannot be ignored).

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::{
    ControlSignal, ProcessControl, ProcessExit, SandboxError, SandboxProcessRequest, SignalName,
};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

use crate::fs::basename;
use crate::probe::leading_simple_words;

/// Capacity of each simulated pipe, in bytes (Linux's default pipe size).
pub const PIPE_CAPACITY_BYTES: usize = 65_536;

/// The shared record of one process: its kill request, the signals it
/// ignores, and its exit.
#[derive(Debug)]
pub(crate) struct ProcessShared {
    kill: watch::Sender<Option<ControlSignal>>,
    ignored: Vec<ControlSignal>,
    exit: watch::Sender<Option<ProcessExit>>,
}

impl ProcessShared {
    /// A live process ignoring `ignored` (SIGKILL is never ignored).
    pub(crate) fn new(ignored: Vec<ControlSignal>) -> Arc<Self> {
        Arc::new(ProcessShared {
            kill: watch::Sender::new(None),
            ignored: ignored
                .into_iter()
                .filter(|s| *s != ControlSignal::Sigkill)
                .collect(),
            exit: watch::Sender::new(None),
        })
    }

    /// True until the exit is recorded.
    pub(crate) fn is_live(&self) -> bool {
        self.exit.borrow().is_none()
    }

    /// Requests the child end with `signal` (no effect once it exited or a
    /// signal is already pending).
    pub(crate) fn kill(&self, signal: ControlSignal) {
        if self.is_live() && !self.ignored.contains(&signal) {
            self.kill.send_if_modified(|pending| {
                if pending.is_none() {
                    *pending = Some(signal);
                    true
                } else {
                    false
                }
            });
        }
    }

    fn settle(&self, exit: ProcessExit) {
        self.exit.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(exit);
                true
            } else {
                false
            }
        });
    }
}

/// What the child does, prepared under the provider's lock.
#[derive(Debug)]
pub(crate) enum Plan {
    /// `cat`: each source in order, then exit 1 if any failed, else 0.
    Cat(Vec<CatSource>),
    /// `head -c N` of endless zeros.
    HeadZero(u64),
    /// `head -c N` of standard input.
    HeadStdin(u64),
    /// `sleep`.
    Sleep(Duration),
    /// A command that already ran on the tree: wait `delay`, write its output,
    /// exit with `code`.
    Finished {
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        code: u8,
        delay: Duration,
    },
    /// Blocks until signalled (a read of a fifo, say).
    Blocks,
    /// `cat > PATH`: standard input appended to a file as it arrives.
    CatToFile(Appender),
}

/// Appends bytes to the file a `cat > PATH` child writes (a no-op once the
/// file or its instance is gone, as writes to an unlinked file vanish).
pub(crate) struct Appender(pub(crate) AppendFn);

/// The append step of an [`Appender`].
pub(crate) type AppendFn = Box<dyn FnMut(&[u8]) + Send>;

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Appender")
    }
}

/// The `PATH` of a `sh -c 'cat > PATH'` request (one plain word, no
/// quoting or expansion), if that is what `request` is.
pub(crate) fn cat_redirect_target(request: &SandboxProcessRequest) -> Option<String> {
    let args = &request.arguments;
    if basename(&request.executable) != b"sh" || args.len() != 2 || args[0] != "-c" {
        return None;
    }
    let target = args[1]
        .trim()
        .strip_prefix("cat")?
        .trim_start()
        .strip_prefix('>')?;
    let target = target.trim();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    (!target.is_empty() && target.chars().all(plain)).then(|| target.to_string())
}

/// The signals a `sh -c` script ignores with leading `trap '' SIGNAL...`
/// statements.
pub(crate) fn ignored_signals(request: &SandboxProcessRequest) -> Vec<ControlSignal> {
    let args = &request.arguments;
    if basename(&request.executable) != b"sh" || args.len() != 2 || args[0] != "-c" {
        return Vec::new();
    }
    let statements = leading_simple_words(&args[1]);
    let mut ignored = Vec::new();
    for words in statements {
        if words.len() < 3 || words[0] != "trap" || !words[1].is_empty() {
            break;
        }
        for name in &words[2..] {
            match name.trim_start_matches("SIG") {
                "TERM" | "15" => ignored.push(ControlSignal::Sigterm),
                "INT" | "2" => ignored.push(ControlSignal::Sigint),
                _ => {}
            }
        }
    }
    ignored
}

/// One `cat` operand.
#[derive(Debug)]
pub(crate) enum CatSource {
    Stdin,
    Bytes(Vec<u8>),
    Zero,
    Blocks,
    Error(String),
}

/// The child's end of its three pipes.
pub(crate) struct ChildPipes {
    pub(crate) stdin: DuplexStream,
    pub(crate) stdout: DuplexStream,
    pub(crate) stderr: DuplexStream,
}

/// Reads standard input; with `eof_never`, end of file is never delivered.
async fn read_stdin(stdin: &mut DuplexStream, buf: &mut [u8], eof_never: bool) -> usize {
    let n = stdin.read(buf).await.unwrap_or(0);
    if n == 0 && eof_never {
        std::future::pending::<()>().await;
    }
    n
}

const BROKEN_PIPE: ProcessExit = ProcessExit::Signal(SignalName::Sigpipe);

async fn run_plan(plan: Plan, mut pipes: ChildPipes, eof_never: bool) -> ProcessExit {
    let zeros = vec![0u8; 8_192];
    match plan {
        Plan::Cat(sources) => {
            let mut code = 0;
            let mut buf = vec![0u8; 8_192];
            for s in sources {
                match s {
                    CatSource::Stdin => loop {
                        let n = read_stdin(&mut pipes.stdin, &mut buf, eof_never).await;
                        if n == 0 {
                            break;
                        }
                        if pipes.stdout.write_all(&buf[..n]).await.is_err() {
                            return BROKEN_PIPE;
                        }
                    },
                    CatSource::Bytes(b) => {
                        if pipes.stdout.write_all(&b).await.is_err() {
                            return BROKEN_PIPE;
                        }
                    }
                    CatSource::Zero => loop {
                        if pipes.stdout.write_all(&zeros).await.is_err() {
                            return BROKEN_PIPE;
                        }
                    },
                    CatSource::Blocks => std::future::pending::<()>().await,
                    CatSource::Error(msg) => {
                        let _ = pipes.stderr.write_all(msg.as_bytes()).await;
                        code = 1;
                    }
                }
            }
            ProcessExit::ExitCode(code)
        }
        Plan::HeadZero(n) => {
            let mut left = n;
            while left > 0 {
                let take = left.min(zeros.len() as u64) as usize;
                if pipes.stdout.write_all(&zeros[..take]).await.is_err() {
                    return BROKEN_PIPE;
                }
                left -= take as u64;
            }
            ProcessExit::ExitCode(0)
        }
        Plan::HeadStdin(n) => {
            let mut left = n;
            let mut buf = vec![0u8; 8_192];
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let got = read_stdin(&mut pipes.stdin, &mut buf[..want], eof_never).await;
                if got == 0 {
                    break;
                }
                if pipes.stdout.write_all(&buf[..got]).await.is_err() {
                    return BROKEN_PIPE;
                }
                left -= got as u64;
            }
            ProcessExit::ExitCode(0)
        }
        Plan::Sleep(d) => {
            tokio::time::sleep(d).await;
            ProcessExit::ExitCode(0)
        }
        Plan::Finished {
            stdout,
            stderr,
            code,
            delay,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let _ = pipes.stderr.write_all(&stderr).await;
            if pipes.stdout.write_all(&stdout).await.is_err() {
                return BROKEN_PIPE;
            }
            ProcessExit::ExitCode(code)
        }
        Plan::Blocks => std::future::pending().await,
        Plan::CatToFile(Appender(mut append)) => {
            let mut buf = vec![0u8; 8_192];
            loop {
                let n = read_stdin(&mut pipes.stdin, &mut buf, eof_never).await;
                if n == 0 {
                    return ProcessExit::ExitCode(0);
                }
                append(&buf[..n]);
            }
        }
    }
}

/// Starts the child task. Its pipes close when it ends; its exit is recorded
/// in `shared`.
pub(crate) fn spawn_child(
    shared: Arc<ProcessShared>,
    plan: Plan,
    pipes: ChildPipes,
    eof_never: bool,
) {
    let mut kill_rx = shared.kill.subscribe();
    tokio::spawn(async move {
        let killed = async {
            let sig = match kill_rx.wait_for(Option::is_some).await {
                Ok(sig) => sig.map(|s| s.name()),
                Err(_) => None,
            };
            match sig {
                Some(s) => s,
                None => std::future::pending().await,
            }
        };
        let exit = tokio::select! {
            exit = run_plan(plan, pipes, eof_never) => exit,
            sig = killed => ProcessExit::Signal(sig),
        };
        shared.settle(exit);
    });
}

/// The control handle given to the caller.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) shared: Arc<ProcessShared>,
}

fn settled(shared: &ProcessShared) -> impl Future<Output = ProcessExit> + '_ {
    let mut rx = shared.exit.subscribe();
    async move {
        let exit = match rx.wait_for(Option::is_some).await {
            Ok(exit) => *exit,
            // The sender lives in `shared`, which we borrow: unreachable.
            Err(_) => None,
        };
        exit.unwrap_or(ProcessExit::Signal(SignalName::Sigkill))
    }
}

#[async_trait]
impl ProcessControl for Control {
    async fn wait(&self) -> Result<ProcessExit, SandboxError> {
        Ok(settled(&self.shared).await)
    }

    async fn signal(&self, signal: ControlSignal) -> Result<(), SandboxError> {
        self.shared.kill(signal);
        Ok(())
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        self.shared.kill(ControlSignal::Sigkill);
        let _ = settled(&self.shared).await;
        Ok(())
    }
}
