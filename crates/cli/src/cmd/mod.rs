//! One module per `checkfu sandbox` subcommand, and what they share.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_docker::conformance::DockerTarget;

pub mod backend;
pub mod capabilities;
pub mod cleanup;
pub mod cleanup_scope;
pub mod enroll;
pub mod enrolled;
pub mod fail;
pub mod faults;
pub mod fixture;
pub mod image;
pub mod images;
pub mod init;
pub mod keygen;
pub mod out;
pub mod run;
pub mod run_events;
pub mod run_flags;
pub mod schema;
pub mod serve;
pub mod served;
pub mod signed;
pub mod snapshots;
pub mod test;
pub mod verify;

/// Which provider a command talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderArg {
    /// The embedded deterministic memory oracle.
    Memory,
    /// The local Docker daemon.
    Docker,
    /// Linux namespaces, no daemon (needs root).
    Linux,
}

/// What `--provider` names: a built-in provider or an enrolled id
/// (`checkfu sandbox add`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderName {
    /// `memory`, `docker` or `linux`.
    Builtin(ProviderArg),
    /// An id enrolled in the providers registry.
    Enrolled(String),
}

impl std::str::FromStr for ProviderName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "memory" => Ok(ProviderName::Builtin(ProviderArg::Memory)),
            "docker" => Ok(ProviderName::Builtin(ProviderArg::Docker)),
            "linux" => Ok(ProviderName::Builtin(ProviderArg::Linux)),
            id => checkfu_sandbox_enroll::registry::check_id(id)
                .map(|()| ProviderName::Enrolled(id.to_owned()))
                .map_err(|e| e.to_string()),
        }
    }
}

/// How a command reaches its provider: `--provider` (built in or enrolled), or
/// `--provider-cmd` / `--provider-socket` (served over the wire protocol,
/// `author-kit/PROTOCOL.md`). At most one of the three; none means the
/// memory oracle.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProviderFlags {
    /// `memory`, `docker`, `linux`, or an id enrolled with `checkfu sandbox add` [default: memory].
    #[arg(long, value_name = "memory|docker|linux|ID")]
    pub provider: Option<ProviderName>,
    /// The providers registry `--provider ID` is looked up in [default: $CHECKFU_PROVIDERS, else $XDG_CONFIG_HOME/checkfu/providers.toml or ~/.config/checkfu/providers.toml].
    #[arg(long, value_name = "FILE")]
    pub providers: Option<PathBuf>,
    /// Spawn a provider served over the wire protocol on its stdin/stdout: CMD and its ARGS in one argument, split by shell quoting rules (no expansion); CMD is looked up in PATH.
    #[arg(long = "provider-cmd", value_name = "'CMD [ARGS]'")]
    pub provider_cmd: Option<String>,
    /// Connect to a provider served over the wire protocol on the Unix socket at PATH.
    #[arg(long = "provider-socket", value_name = "PATH")]
    pub provider_socket: Option<PathBuf>,
    /// Start a provider shipped as a local OCI image NAME@sha256:HEX (never pulled), the wire on its stdio.
    #[arg(long = "provider-image", value_name = "NAME@sha256:HEX")]
    pub provider_image: Option<String>,
}

/// The provider [`ProviderFlags`] name, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderChoice {
    /// A provider built into checkfu.
    Builtin(ProviderArg),
    /// A provider process spawned from a command line.
    Command {
        /// The command line as given.
        line: String,
        /// Its words; at least one.
        argv: Vec<String>,
    },
    /// A provider served on a Unix socket.
    Socket(PathBuf),
    /// A provider shipped as a local OCI image pinned by digest.
    Image {
        /// `NAME@sha256:HEX` as given.
        reference: String,
        /// The 64 hex digits of the digest.
        hex: String,
    },
    /// A provider enrolled under `id` in the registry at `registry`.
    Enrolled {
        /// The enrolled id.
        id: String,
        /// The registry file.
        registry: PathBuf,
    },
}

/// Why [`ProviderFlags`] name no usable provider (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderUsageError {
    /// Two of `--provider`, `--provider-cmd` and `--provider-socket`.
    #[error("--{first} and --{second} each name the provider; expected one of them, actual both")]
    Conflict {
        /// The first flag given, without dashes.
        first: &'static str,
        /// The second flag given, without dashes.
        second: &'static str,
    },
    /// A `--provider-cmd` line shell quoting cannot split.
    #[error("--provider-cmd: expected a command line with balanced quotes and no trailing backslash, actual {line:?}")]
    Unsplittable {
        /// The line.
        line: String,
    },
    /// A `--provider-image` reference not pinned by a digest.
    #[error("--provider-image: expected NAME@sha256:<64 lowercase hex>, actual {reference:?}")]
    Unpinned {
        /// The reference.
        reference: String,
    },
    /// A `--provider-cmd` line with no words.
    #[error("--provider-cmd: expected a command and its arguments, actual {line:?}")]
    Empty {
        /// The line.
        line: String,
    },
}

impl ProviderFlags {
    /// The provider these flags name.
    ///
    /// # Errors
    /// [`ProviderUsageError`] for two providers or a command line that does
    /// not split into at least one word.
    pub fn choice(&self) -> Result<ProviderChoice, ProviderUsageError> {
        let given: Vec<&'static str> = [
            ("provider", self.provider.is_some()),
            ("provider-cmd", self.provider_cmd.is_some()),
            ("provider-socket", self.provider_socket.is_some()),
            ("provider-image", self.provider_image.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        if let [first, second, ..] = given[..] {
            return Err(ProviderUsageError::Conflict { first, second });
        }
        if let Some(line) = &self.provider_cmd {
            let argv = shlex::split(line)
                .ok_or_else(|| ProviderUsageError::Unsplittable { line: line.clone() })?;
            if argv.is_empty() {
                return Err(ProviderUsageError::Empty { line: line.clone() });
            }
            return Ok(ProviderChoice::Command {
                line: line.clone(),
                argv,
            });
        }
        if let Some(reference) = &self.provider_image {
            let hex = image::pinned_hex(reference).ok_or_else(|| ProviderUsageError::Unpinned {
                reference: reference.clone(),
            })?;
            return Ok(ProviderChoice::Image {
                hex: hex.to_owned(),
                reference: reference.clone(),
            });
        }
        if let Some(path) = &self.provider_socket {
            return Ok(ProviderChoice::Socket(path.clone()));
        }
        Ok(match &self.provider {
            None => ProviderChoice::Builtin(ProviderArg::Memory),
            Some(ProviderName::Builtin(which)) => ProviderChoice::Builtin(*which),
            Some(ProviderName::Enrolled(id)) => ProviderChoice::Enrolled {
                id: id.clone(),
                registry: checkfu_sandbox_enroll::registry::path(self.providers.as_deref()),
            },
        })
    }
}

/// A multi-threaded tokio runtime, or exit 125 with the reason.
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("checkfu: could not start the async runtime: {e}");
            ExitCode::from(125)
        })
}

/// The Docker conformance target: the fixture image built from `busybox`
/// (build progress on stderr), a fresh scope, state directory and network.
///
/// # Errors
/// A message when the daemon, the fixture or the network is unusable.
pub async fn docker_target(busybox: &Path) -> Result<Arc<dyn ConformanceTarget>, String> {
    let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
    let target = DockerTarget::new(busybox, &mut progress)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(target))
}

/// The Linux conformance target: the fixture written from `busybox` into
/// a fresh image store, a fresh scope and state directory.
///
/// # Errors
/// A message when the host cannot run the provider or the fixture cannot
/// be written.
pub async fn linux_target(busybox: &Path) -> Result<Arc<dyn ConformanceTarget>, String> {
    let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
    let target = checkfu_sandbox_linux::conformance::LinuxTarget::new(busybox, &mut progress)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(target))
}

/// How long closing a conformance target may take before checkfu gives up
/// on it, in seconds.
pub const CLOSE_TIMEOUT_SECONDS: u64 = 60;

/// Exit status after SIGHUP.
pub const EXIT_SIGHUP: u8 = 129;
/// Exit status after SIGINT.
pub const EXIT_SIGINT: u8 = 130;
/// Exit status after SIGQUIT.
pub const EXIT_SIGQUIT: u8 = 131;
/// Exit status after SIGTERM.
pub const EXIT_SIGTERM: u8 = 143;

/// Which signal stopped checkfu: every signal that ends a terminal
/// session or a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGHUP (the terminal went away).
    Hangup,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGQUIT (Ctrl-\\).
    Quit,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The exit status, 128 + the signal's number, as a shell reports a
    /// death by it: 129, 130, 131 or 143.
    pub fn code(self) -> u8 {
        match self {
            Stop::Hangup => EXIT_SIGHUP,
            Stop::Interrupt => EXIT_SIGINT,
            Stop::Quit => EXIT_SIGQUIT,
            Stop::Terminate => EXIT_SIGTERM,
        }
    }
}

/// The handlers of every [`Stop`] signal, installed at creation; from then
/// on none of these signals kills checkfu.
pub struct StopSignals {
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers.
    ///
    /// # Errors
    /// The I/O error when a handler cannot be installed.
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            hup: signal(SignalKind::hangup())?,
            int: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the first of these signals.
    pub async fn recv(&mut self) -> Stop {
        tokio::select! {
            _ = self.hup.recv() => Stop::Hangup,
            _ = self.int.recv() => Stop::Interrupt,
            _ = self.quit.recv() => Stop::Quit,
            _ = self.term.recv() => Stop::Terminate,
        }
    }
}

/// Resolves at the first SIGHUP, SIGINT, SIGQUIT or SIGTERM. The handlers
/// are installed at the first poll; from then on none of them kills
/// checkfu.
///
/// # Errors
/// The I/O error when a handler cannot be installed.
pub async fn stop_signal() -> std::io::Result<Stop> {
    Ok(StopSignals::install()?.recv().await)
}

/// Runs `work` until SIGINT or SIGTERM. On a signal, `work` is dropped
/// and the error is the exit status (130 or 143; 125 when the handlers
/// cannot be installed), after a line on stderr.
///
/// # Errors
/// The exit status when a signal came first.
pub async fn until_stopped<T>(work: impl std::future::Future<Output = T>) -> Result<T, ExitCode> {
    tokio::select! {
        t = work => Ok(t),
        s = stop_signal() => match s {
            Ok(stop) => {
                eprintln!("checkfu: interrupted");
                Err(ExitCode::from(stop.code()))
            }
            Err(e) => {
                eprintln!("checkfu: cannot watch for signals: {e}");
                Err(ExitCode::from(125))
            }
        },
    }
}

/// Releases what a target holds (Docker: every object of its scope, its
/// network and state directory), bounded by [`CLOSE_TIMEOUT_SECONDS`]; a
/// failure or an overrun is reported on stderr.
pub async fn close_target(target: &Arc<dyn ConformanceTarget>) {
    let bound = Duration::from_secs(CLOSE_TIMEOUT_SECONDS);
    let name = target.name();
    match tokio::time::timeout(bound, target.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("checkfu: closing the {name} target: {e}"),
        Err(_) => eprintln!(
            "checkfu: closing the {name} target: did not finish within {} s; objects of its \
scope may be left",
            bound.as_secs()
        ),
    }
}
