//! The providers the CLI can talk to, built the same way for every command:
//! the embedded memory oracle, the local Docker daemon under the CLI's
//! scope and state directory, or a provider served over the wire protocol
//! from a command (`--provider-cmd`) or a Unix socket (`--provider-socket`).

use checkfu_sandbox_contract::Operation;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkfu_sandbox_conformance::{ConformanceTarget, ProviderCommand};
use checkfu_sandbox_contract::{Clock, FailureReason, SandboxError, SandboxProvider, SystemClock};
use checkfu_sandbox_docker::{DockerConfig, DockerProvider};
use checkfu_sandbox_linux::{LinuxConfig, LinuxProvider, WorkloadUser};
use checkfu_sandbox_memory::conformance::MemoryTarget;
use checkfu_sandbox_memory::{Fault, MemoryProvider};
use checkfu_sandbox_wire::conformance::WireTarget;
use checkfu_sandbox_wire::{WireClient, WireOptions};

use checkfu_sandbox_runtime::Enrollment;

use super::fail::Failure;
use super::{ProviderArg, ProviderChoice};

/// The scope the CLI's Docker objects carry unless `CHECKFU_SCOPE` names
/// another (`checkfu.sandbox.scope=cli`).
pub const DEFAULT_SCOPE: &str = "cli";

/// Environment variable that overrides the Docker scope.
pub const SCOPE_ENV: &str = "CHECKFU_SCOPE";

/// Environment variable that overrides the Docker state directory.
pub const STATE_DIR_ENV: &str = "CHECKFU_STATE_DIR";

/// The Docker scope: `$CHECKFU_SCOPE`, else `cli`.
pub fn scope() -> String {
    match std::env::var(SCOPE_ENV) {
        Ok(s) if !s.is_empty() => s,
        _ => DEFAULT_SCOPE.to_owned(),
    }
}

/// The Docker state directory: `$CHECKFU_STATE_DIR`; else
/// `/var/lib/checkfu/sandbox` for root; else
/// `$XDG_STATE_HOME/checkfu/sandbox`, or `~/.local/state/checkfu/sandbox`.
pub fn state_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(STATE_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/lib/checkfu/sandbox");
    }
    if let Some(xdg) = var("XDG_STATE_HOME") {
        return PathBuf::from(xdg).join("checkfu/sandbox");
    }
    let home = var("HOME").map(PathBuf::from).unwrap_or_else(|| ".".into());
    home.join(".local/state/checkfu/sandbox")
}

/// The Linux provider's state directory: `linux/` under [`state_dir`]
/// (its records are its own; the Docker provider never reads them).
pub fn linux_state_dir() -> PathBuf {
    state_dir().join("linux")
}

/// The Linux provider of `scope` over `state_dir`.
///
/// # Errors
/// A 125 failure naming `connect` and the typed reason the provider is
/// unavailable (not root, no cgroups, ...).
pub fn open_linux(scope: &str, state_dir: PathBuf) -> Result<LinuxProvider, Failure> {
    LinuxProvider::new(LinuxConfig {
        state_dir,
        scope: scope.to_owned(),
        clock: clock(),
        workload_user: WorkloadUser::Checkfu,
    })
    .map_err(|e| {
        Failure::from(SandboxError::failed(
            Operation::Connect,
            FailureReason::ProviderError,
            format!("linux: {}", chain(&e)),
        ))
    })
}

/// Connects to the Docker daemon as the provider of `scope` (with the CLI's
/// state directory).
///
/// # Errors
/// As [`open`].
pub async fn open_docker_scope(scope: &str) -> Result<DockerProvider, Failure> {
    open_docker_scope_at(scope, state_dir()).await
}

/// Connects to the Docker daemon as the provider of `scope` over
/// `state_dir` (a conformance target's own, for its records).
///
/// # Errors
/// As [`open`].
pub async fn open_docker_scope_at(
    scope: &str,
    state_dir: PathBuf,
) -> Result<DockerProvider, Failure> {
    DockerProvider::connect(DockerConfig {
        pool_size: 0,
        ..DockerConfig::new(state_dir, scope, clock())
    })
    .await
    .map_err(|e| connect_failure(&e))
}

/// The exec path of a Docker provider the CLI opens (`$CHECKFU_DOCKER_EXEC`:
/// `host`, the default, or `daemon`).
///
/// # Errors
/// A usage failure naming the variable and its value.
pub fn exec_path() -> Result<checkfu_sandbox_docker::ExecPath, Failure> {
    checkfu_sandbox_docker::ExecPath::from_env().map_err(|e| Failure::usage(e.to_string()))
}

/// The warm-pool size of a Docker provider the CLI opens for one command
/// (`run`, `capabilities`, `cleanup`): `$CHECKFU_DOCKER_POOL`, else 0. A
/// one-shot command would only create pooled containers to remove them
/// again at exit; `test` and `serve` keep the provider's default pool
/// ([`checkfu_sandbox_docker::DEFAULT_POOL_SIZE`]) unless the variable says
/// otherwise.
///
/// # Errors
/// A usage failure naming the variable and its value when it is not a
/// number in `0..=MAX_POOL_SIZE`.
pub fn one_shot_pool_size() -> Result<usize, Failure> {
    DockerConfig::pool_size_from_env(0)
        .map_err(|e| Failure::usage(format!("{}: {e}", checkfu_sandbox_docker::POOL_ENV)))
}

/// An opened provider and, when it is served over the wire, the
/// connection to end when the command is done.
pub struct Backend {
    /// The provider (every call goes through the runtime).
    pub provider: Arc<dyn SandboxProvider>,
    wire: Option<WireClient>,
    /// An enrolled provider's envelope and ceiling: register it with
    /// `SandboxRuntime::register_as`.
    pub enrollment: Option<Enrollment>,
    /// The built-in Docker provider, when that is the choice (its warm
    /// pool is drained on close).
    pub docker: Option<DockerProvider>,
}

impl Backend {
    /// Ends a wire connection: a spawned provider process is killed and
    /// reaped. Drains the Docker provider's warm pool. Nothing else for a
    /// built-in provider.
    pub async fn close(&self) {
        if let Some(client) = &self.wire {
            client.close().await;
        }
        if let Some(docker) = &self.docker {
            for problem in docker.drain_pool().await {
                eprintln!("checkfu: docker pool: {problem}");
            }
        }
    }
}

/// Opens the provider `choice` names: the memory oracle on the system
/// clock, the Docker daemon with the CLI's scope and state directory, or a
/// served provider ([`wire`]). The one place a provider is built; a new
/// provider is one arm here.
///
/// # Errors
/// A 125 failure naming `connect` when the daemon does not answer, the
/// scope is malformed or the state directory cannot be prepared; those of
/// [`wire`].
pub async fn open(choice: &ProviderChoice) -> Result<Backend, Failure> {
    let mut docker = None;
    let provider: Arc<dyn SandboxProvider> = match choice {
        ProviderChoice::Builtin(ProviderArg::Memory) => {
            Arc::new(MemoryProvider::with_system_clock())
        }
        ProviderChoice::Builtin(ProviderArg::Docker) => {
            let opened = DockerProvider::connect(DockerConfig {
                pool_size: one_shot_pool_size()?,
                exec_path: Some(exec_path()?),
                ..DockerConfig::new(state_dir(), scope(), clock())
            })
            .await
            .map_err(|e| connect_failure(&e))?;
            docker = Some(opened.clone());
            Arc::new(opened)
        }
        ProviderChoice::Builtin(ProviderArg::Linux) => {
            Arc::new(open_linux(&scope(), linux_state_dir())?)
        }
        ProviderChoice::Command { .. }
        | ProviderChoice::Socket(_)
        | ProviderChoice::Image { .. } => {
            let client = wire(choice).await?;
            return Ok(Backend {
                provider: Arc::new(client.clone()),
                wire: Some(client),
                enrollment: None,
                docker: None,
            });
        }
        ProviderChoice::Enrolled { id, registry } => {
            let (served, enrollment) = super::enrolled::lookup(id, registry)?;
            let client = super::enrolled::connect(id, &served, &enrollment).await?;
            return Ok(Backend {
                provider: Arc::new(client.clone()),
                wire: Some(client),
                enrollment: Some(enrollment),
                docker: None,
            });
        }
    };
    Ok(Backend {
        provider,
        wire: None,
        enrollment: None,
        docker,
    })
}

/// The conformance target `choice` names: the memory oracle with `faults`
/// injected, the Docker target (fixture built from `busybox`), or a
/// served provider's `conformance/*` hooks ([`WireTarget`]).
///
/// # Errors
/// 2 when `faults` are given for another provider than the embedded
/// memory oracle; 125 when the target cannot be opened, naming the hooks a
/// served provider does not serve.
pub async fn target(
    choice: &ProviderChoice,
    busybox: &Path,
    faults: Vec<Fault>,
) -> Result<Arc<dyn ConformanceTarget>, Failure> {
    injectable(choice, &faults)?;
    match choice {
        ProviderChoice::Enrolled { id, registry } => {
            // The enrollment (drift check and ceiling) is applied by the
            // suite itself (`SuiteOptions::enrollment`).
            let (served, _) = super::enrolled::lookup(id, registry)?;
            Box::pin(target(&served, busybox, faults)).await
        }
        ProviderChoice::Builtin(ProviderArg::Memory) => {
            Ok(Arc::new(MemoryTarget::with_faults(faults)))
        }
        ProviderChoice::Builtin(ProviderArg::Docker) => super::docker_target(busybox)
            .await
            .map_err(|m| Failure::checkfu(format!("docker: {m}"))),
        ProviderChoice::Builtin(ProviderArg::Linux) => super::linux_target(busybox)
            .await
            .map_err(|m| Failure::checkfu(format!("linux: {m}"))),
        ProviderChoice::Command { .. }
        | ProviderChoice::Socket(_)
        | ProviderChoice::Image { .. } => {
            let client = wire(choice).await?;
            match WireTarget::new(client.clone()).await {
                Ok(t) => Ok(Arc::new(t)),
                Err(e) => {
                    client.close().await;
                    Err(Failure::checkfu(format!("{}: {e}", describe(choice))))
                }
            }
        }
    }
}

/// Whether `faults` can be injected into the provider `choice` names:
/// only into the embedded memory oracle.
///
/// # Errors
/// A usage failure (2) naming the way to inject into a served oracle.
pub fn injectable(choice: &ProviderChoice, faults: &[Fault]) -> Result<(), Failure> {
    if !faults.is_empty() && *choice != ProviderChoice::Builtin(ProviderArg::Memory) {
        return Err(Failure::usage(
            "--inject applies to the embedded memory oracle only; to inject into a served \
oracle, pass it to the served side (--provider-cmd 'checkfu sandbox serve --inject FAULT')",
        ));
    }
    Ok(())
}

/// Connects to a served provider: spawns the `--provider-cmd` command
/// (its executable resolved through `PATH` first, see [`resolve`]; in its
/// own process group, so that a terminal's SIGINT reaches checkfu only and
/// checkfu ends the child) or connects to the `--provider-socket` socket,
/// and initializes.
///
/// # Errors
/// 125 naming the command or socket and what failed (not found, could not
/// start, refused `initialize`). A built-in choice is a 125 too (no wire).
pub async fn wire(choice: &ProviderChoice) -> Result<WireClient, Failure> {
    let opened = match choice {
        ProviderChoice::Command { argv, .. } => {
            let executable = resolve(&argv[0])?;
            let mut command = tokio::process::Command::new(&executable);
            command.arg0(&argv[0]).args(&argv[1..]).process_group(0);
            WireClient::spawn(command, WireOptions::default()).await
        }
        ProviderChoice::Socket(path) => {
            WireClient::connect_unix(path, WireOptions::default()).await
        }
        ProviderChoice::Image { reference, .. } => {
            let id = super::image::local_id(reference)?;
            WireClient::spawn(super::image::command(&id), WireOptions::default()).await
        }
        ProviderChoice::Enrolled { id, registry } => {
            let (served, _) = super::enrolled::lookup(id, registry)?;
            return Box::pin(wire(&served)).await;
        }
        ProviderChoice::Builtin(which) => {
            return Err(Failure::checkfu(format!(
                "the {which:?} provider is built in; it is not served over the wire"
            )))
        }
    };
    opened.map_err(|e| Failure::checkfu(format!("{}: {}: {e}", describe(choice), e.tag())))
}

/// `--provider-cmd '<line>'` or `--provider-socket <path>`, for messages.
fn describe(choice: &ProviderChoice) -> String {
    match choice {
        ProviderChoice::Command { line, .. } => format!("--provider-cmd {line:?}"),
        ProviderChoice::Socket(path) => format!("--provider-socket {}", path.display()),
        ProviderChoice::Builtin(which) => format!("--provider {which:?}"),
        ProviderChoice::Enrolled { id, .. } => format!("--provider {id}"),
        ProviderChoice::Image { reference, .. } => format!("--provider-image {reference}"),
    }
}

/// The executable `name` runs as: `name` itself when it contains a `/`,
/// else the first executable regular file `DIR/name` for DIR in `PATH`
/// (an empty entry is the working directory), as `execvp` looks it up.
///
/// # Errors
/// 125 naming `name` and `PATH` when nothing is found.
pub fn resolve(name: &str) -> Result<PathBuf, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        if runnable(Path::new(name)) {
            return Ok(PathBuf::from(name));
        }
        // Name what is there instead: nothing, something else than a
        // regular file, or a file no execute bit is set on.
        let actual = match std::fs::metadata(name) {
            Err(_) => "none".to_owned(),
            Ok(m) if !m.is_file() => "not a regular file".to_owned(),
            Ok(m) => format!(
                "a file of mode {:04o}, not executable (chmod +x)",
                m.permissions().mode() & 0o7777
            ),
        };
        return Err(Failure::checkfu(format!(
            "--provider-cmd: expected an executable file at {name:?}, actual {actual}"
        )));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(name);
        if runnable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(Failure::checkfu(format!(
        "--provider-cmd: expected an executable {name:?} in PATH, actual none in {:?}",
        path.to_string_lossy()
    )))
}

/// What the evidence records of a `--provider-cmd` provider: its words,
/// the executable they resolve to and that file's SHA-256
/// (`sha256:<hex>`). `None` for any other choice.
///
/// # Errors
/// 125 when the executable cannot be found or read.
pub fn provider_command(choice: &ProviderChoice) -> Result<Option<ProviderCommand>, Failure> {
    if let ProviderChoice::Enrolled { id, registry } = choice {
        let (served, _) = super::enrolled::lookup(id, registry)?;
        return provider_command(&served);
    }
    let ProviderChoice::Command { argv, .. } = choice else {
        return Ok(None);
    };
    let executable = resolve(&argv[0])?;
    let digest = file_sha256(&executable).map_err(|e| {
        Failure::checkfu(format!(
            "--provider-cmd: reading {} for its digest: {e}",
            executable.display()
        ))
    })?;
    Ok(Some(ProviderCommand {
        argv: argv.clone(),
        executable: executable.to_string_lossy().into_owned(),
        executable_sha256: digest,
    }))
}

/// `sha256:<64 lowercase hex>` of the file at `path`.
///
/// # Errors
/// The I/O error of opening or reading it.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

/// The clock instances are stamped with.
pub fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// `SandboxOperationFailed{operation: connect, reason: provider_error}`
/// for a Docker daemon that cannot be reached.
pub(super) fn connect_failure(e: &dyn std::error::Error) -> Failure {
    Failure::from(SandboxError::failed(
        Operation::Connect,
        FailureReason::ProviderError,
        format!("docker: {}", chain(e)),
    ))
}

/// An error and its sources, joined by `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        // A cause the message already ends with (`"{path}: {source}"`) is
        // not repeated.
        let text = c.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}
