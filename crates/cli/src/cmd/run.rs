//! `checkfu sandbox run`: one workload in a fresh sandbox, through the
//! session library (`checkfu_sandbox_session`).
//!
//! Flags are parsed into a [`RunPlan`] and checked ([`RunPlan::check`])
//! before anything is provisioned: a flag that does not parse exits 2, an
//! input the contract would refuse exits 125 with one line naming it. The
//! session then runs with a cancellation token that SIGHUP, SIGINT,
//! SIGQUIT and SIGTERM fire; its events are printed by [`super::run_events`].

use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_contract::bounds::MAX_OUTPUT_LIMIT_BYTES;
use checkfu_sandbox_contract::{MountAccess, Resources, SandboxCommand, SandboxMount};
use checkfu_sandbox_session::{MountPlan, MountSource, RunPlan, SessionError};
use tokio_util::sync::CancellationToken;

use super::fail::Failure;
use super::run_events::Printer;
use super::run_flags::{
    parse_bytes, parse_cpu_millis, parse_env, parse_git, parse_mount, parse_timeout, TIMEOUT_RANGE,
};
use super::{ProviderChoice, ProviderFlags, Stop};

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
  checkfu sandbox run --provider docker --image IMAGE --durable -- sh -c 'echo 1 > /mnt/session/outputs/n'
  checkfu sandbox run --provider docker --resume SNAPSHOT --outputs out -- cat /mnt/session/outputs/n
  IMAGE=$(checkfu sandbox fixture --provider linux | tail -n1)   # the fixture in the Linux store (root)
  checkfu sandbox run --provider linux --image \"$IMAGE\" -- sh -c 'id -u; hostname'

A durable run's snapshot id is printed on stderr and recorded in the state directory
(checkpoints/); `checkfu sandbox snapshots` lists them. --resume runs in a fresh instance
rehydrated from it, in the same scope ($CHECKFU_SCOPE) and on the same provider: another
scope, another provider, an unknown id or an expired snapshot is refused (exit 125, naming
the field and both values). `checkfu sandbox cleanup` sweeps expired snapshots.

Mounts are copies: every file under HOST_DIR (or of REPO_PATH at REV) is staged into
the sandbox through writeFile before activation, with its permission bits, and every
directory of HOST_DIR exists with its bits (Git records no empty directory); nothing
the workload does reaches the host, except what --outputs copies out of
/mnt/session/outputs (regular files only, each with its permission bits, never
outside DIR). A file over 16 MiB is not copied: each is named on stderr
with its size, the rest is copied. Holes stay holes: a file's all-zero 4 KiB blocks
are not written, so DIR takes what the workload wrote. One copy allocates at most
$CHECKFU_OUTPUT_MAX_BYTES (decimal bytes, default 1073741824) and never the last
1 GiB of the free space of DIR's file system; a file past that is named on stderr
and not copied, the files that fit are. The default mount access is rw. A Git mount
is read-only.

Resources: --pids defaults to 1024 on a provider that enforces a process limit
(docker, linux; the memory oracle enforces none, so it gets no default). A limit the provider
does not enforce is refused before anything is provisioned.

Exit status: the workload's own status; 124 when it ran past --timeout; 128+N when
signal N ended it; 125 when checkfu or the provider failed (one line on stderr: the
closed error tag, operation, field and values, after the workload's status when the
workload ran, as when the durable snapshot is refused), or when the output copy is
incomplete (the workload's status is reported on stderr first); 126/127 when the command could
not be executed / was not found (as the provider reports them); 2 for a flag that
does not parse (also --timeout 0, a --workdir that is relative or has . or .., a
malformed --image, an --env key outside ^[A-Za-z_][A-Za-z0-9_]*$, and a --mount
destination given twice); 129/130/131/143 when
checkfu itself got SIGHUP/SIGINT/SIGQUIT/SIGTERM (the instance is destroyed first); 141 when stdout was closed by its reader (the run still finishes
and releases the instance).")]
pub struct RunArgs {
    /// Provider to run on.
    #[command(flatten)]
    pub provider: ProviderFlags,
    /// Root image: `name@sha256:<hex>`, `name[:tag]` or an image ID `sha256:<hex>` (both resolved to `name@sha256:<hex>` first). Not with --resume, which runs on the snapshot's own image.
    #[arg(
        long,
        value_name = "REF",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub image: Option<String>,
    /// Resume SNAPSHOT, which a --durable run printed (see `checkfu sandbox snapshots`): the command runs in a fresh instance with the snapshot's files, image and mounts (no --mount or --git). Docker, linux and served providers; the memory oracle's snapshots do not outlive its process.
    #[arg(long, value_name = "SNAPSHOT", conflicts_with_all = ["mounts", "git"], value_parser = parse_snapshot_id)]
    pub resume: Option<String>,
    /// How long a --durable run's snapshot is kept: N followed by s, m, h or d (at least 1s) [default: 24h].
    #[arg(long, value_name = "DURATION", requires = "durable", value_parser = super::cleanup::parse_duration_seconds)]
    pub retention: Option<i64>,
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
    #[arg(long, value_name = "SECONDS", default_value_t = 600, value_parser = parse_timeout)]
    pub timeout: u32,
    /// Bound on each of stdout and stderr, in bytes (at most 16 MiB; not with --prompt).
    #[arg(long = "output-limit", value_name = "BYTES", default_value_t = MAX_OUTPUT_LIMIT_BYTES, conflicts_with = "prompt", value_parser = clap::value_parser!(u64).range(..=MAX_OUTPUT_LIMIT_BYTES))]
    pub output_limit: u64,
    /// Most processes of the workload at once, the command included (default 1024 where the provider enforces a limit; the provider's own supervisors are not counted).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Option<u32>,
    /// Memory limit: bytes, or N with a K, M, G or T suffix (powers of 1024), e.g. 512M.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory: Option<u64>,
    /// CPU limit in cores, e.g. 1.5 (at most three decimals).
    #[arg(long, value_name = "N.N", value_parser = parse_cpu_millis)]
    pub cpus: Option<u32>,
    /// Copy the regular files of /mnt/session/outputs into DIR afterwards, holes kept (one over 16 MiB, past $CHECKFU_OUTPUT_MAX_BYTES host bytes, or one that cannot be written into DIR, is named and skipped: exit 125).
    #[arg(long, value_name = "DIR")]
    pub outputs: Option<PathBuf>,
    /// Durable retention: release settles a snapshot (kept 24 h, or --retention) whose id is printed on stderr; `run --resume ID` resumes it.
    #[arg(long)]
    pub durable: bool,
    /// Run through openProcess with the one-shot driver: FILE's bytes on stdin, then end of file (stdout up to 4 MiB).
    #[arg(long, value_name = "FILE")]
    pub prompt: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD [ARGS...]")]
    pub command: Vec<String>,
}

/// The flags as a checked plan. Nothing is provisioned and no provider is
/// contacted.
///
/// # Errors
/// A usage failure (exit 2) for a flag that does not parse; a 125 failure
/// naming the input for one the contract refuses.
pub fn plan(args: RunArgs) -> Result<RunPlan, Failure> {
    if args.timeout == 0 {
        return Err(Failure::usage(format!(
            "--timeout 0: expected {TIMEOUT_RANGE}, actual 0"
        )));
    }
    if let Some(expected) = checkfu_sandbox_contract::validate::path_problem(&args.workdir) {
        return Err(Failure::usage(format!(
            "--workdir {}: the working directory must be {expected} in the sandbox",
            args.workdir
        )));
    }
    if let Some(image) = &args.image {
        if let Some(expected) = image_problem(image) {
            return Err(Failure::usage(format!(
                "--image {image}: expected {expected}"
            )));
        }
    }
    let mut mounts: Vec<MountPlan> = Vec::new();
    for text in &args.mounts {
        let (host, path, access) = parse_mount(text)?;
        if let Some(earlier) = mounts.iter().find(|m| m.mount.path == path) {
            return Err(Failure::usage(format!(
                "--mount {text}: the destination {path} is already taken by {}",
                earlier.input
            )));
        }
        mounts.push(MountPlan {
            input: format!("--mount {text}"),
            source: MountSource::Folder(host),
            mount: SandboxMount { path, access },
        });
    }
    for text in &args.git {
        let (repo, rev, repo_path, path) = parse_git(text)?;
        mounts.push(MountPlan {
            input: format!("--git {text}"),
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
    let environment = parse_env(&args.env)?;
    let (executable, arguments) = match args.command.split_first() {
        Some((first, rest)) if !first.is_empty() => (first.clone(), rest.to_vec()),
        _ => return Err(Failure::usage("expected a command after --")),
    };
    // Byte ceilings read only after the workload ran (the snapshot at
    // release, the output copy) are checked before anything starts.
    let bytes_knob = |env: &str| {
        Failure::usage(format!(
            "{env} {:?}: expected a decimal number of bytes",
            std::env::var(env).unwrap_or_default()
        ))
    };
    if args.durable
        && checkfu_sandbox_hostfs::archive::snapshot_ceiling_bytes(
            checkfu_sandbox_contract::provider::op::RELEASE,
        )
        .is_err()
    {
        return Err(bytes_knob(
            checkfu_sandbox_hostfs::archive::SNAPSHOT_MAX_BYTES_ENV,
        ));
    }
    if args.outputs.is_some() && checkfu_sandbox_session::output_ceiling_bytes().is_err() {
        return Err(bytes_knob(checkfu_sandbox_session::OUTPUT_MAX_BYTES_ENV));
    }
    if args.retention == Some(0) {
        return Err(Failure::usage(
            "--retention 0s: a snapshot must be kept at least 1 second",
        ));
    }
    let mut plan = RunPlan {
        image: args.image.unwrap_or_default(),
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
        prompt: None,
        resources: Resources {
            cpu_millis: args.cpus,
            memory_bytes: args.memory,
            pids: args.pids,
            disk_bytes: None,
        },
        enrollment: None,
        workspace_id: super::backend::scope(),
        snapshot_retention_seconds: args
            .retention
            .unwrap_or(checkfu_sandbox_session::SNAPSHOT_RETENTION_SECONDS),
        resume: None,
    };
    if let Some(id) = &args.resume {
        plan.resume = Some(super::snapshots::store().load(&format!("--resume {id}"), id)?);
    }
    plan.check()?;
    if let Some(path) = &args.prompt {
        plan.prompt = Some(std::fs::read(path).map_err(|e| {
            Failure::checkfu(format!("--prompt {}: cannot read: {e}", path.display()))
        })?);
    }
    Ok(plan)
}

/// Why `image` is no image reference (`name@sha256:<64 lowercase hex>`,
/// `name[:tag]`, or an image ID `sha256:<64 lowercase hex>`), or `None`.
/// A name is lowercase letters, digits and `._-/` separators, optionally
/// after a `host[:port]/`; a tag is up to 128 of `[A-Za-z0-9_.-]`, not
/// starting with `.` or `-` (the Docker reference grammar, loosely).
fn image_problem(image: &str) -> Option<&'static str> {
    const SHAPE: &str = "name@sha256:<64 lowercase hex>, name[:tag] or sha256:<64 lowercase hex>";
    let hex64 = |h: &str| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if let Some(h) = image.strip_prefix("sha256:") {
        return (!hex64(h)).then_some(SHAPE);
    }
    let name = match image.split_once('@') {
        Some((name, digest)) => {
            if !digest.strip_prefix("sha256:").is_some_and(hex64) {
                return Some(SHAPE);
            }
            name
        }
        None => {
            let slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[slash..].rfind(':') {
                Some(i) => {
                    let tag = &image[slash + i + 1..];
                    let tag_ok = !tag.is_empty()
                        && tag.len() <= 128
                        && !tag.starts_with(['.', '-'])
                        && tag
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
                    if !tag_ok {
                        return Some(SHAPE);
                    }
                    &image[..slash + i]
                }
                None => image,
            }
        }
    };
    // An optional registry host (with a port) before the first '/'.
    let path = match name.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => name,
    };
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
    };
    (!path.split('/').all(component_ok)).then_some(SHAPE)
}

/// SIGHUP, SIGINT, SIGQUIT and SIGTERM, installed now, fire `cancel`; the
/// handle yields the signal that did.
fn watch_signals(
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<Option<Stop>>> {
    let mut signals = super::StopSignals::install()?;
    Ok(tokio::spawn(async move {
        let stop = tokio::select! {
            stop = signals.recv() => stop,
            () = cancel.cancelled() => return None,
        };
        cancel.cancel();
        Some(stop)
    }))
}

/// Runs the command.
pub fn run(args: RunArgs) -> ExitCode {
    let choice = match args.provider.choice() {
        Ok(c) => c,
        Err(e) => return Failure::usage(e.to_string()).report(),
    };
    if args.resume.is_some() && !super::snapshots::outlives_process(&choice) {
        return super::snapshots::memory_refusal().report();
    }
    let plan = match plan(args) {
        Ok(p) => p,
        Err(f) => return f.report(),
    };
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let code = runtime.block_on(session(choice, plan));
    // A provider's blocking work abandoned at a deadline (a listing past
    // the output copy's deadline) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}

async fn session(choice: ProviderChoice, plan: RunPlan) -> u8 {
    let cancel = CancellationToken::new();
    // Signal handlers first, so that no signal between provision and
    // tracking goes unobserved.
    let watcher = match watch_signals(cancel.clone()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("checkfu: cannot watch for signals: {e}");
            return super::fail::EXIT_CHECKFU;
        }
    };
    let stopped = |watcher: tokio::task::JoinHandle<Option<Stop>>| async move {
        match watcher.await {
            Ok(Some(stop)) => stop.code(),
            _ => super::EXIT_SIGINT,
        }
    };
    let backend = tokio::select! {
        p = super::backend::open(&choice) => match p {
            Ok(p) => p,
            Err(f) => {
                f.report();
                return f.code;
            }
        },
        () = cancel.cancelled() => {
            eprintln!("checkfu: interrupted");
            return stopped(watcher).await;
        }
    };
    let printer = Printer::default();
    let mut plan = plan;
    plan.enrollment = backend.enrollment.clone();
    let result = checkfu_sandbox_session::run(
        backend.provider.clone(),
        super::backend::clock(),
        &plan,
        &printer,
        cancel.clone(),
    )
    .await;
    // Every way out: the instance is gone; a served provider's process is
    // ended and reaped.
    backend.close().await;
    if !cancel.is_cancelled() {
        cancel.cancel();
    }
    match result {
        Err(SessionError::Cancelled) => stopped(watcher).await,
        Err(e) => {
            let mut failure = Failure::from(e);
            // The workload ran: its status comes first on the failure line.
            if let Some(status) = printer.workload_status() {
                failure.line =
                    format!("the workload exited with status {status}; {}", failure.line);
            }
            printer.flush_stdout();
            failure.report();
            failure.code
        }
        Ok(outcome) => {
            if let Some(checkpoint) = &outcome.checkpoint {
                if !super::snapshots::outlives_process(&choice) {
                    eprintln!(
                        "checkfu: the memory oracle's snapshot lives only inside this process; \
it cannot be resumed"
                    );
                } else if let Err(e) = super::snapshots::store().record(checkpoint) {
                    eprintln!(
                        "checkfu: the workload exited with status {}; snapshot {} cannot be \
recorded for --resume ({e}), so checkfu exits {}",
                        outcome.status,
                        checkpoint.snapshot.snapshot_id,
                        super::fail::EXIT_CHECKFU
                    );
                    return super::fail::EXIT_CHECKFU;
                }
            }
            if !outcome.outputs_complete() {
                eprintln!(
                    "checkfu: the workload exited with status {}; the output copy is incomplete, \
so checkfu exits {EXIT_OUTPUTS_INCOMPLETE}",
                    outcome.status
                );
                return EXIT_OUTPUTS_INCOMPLETE;
            }
            if super::out::closed() {
                return super::out::EXIT_BROKEN_PIPE;
            }
            outcome.status
        }
    }
}

/// Parses a `--resume` value: a snapshot id is never empty and holds no
/// whitespace or control character.
///
/// # Errors
/// A message naming the expected shape and the value given.
pub fn parse_snapshot_id(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "expected a snapshot id (non-empty, no whitespace), actual {text:?}"
        ));
    }
    Ok(text.to_owned())
}
