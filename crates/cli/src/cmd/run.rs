//! `checkfu sandbox run`: one workload in a fresh sandbox, through the
//! runtime, from selection to release.
//!
//! Flags are parsed into [`RunArgs`], then resolved into [`RunSettings`]
//! before anything is provisioned: every input the contract would refuse
//! (a reserved mount path, a missing host folder, an unknown Git revision,
//! a malformed environment key, too many arguments) fails here with one
//! line naming it. The flow itself ([`run_flow`]) is a plain async function
//! over the runtime's [`Adapter`]; [`run`] races it against SIGINT and
//! SIGTERM and, on a signal, drops it and destroys the instance it tracked.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checkfu_sandbox_contract::bounds::{
    is_valid_environment_key, MAX_ARGUMENTS, MAX_ARGUMENT_BYTES, MAX_OUTPUT_LIMIT_BYTES,
    MAX_READ_FILE_BYTES, ROLLBACK_TIMEOUT_SECONDS,
};
use checkfu_sandbox_contract::{
    EnforcementLevel, ExitCause, MountAccess, NetworkPolicy, ProcessExit, ReleaseDisposition,
    Resources, RetentionMode, SandboxCommand, SandboxError, SandboxFailure, SandboxMount,
    SandboxProcessRequest, SandboxProfile, SandboxProvisionRequest, SignalName, Tier,
};
use checkfu_sandbox_runtime::drivers::{one_shot, DriverError};
use checkfu_sandbox_runtime::select::check_mount_plan;
use checkfu_sandbox_runtime::staging::{read_git_blobs, stage_folder, stage_git, StageProgress};
use checkfu_sandbox_runtime::{Adapter, Requirements, SandboxRuntime};

use super::backend::{host_platform, Backend};
use super::fail::{render_failure, Failure};
use super::outputs::copy_outputs;
use super::ProviderArg;

/// Exit status of a workload that ran past `--timeout`.
pub const EXIT_TIMED_OUT: u8 = 124;

/// How long a `--durable` snapshot is retained, in seconds (24 h).
pub const SNAPSHOT_RETENTION_SECONDS: i64 = 24 * 60 * 60;

/// Slack added to the workload's timeout for the instance's hard expiry,
/// in seconds: staging, activation, output copy and release fit in it.
pub const EXPIRY_SLACK_SECONDS: i64 = 60 * 60;

/// Staging shows progress on stderr from this many files of one mount on.
pub const PROGRESS_FROM_FILES: usize = 100;

/// The process limit of a run without `--pids`, on a provider that
/// enforces one.
pub const DEFAULT_PIDS: u32 = 1024;

/// Exit status when the workload ran but its output copy is incomplete.
pub const EXIT_OUTPUTS_INCOMPLETE: u8 = super::fail::EXIT_CHECKFU;

/// Flags of `checkfu sandbox run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox fixture                               # build the Docker fixture image once
  checkfu sandbox run --provider docker --image checkfu-fixture:busybox-<hex> \\
      --mount ./data:/data:ro --outputs out -- cp /data/x /mnt/session/outputs/y
  checkfu sandbox run --provider docker --image IMAGE --prompt p.txt -- cat
  checkfu sandbox run --image demo:1 --env GREETING=hi -- sh -c 'exit 42'
  checkfu sandbox run --provider docker --image IMAGE --memory 512M --cpus 1.5 --pids 256 -- make

Mounts are copies: every file under HOST_DIR (or of REPO_PATH at REV) is staged into
the sandbox through writeFile before activation; nothing the workload does reaches
the host, except what --outputs copies out of /mnt/session/outputs (regular files
only, never outside DIR). A file over 16 MiB is not copied: each is named on stderr
with its size, the rest is copied. The default mount access is rw. A Git mount is
read-only.

Resources: --pids defaults to 1024 on a provider that enforces a process limit
(docker; the memory oracle enforces none, so it gets no default). A limit the provider
does not enforce is refused before anything is provisioned.

Exit status: the workload's own status; 124 when it ran past --timeout; 128+N when
signal N ended it; 125 when checkfu or the provider failed (one line on stderr: the
closed error tag, operation, field and values), or when the output copy is incomplete
(the workload's status is reported on stderr first); 126/127 when the command could
not be executed / was not found (as the provider reports them); 2 for a flag that
does not parse; 130/143 when checkfu itself got SIGINT/SIGTERM (the instance is
destroyed first); 141 when stdout was closed by its reader (the run still finishes
and releases the instance).")]
pub struct RunArgs {
    /// Provider to run on.
    #[arg(long, value_enum, default_value_t = ProviderArg::Memory)]
    pub provider: ProviderArg,
    /// Root image: `name@sha256:<hex>`, or `name[:tag]` (resolved to its digest first).
    #[arg(long, value_name = "REF")]
    pub image: String,
    /// Stage a host folder as a mount (repeatable).
    #[arg(long = "mount", value_name = "HOST_DIR:PATH[:ro|rw]")]
    pub mounts: Vec<String>,
    /// Stage REPO_PATH (a file or tree; empty for the whole tree) of REV from a Git repository as a read-only mount (repeatable).
    #[arg(long = "git", value_name = "REPO_DIR:REV:REPO_PATH:MOUNT_PATH")]
    pub git: Vec<String>,
    /// Environment of the workload (repeatable); keys match `^[A-Za-z_][A-Za-z0-9_]*$`.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Absolute working directory in the sandbox.
    #[arg(long, value_name = "PATH", default_value = "/workspace")]
    pub workdir: String,
    /// Wall-clock bound of the workload, in seconds (exit 124 past it).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub timeout: u32,
    /// Bound on each of stdout and stderr, in bytes (at most 16 MiB; not with --prompt).
    #[arg(long = "output-limit", value_name = "BYTES", default_value_t = MAX_OUTPUT_LIMIT_BYTES, conflicts_with = "prompt")]
    pub output_limit: u64,
    /// Most processes in the sandbox (default 1024 where the provider enforces a limit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Option<u32>,
    /// Memory limit: bytes, or N with a K, M, G or T suffix (powers of 1024), e.g. 512M.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory: Option<u64>,
    /// CPU limit in cores, e.g. 1.5 (at most three decimals).
    #[arg(long, value_name = "N.N", value_parser = parse_cpu_millis)]
    pub cpus: Option<u32>,
    /// Copy the regular files of /mnt/session/outputs into DIR afterwards (one over 16 MiB, or one that cannot be written into DIR, is named and skipped: exit 125).
    #[arg(long, value_name = "DIR")]
    pub outputs: Option<PathBuf>,
    /// Durable retention: release settles a snapshot (kept 24 h) whose id is printed on stderr.
    #[arg(long)]
    pub durable: bool,
    /// Run through openProcess with the one-shot driver: FILE's bytes on stdin, then end of file (stdout up to 4 MiB).
    #[arg(long, value_name = "FILE")]
    pub prompt: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD [ARGS...]")]
    pub command: Vec<String>,
}

/// Where a mount's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountSource {
    /// Every regular file under a host folder.
    Folder(PathBuf),
    /// A path of a Git revision.
    Git {
        /// The repository.
        repo: PathBuf,
        /// The revision.
        rev: String,
        /// The file or tree in it (empty: the whole tree).
        repo_path: String,
    },
}

/// One mount of the plan, with the flag it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPlan {
    /// The flag as given (`--mount ./data:/data:ro`).
    pub input: String,
    /// Where the files come from.
    pub source: MountSource,
    /// The declared mount.
    pub mount: SandboxMount,
}

/// Everything `run` needs, validated.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The provider.
    pub provider: ProviderArg,
    /// The image as given.
    pub image: String,
    /// The mount plan, `--mount` flags first, then `--git`.
    pub mounts: Vec<MountPlan>,
    /// The command (executable, arguments, directory, environment, bounds).
    pub command: SandboxCommand,
    /// Where to copy the output tree.
    pub outputs: Option<PathBuf>,
    /// Durable retention.
    pub durable: bool,
    /// The prompt's bytes, for the one-shot driver.
    pub prompt: Option<Vec<u8>>,
    /// The limits asked for; `pids: None` takes [`DEFAULT_PIDS`] on a
    /// provider that enforces a process limit.
    pub resources: Resources,
}

/// Parses a byte count: digits, optionally followed by `K`, `M`, `G` or `T`
/// (powers of 1024; a trailing `B` or `iB` is accepted, case-insensitive).
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = || format!("expected a byte count such as 536870912, 512M or 2G, actual {text:?}");
    let upper = text.trim().to_ascii_uppercase();
    let unit_start = upper
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(upper.len());
    let (digits, unit) = upper.split_at(unit_start);
    if digits.is_empty() {
        return Err(bad());
    }
    let shift = match unit {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if bytes == 0 {
        return Err(bad());
    }
    Ok(bytes)
}

/// Parses a CPU count in cores (`2`, `1.5`, `0.25`) into thousandths of a
/// core.
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_cpu_millis(text: &str) -> Result<u32, String> {
    let bad = || {
        format!("expected cores such as 1, 1.5 or 0.25 (at most three decimals), actual {text:?}")
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > 3
    {
        return Err(bad());
    }
    let whole: u32 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction: u32 = format!("{fraction:0<3}").parse().map_err(|_| bad())?;
    let millis = whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(fraction))
        .ok_or_else(bad)?;
    if millis == 0 {
        return Err(bad());
    }
    Ok(millis)
}

fn parse_access(mode: &str) -> Option<MountAccess> {
    match mode {
        "ro" => Some(MountAccess::ReadOnly),
        "rw" => Some(MountAccess::ReadWrite),
        _ => None,
    }
}

/// Splits `HOST_DIR:PATH[:ro|rw]`.
fn parse_mount(text: &str) -> Result<(PathBuf, String, MountAccess), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--mount {text}: expected HOST_DIR:PATH[:ro|rw] with an absolute PATH"
        ))
    };
    let (rest, access) = match text.rsplit_once(':') {
        Some((rest, mode)) if parse_access(mode).is_some() && rest.contains(':') => {
            (rest, parse_access(mode).ok_or_else(usage)?)
        }
        _ => (text, MountAccess::ReadWrite),
    };
    let (host, path) = rest.rsplit_once(':').ok_or_else(usage)?;
    if host.is_empty() || !path.starts_with('/') {
        return Err(usage());
    }
    Ok((PathBuf::from(host), path.to_owned(), access))
}

/// Splits `REPO_DIR:REV:REPO_PATH:MOUNT_PATH` from the right, so the
/// repository path may itself contain colons.
fn parse_git(text: &str) -> Result<(PathBuf, String, String, String), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--git {text}: expected REPO_DIR:REV:REPO_PATH:MOUNT_PATH with an absolute MOUNT_PATH"
        ))
    };
    let mut parts = text.rsplitn(4, ':');
    let mount = parts.next().ok_or_else(usage)?;
    let repo_path = parts.next().ok_or_else(usage)?;
    let rev = parts.next().ok_or_else(usage)?;
    let repo = parts.next().ok_or_else(usage)?;
    if repo.is_empty() || rev.is_empty() || !mount.starts_with('/') {
        return Err(usage());
    }
    Ok((
        PathBuf::from(repo),
        rev.to_owned(),
        repo_path.to_owned(),
        mount.to_owned(),
    ))
}

impl RunSettings {
    /// Validates the flags. Nothing is provisioned and no provider is
    /// contacted.
    ///
    /// # Errors
    /// A usage failure (exit 2) for a flag that does not parse; a 125
    /// failure naming the input for one the contract refuses.
    pub fn resolve(args: RunArgs) -> Result<RunSettings, Failure> {
        let mut mounts = Vec::new();
        for text in &args.mounts {
            let (host, path, access) = parse_mount(text)?;
            let input = format!("--mount {text}");
            match std::fs::metadata(&host) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Failure::input(
                        &input,
                        &SandboxError::failed(
                            "stage_folder",
                            checkfu_sandbox_contract::FailureReason::NotFound,
                            format!("{}: not a directory", host.display()),
                        )
                        .into(),
                    ))
                }
                Err(e) => {
                    return Err(Failure::input(
                        &input,
                        &SandboxError::failed(
                            "stage_folder",
                            checkfu_sandbox_contract::FailureReason::NotFound,
                            format!("{}: {e}", host.display()),
                        )
                        .into(),
                    ))
                }
            }
            mounts.push(MountPlan {
                input,
                source: MountSource::Folder(host),
                mount: SandboxMount { path, access },
            });
        }
        for text in &args.git {
            let (repo, rev, repo_path, path) = parse_git(text)?;
            let input = format!("--git {text}");
            // Resolves the revision and path now, so that a missing one
            // fails before anything is provisioned.
            read_git_blobs(&repo, &rev, &repo_path).map_err(|f| Failure::input(&input, &f))?;
            mounts.push(MountPlan {
                input,
                source: MountSource::Git {
                    repo,
                    rev,
                    repo_path,
                },
                mount: SandboxMount {
                    path,
                    access: MountAccess::ReadOnly,
                },
            });
        }
        for plan in &mounts {
            check_mount_plan(std::slice::from_ref(&plan.mount))
                .map_err(|e| Failure::input(&plan.input, &e.into()))?;
        }
        let declared: Vec<SandboxMount> = mounts.iter().map(|m| m.mount.clone()).collect();
        check_mount_plan(&declared).map_err(|e| Failure::from(SandboxFailure::from(e)))?;

        let mut environment = BTreeMap::new();
        for text in &args.env {
            let (key, value) = text
                .split_once('=')
                .ok_or_else(|| Failure::usage(format!("--env {text}: expected KEY=VALUE")))?;
            if !is_valid_environment_key(key) {
                return Err(Failure::input(
                    &format!("--env {text}"),
                    &SandboxError::invalid_request(
                        "execute",
                        "command.environment",
                        "keys matching ^[A-Za-z_][A-Za-z0-9_]*$",
                        key,
                    )
                    .into(),
                ));
            }
            if environment
                .insert(key.to_owned(), value.to_owned())
                .is_some()
            {
                return Err(Failure::input(
                    &format!("--env {key}"),
                    &SandboxError::invalid_request(
                        "execute",
                        "command.environment",
                        "each key at most once",
                        format!("{key} given more than once"),
                    )
                    .into(),
                ));
            }
        }

        let (executable, arguments) = match args.command.split_first() {
            Some((first, rest)) if !first.is_empty() => (first.clone(), rest.to_vec()),
            _ => return Err(Failure::usage("expected a command after --")),
        };
        let refuse = |field: &str, expected: String, actual: String| {
            Failure::from(SandboxError::invalid_request(
                "execute", field, expected, actual,
            ))
        };
        if arguments.len() > MAX_ARGUMENTS {
            return Err(refuse(
                "command.arguments",
                format!("at most {MAX_ARGUMENTS} arguments"),
                format!("{} arguments", arguments.len()),
            ));
        }
        for (i, a) in std::iter::once(&executable).chain(&arguments).enumerate() {
            if a.len() > MAX_ARGUMENT_BYTES || a.contains('\0') {
                let field = if i == 0 {
                    "command.executable".to_owned()
                } else {
                    format!("command.arguments[{}]", i - 1)
                };
                return Err(refuse(
                    &field,
                    format!("at most {MAX_ARGUMENT_BYTES} bytes without NUL"),
                    format!("{} bytes", a.len()),
                ));
            }
        }
        if !args.workdir.starts_with('/') {
            return Err(refuse(
                "command.working_directory",
                "an absolute path".into(),
                args.workdir.clone(),
            ));
        }
        if args.timeout == 0 {
            return Err(refuse(
                "command.timeout_seconds",
                "at least 1".into(),
                "0".into(),
            ));
        }
        if args.output_limit > MAX_OUTPUT_LIMIT_BYTES {
            return Err(refuse(
                "command.output_limit_bytes",
                format!("at most {MAX_OUTPUT_LIMIT_BYTES}"),
                args.output_limit.to_string(),
            ));
        }
        if let Some(dir) = &args.outputs {
            if dir.exists() && !dir.is_dir() {
                return Err(Failure::checkfu(format!(
                    "--outputs {}: exists and is not a directory",
                    dir.display()
                )));
            }
        }
        let prompt = match &args.prompt {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                Failure::checkfu(format!("--prompt {}: cannot read: {e}", path.display()))
            })?),
        };
        Ok(RunSettings {
            provider: args.provider,
            image: args.image,
            mounts,
            command: SandboxCommand {
                executable,
                arguments,
                working_directory: args.workdir,
                environment,
                stdin_base64: None,
                timeout_seconds: args.timeout,
                output_limit_bytes: args.output_limit,
            },
            outputs: args.outputs,
            durable: args.durable,
            prompt,
            resources: Resources {
                cpu_millis: args.cpus,
                memory_bytes: args.memory,
                pids: args.pids,
                disk_bytes: None,
            },
        })
    }
}

/// The adapter a run uses and the instance it holds, so that a signal can
/// let in-flight provider calls settle and destroy the instance.
#[derive(Debug, Clone, Default)]
pub struct Tracked(Arc<Mutex<Held>>);

/// The adapter, and the instance while one is held.
type Held = Option<(Adapter, Option<String>)>;

impl Tracked {
    fn attach(&self, adapter: &Adapter) {
        *self.lock() = Some((adapter.clone(), None));
    }

    fn set(&self, adapter: &Adapter, instance_id: &str) {
        *self.lock() = Some((adapter.clone(), Some(instance_id.to_owned())));
    }

    /// The instance is released: nothing to destroy, but the adapter stays
    /// so that in-flight calls can still settle.
    fn clear(&self) {
        if let Some((_, instance)) = self.lock().as_mut() {
            *instance = None;
        }
    }

    fn take(&self) -> Held {
        self.lock().take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // A poisoned lock only means a panic elsewhere; the value is sound.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Destroys `instance_id`, bounded at 30 s; reports a failure on stderr.
async fn destroy_bounded(adapter: &Adapter, instance_id: &str) {
    let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
    match tokio::time::timeout(bound, adapter.destroy(instance_id)).await {
        Ok(Ok(())) => {}
        Ok(Err(f)) => eprintln!("checkfu: destroy {instance_id}: {}", render_failure(&f)),
        Err(_) => eprintln!(
            "checkfu: destroy {instance_id}: did not settle within {} s; `checkfu sandbox cleanup` reclaims it after its expiry",
            bound.as_secs()
        ),
    }
}

/// The exit status of a command's settlement.
pub fn exit_status(exit: ExitCause) -> u8 {
    match exit {
        ExitCause::ExitCode(c) => c,
        ExitCause::Signal(s) => 128u8.saturating_add(signal_number(s)),
        ExitCause::TimedOut => EXIT_TIMED_OUT,
    }
}

/// The Linux number of a signal name (0 for `SIGOTHER`, whose number is
/// unknown: the status is then 128).
pub fn signal_number(s: SignalName) -> u8 {
    match s {
        SignalName::Sighup => 1,
        SignalName::Sigint => 2,
        SignalName::Sigquit => 3,
        SignalName::Sigill => 4,
        SignalName::Sigtrap => 5,
        SignalName::Sigabrt => 6,
        SignalName::Sigbus => 7,
        SignalName::Sigfpe => 8,
        SignalName::Sigkill => 9,
        SignalName::Sigusr1 => 10,
        SignalName::Sigsegv => 11,
        SignalName::Sigusr2 => 12,
        SignalName::Sigpipe => 13,
        SignalName::Sigalrm => 14,
        SignalName::Sigterm => 15,
        SignalName::Sigxcpu => 24,
        SignalName::Sigxfsz => 25,
        SignalName::Other => 0,
    }
}

fn stage_progress(mount_path: String) -> impl Fn(StageProgress) + Send + Sync {
    let last_decile = Mutex::new(0usize);
    move |p: StageProgress| {
        if p.total < PROGRESS_FROM_FILES {
            return;
        }
        let decile = p.done * 10 / p.total.max(1);
        let mut last = last_decile.lock().unwrap_or_else(|e| e.into_inner());
        if decile > *last || p.done == p.total {
            *last = decile;
            eprintln!(
                "checkfu: staging {mount_path}: {}/{} files",
                p.done, p.total
            );
        }
    }
}

/// The profile of a CLI run: the root image is the derived image, network
/// `none`, the workload's timeout as the longest command, the limits asked
/// for (with [`DEFAULT_PIDS`] when `pids_enforced` and none was given).
pub fn profile(
    settings: &RunSettings,
    image_digest: checkfu_sandbox_contract::Digest,
    pids_enforced: bool,
) -> SandboxProfile {
    let mut resources = settings.resources.clone();
    if resources.pids.is_none() && pids_enforced {
        resources.pids = Some(DEFAULT_PIDS);
    }
    SandboxProfile {
        profile_id: "checkfu-cli-run".into(),
        profile_version: 1,
        profile_digest: image_digest,
        retention: if settings.durable {
            RetentionMode::Durable
        } else {
            RetentionMode::EphemeralZdr
        },
        network_policy: NetworkPolicy::None,
        max_duration_seconds: settings.command.timeout_seconds,
        resources,
        packages: Vec::new(),
    }
}

/// Selects, provisions, stages, activates, runs, copies the outputs,
/// releases. Returns the exit status: the workload's, or 125 with one line
/// already printed. The instance is tracked in `tracked` from provision
/// until it is released or destroyed.
pub async fn run_flow(settings: RunSettings, backend: Backend, tracked: Tracked) -> u8 {
    match flow(&settings, &backend, &tracked).await {
        Ok(code) => code,
        Err(failure) => {
            if let Some((adapter, Some(id))) = tracked.take() {
                destroy_bounded(&adapter, &id).await;
            }
            let _ = std::io::stdout().flush();
            failure.report();
            failure.code
        }
    }
}

async fn flow(settings: &RunSettings, backend: &Backend, tracked: &Tracked) -> Result<u8, Failure> {
    let root_image = backend.resolve_image(&settings.image).await?;
    eprintln!("checkfu: image {}", root_image.as_str());

    let mut runtime = SandboxRuntime::new(backend.clock());
    runtime.register(backend.provider());
    let pids_enforced =
        backend.provider().capabilities().enforcement.pids != EnforcementLevel::NotEnforced;
    let profile = profile(settings, root_image.digest(), pids_enforced);
    let platform = host_platform();
    let declared: Vec<SandboxMount> = settings.mounts.iter().map(|m| m.mount.clone()).collect();
    let mut needs =
        Requirements::for_profile(&profile, Tier::Container, platform, declared.clone());
    needs.physically_contained_file_read = settings.outputs.is_some();
    let adapter = runtime.select(&needs)?;
    tracked.attach(&adapter);

    let now = runtime.clock().now();
    let run_id = format!("cli-{}-{}", std::process::id(), now.unix_millis());
    let request = SandboxProvisionRequest {
        provider: adapter.provider_id().to_owned(),
        placement: adapter.envelope().placement,
        workspace_id: "cli".into(),
        session_id: run_id.clone(),
        run_id: run_id.clone(),
        attempt_id: "1".into(),
        lease_id: run_id.clone(),
        lease_epoch: 1,
        target: Tier::Container,
        profile,
        platform,
        root_image,
        mounts: declared,
        expires_at: now
            .add_seconds(i64::from(settings.command.timeout_seconds) + EXPIRY_SLACK_SECONDS),
    };
    let instance = adapter.provision(request).await?;
    let id = instance.instance_id.clone();
    tracked.set(&adapter, &id);
    tracing::info!(instance_id = %id, "provisioned");

    for plan in &settings.mounts {
        let progress = stage_progress(plan.mount.path.clone());
        let staged = match &plan.source {
            MountSource::Folder(dir) => {
                stage_folder(&adapter, &id, dir, &plan.mount.path, &progress).await
            }
            MountSource::Git {
                repo,
                rev,
                repo_path,
            } => {
                stage_git(
                    &adapter,
                    &id,
                    repo,
                    rev,
                    repo_path,
                    &plan.mount.path,
                    &progress,
                )
                .await
            }
        };
        staged.map_err(|f| Failure::input(&plan.input, &f))?;
    }
    adapter.activate(&id).await?;
    tracing::info!(instance_id = %id, "workload started");

    let code = match &settings.prompt {
        None => {
            let result = adapter.execute(&id, settings.command.clone()).await?;
            // A closed stdout is remembered by `out` and settled below.
            let _ = super::out::write(&result.stdout_base64.0);
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&result.stderr_base64.0);
            let _ = err.flush();
            if result.exit == ExitCause::TimedOut {
                eprintln!(
                    "checkfu: the workload timed out after {} s",
                    settings.command.timeout_seconds
                );
            }
            exit_status(result.exit)
        }
        Some(prompt) => one_shot_run(&adapter, &id, settings, prompt).await?,
    };
    let code = finish(&adapter, &id, settings, &runtime, tracked, code).await?;
    if super::out::closed() {
        return Ok(super::out::EXIT_BROKEN_PIPE);
    }
    Ok(code)
}

/// Copies the outputs, releases and destroys; returns `code`.
async fn finish(
    adapter: &Adapter,
    id: &str,
    settings: &RunSettings,
    runtime: &SandboxRuntime,
    tracked: &Tracked,
    code: u8,
) -> Result<u8, Failure> {
    let id = id.to_owned();
    let mut incomplete = false;
    if let Some(dir) = &settings.outputs {
        let report = copy_outputs(adapter, &id, dir).await?;
        for skipped in &report.skipped {
            eprintln!(
                "checkfu: --outputs: {} not copied: {} bytes is over the {} MiB bound of one file read",
                skipped.path,
                skipped.size_bytes,
                MAX_READ_FILE_BYTES / (1024 * 1024)
            );
        }
        for (path, why) in &report.unwritten {
            eprintln!(
                "checkfu: --outputs {}: {path} not copied: {why}",
                dir.display()
            );
        }
        incomplete = !report.skipped.is_empty() || !report.unwritten.is_empty();
    }

    if settings.durable {
        let expires = runtime
            .clock()
            .now()
            .add_seconds(SNAPSHOT_RETENTION_SECONDS);
        match adapter.release(&id, Some(expires)).await? {
            ReleaseDisposition::Released { snapshot } => {
                eprintln!(
                    "checkfu: snapshot {} (expires {})",
                    snapshot.snapshot_id, snapshot.expires_at
                );
            }
            ReleaseDisposition::Destroyed => {}
        }
    } else {
        adapter.release(&id, None).await?;
    }
    tracked.clear();
    // Release settled; destroy is idempotent and makes sure no container or
    // host directory of the instance outlives the run.
    destroy_bounded(adapter, &id).await;
    if incomplete {
        eprintln!(
            "checkfu: the workload exited with status {code}; the output copy is incomplete, \
so checkfu exits {EXIT_OUTPUTS_INCOMPLETE}"
        );
        return Ok(EXIT_OUTPUTS_INCOMPLETE);
    }
    Ok(code)
}

async fn one_shot_run(
    adapter: &Adapter,
    id: &str,
    settings: &RunSettings,
    prompt: &[u8],
) -> Result<u8, Failure> {
    let c = &settings.command;
    let process = adapter
        .open_process(SandboxProcessRequest {
            instance_id: id.to_owned(),
            executable: c.executable.clone(),
            arguments: c.arguments.clone(),
            working_directory: c.working_directory.clone(),
            environment: c.environment.clone(),
        })
        .await?;
    let handle = process.handle.clone();
    let bound = Duration::from_secs(u64::from(c.timeout_seconds));
    let result = match tokio::time::timeout(bound, one_shot(process, prompt)).await {
        Ok(r) => r,
        Err(_) => {
            let _ = handle.destroy().await;
            eprintln!(
                "checkfu: the workload timed out after {} s",
                c.timeout_seconds
            );
            return Ok(EXIT_TIMED_OUT);
        }
    };
    match result {
        Ok(r) => {
            // A closed stdout is remembered by `out` and settled by `flow`.
            let _ = super::out::write(&r.stdout);
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&r.stderr);
            let _ = err.flush();
            Ok(match r.exit {
                ProcessExit::ExitCode(code) => code,
                ProcessExit::Signal(s) => 128u8.saturating_add(signal_number(s)),
            })
        }
        Err(DriverError::StdoutTooLarge { limit_bytes }) => {
            Err(Failure::from(SandboxError::SandboxOutputLimitExceeded {
                stream: checkfu_sandbox_contract::OutputStream::Stdout,
                limit_bytes,
            }))
        }
        Err(DriverError::Sandbox(f)) => Err(Failure::sandbox(&f)),
        Err(e) => {
            let _ = handle.destroy().await;
            Err(Failure::from(SandboxError::failed(
                "one_shot",
                checkfu_sandbox_contract::FailureReason::ProviderError,
                e.to_string(),
            )))
        }
    }
}

/// Runs the command.
pub fn run(args: RunArgs) -> ExitCode {
    let settings = match RunSettings::resolve(args) {
        Ok(s) => s,
        Err(f) => return f.report(),
    };
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let code = runtime.block_on(async move {
        // Signal handlers first, so that no signal between provision and
        // tracking goes unobserved.
        let stop = super::stop_signal();
        tokio::pin!(stop);
        let backend = tokio::select! {
            b = Backend::open(settings.provider) => match b {
                Ok(b) => b,
                Err(f) => return f.report_code(),
            },
            s = &mut stop => return stopped(s, None).await,
        };
        let tracked = Tracked::default();
        let flow = run_flow(settings, backend, tracked.clone());
        tokio::select! {
            code = flow => code,
            s = &mut stop => stopped(s, tracked.take()).await,
        }
    });
    ExitCode::from(code)
}

async fn stopped(signal: std::io::Result<super::Stop>, tracked: Held) -> u8 {
    let code = match signal {
        Ok(stop) => stop.code(),
        Err(e) => {
            eprintln!("checkfu: cannot watch for signals: {e}");
            return super::fail::EXIT_CHECKFU;
        }
    };
    match tracked {
        Some((adapter, instance)) => {
            match &instance {
                Some(id) => eprintln!("checkfu: interrupted; destroying instance {id}"),
                None => eprintln!("checkfu: interrupted"),
            }
            // A provider call the flow was waiting on runs to completion and
            // is rolled back by the runtime; let it settle before exiting.
            let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
            if !adapter.settle(bound).await {
                eprintln!(
                    "checkfu: provider calls still running after {} s; `checkfu sandbox cleanup` reclaims what they leave",
                    bound.as_secs()
                );
            }
            if let Some(id) = instance {
                destroy_bounded(&adapter, &id).await;
            }
        }
        None => eprintln!("checkfu: interrupted"),
    }
    code
}

impl Failure {
    fn report_code(&self) -> u8 {
        self.report();
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_flags_parse_from_the_right() {
        assert_eq!(
            parse_mount("./data:/data:ro").unwrap(),
            ("./data".into(), "/data".into(), MountAccess::ReadOnly)
        );
        assert_eq!(
            parse_mount("a:b:/data").unwrap(),
            ("a:b".into(), "/data".into(), MountAccess::ReadWrite)
        );
        assert_eq!(parse_mount("/data").unwrap_err().code, 2);
        assert_eq!(parse_mount("./d:data").unwrap_err().code, 2);
        assert_eq!(
            parse_git("/r:HEAD::/src").unwrap(),
            ("/r".into(), "HEAD".into(), String::new(), "/src".into())
        );
        assert_eq!(parse_git("/r:HEAD:/src").unwrap_err().code, 2);
    }

    #[test]
    fn byte_counts_and_cpu_counts_parse() {
        assert_eq!(parse_bytes("536870912"), Ok(536_870_912));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        for bad in [
            "",
            "M",
            "0",
            "1.5G",
            "-1",
            "12Q",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cpu_millis("1"), Ok(1_000));
        assert_eq!(parse_cpu_millis("1.5"), Ok(1_500));
        assert_eq!(parse_cpu_millis("0.25"), Ok(250));
        assert_eq!(parse_cpu_millis(".5"), Ok(500));
        assert_eq!(parse_cpu_millis("2."), Ok(2_000));
        for bad in ["", ".", "0", "0.000", "1.2345", "-1", "1,5", "a", "9999999"] {
            assert!(parse_cpu_millis(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn statuses_follow_container_tools() {
        assert_eq!(exit_status(ExitCause::ExitCode(42)), 42);
        assert_eq!(exit_status(ExitCause::TimedOut), 124);
        assert_eq!(exit_status(ExitCause::Signal(SignalName::Sigkill)), 137);
        assert_eq!(exit_status(ExitCause::Signal(SignalName::Sigterm)), 143);
    }
}
