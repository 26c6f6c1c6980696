//! The flow of one session: select, pin, provision, stage, activate, run,
//! copy outputs, release, destroy; and its unwinding on failure or
//! cancellation.

use checkfu_sandbox_contract::Operation;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::{
    Architecture, Clock, Digest, EnforcementLevel, ExitCause, FailureReason, ImageReference,
    NetworkPolicy, Os, OutputStream, Platform, ProcessExit, ReleaseDisposition, Requirement,
    RetentionMode, SandboxError, SandboxFailure, SandboxProcessRequest, SandboxProfile,
    SandboxProvider, SandboxProvisionRequest, SandboxSnapshot, SignalName, Tier,
};
use checkfu_sandbox_runtime::drivers::{one_shot, DriverError};
use checkfu_sandbox_runtime::staging::{stage_folder, stage_git, StageProgress};
use checkfu_sandbox_runtime::{Adapter, Requirements, SandboxRuntime};
use tokio_util::sync::CancellationToken;

use crate::outputs::{copy_outputs, CopyReport};
use crate::plan::{MountSource, RunPlan};
use crate::SessionError;
use crate::{Checkpoint, CHECKPOINT_REVISION};

/// Status of a workload that ran past its timeout (as `timeout(1)`).
pub const EXIT_TIMED_OUT: u8 = 124;

/// How long a durable run's snapshot is retained, in seconds (24 h).
pub const SNAPSHOT_RETENTION_SECONDS: i64 = 24 * 60 * 60;

/// Least time the output copy gets, in seconds, even when the workload
/// used its whole timeout.
pub const OUTPUT_COPY_MIN_SECONDS: u64 = 5;

/// The output copy's deadline: the run's deadline (the workload's start
/// plus its timeout), but at least [`OUTPUT_COPY_MIN_SECONDS`] from now.
pub fn copy_deadline(
    workload_started: tokio::time::Instant,
    timeout_seconds: u32,
) -> tokio::time::Instant {
    let run = workload_started + std::time::Duration::from_secs(u64::from(timeout_seconds));
    run.max(tokio::time::Instant::now() + std::time::Duration::from_secs(OUTPUT_COPY_MIN_SECONDS))
}

/// Least time a durable run's snapshot (the release that settles it)
/// gets, in seconds, even when the workload and the output copy used the
/// run's whole timeout.
pub const SNAPSHOT_MIN_SECONDS: u64 = 30;

/// The durable snapshot's deadline: the run's deadline (the workload's
/// start plus its timeout), but at least [`SNAPSHOT_MIN_SECONDS`] from now.
pub fn snapshot_deadline(
    workload_started: tokio::time::Instant,
    timeout_seconds: u32,
) -> tokio::time::Instant {
    let run = workload_started + std::time::Duration::from_secs(u64::from(timeout_seconds));
    run.max(tokio::time::Instant::now() + std::time::Duration::from_secs(SNAPSHOT_MIN_SECONDS))
}

/// Slack added to the workload's timeout for the instance's hard expiry,
/// in seconds: staging, activation, output copy and release fit in it.
pub const EXPIRY_SLACK_SECONDS: i64 = 60 * 60;

/// Staging reports progress from this many files of one mount on, at
/// each tenth and at the end.
pub const PROGRESS_FROM_FILES: usize = 100;

/// The process limit of a run that asks for none, on a provider that
/// enforces one.
pub const DEFAULT_PIDS: u32 = 1024;

/// What a session reports while it runs, in order.
#[derive(Debug)]
pub enum Event<'a> {
    /// The image, pinned by the provider.
    Image(&'a ImageReference),
    /// Staging of one mount advanced (see [`PROGRESS_FROM_FILES`]).
    Staging {
        /// The mount path.
        mount_path: &'a str,
        /// Files written so far.
        done: usize,
        /// Files in all.
        total: usize,
    },
    /// The workload settled: its standard output and error (for a prompt
    /// run, stdout as the one-shot driver collected it).
    Output {
        /// Standard output.
        stdout: &'a [u8],
        /// Standard error.
        stderr: &'a [u8],
    },
    /// The workload settled with this status (see [`exit_status`]),
    /// before the output copy and the release; a failure of either is
    /// still the session's failure, and this is how it learns the
    /// workload's status.
    Exited {
        /// The status as a shell reports it.
        status: u8,
    },
    /// The workload ran past its timeout, in seconds.
    TimedOut {
        /// The timeout.
        seconds: u32,
    },
    /// The output tree was copied (possibly incompletely).
    OutputsCopied {
        /// The host folder.
        dir: &'a Path,
        /// What was copied, skipped and not written.
        report: &'a CopyReport,
    },
    /// A durable release settled this snapshot.
    Snapshot(&'a SandboxSnapshot),
    /// Cancellation fired; the instance (if one is held) is destroyed next.
    Cancelled {
        /// The instance held, if any.
        instance_id: Option<&'a str>,
    },
    /// Provider calls were still running past this many seconds after a
    /// cancellation.
    Unsettled {
        /// The bound, in seconds.
        seconds: u64,
    },
    /// Destroying the instance failed (`failure`) or did not settle within
    /// `seconds` (`failure: None`).
    DestroyFailed {
        /// The instance.
        instance_id: &'a str,
        /// The failure, if the call returned one.
        failure: Option<&'a SandboxFailure>,
        /// The bound, in seconds.
        seconds: u64,
    },
}

/// Receives a session's [`Event`]s.
pub trait Observer: Send + Sync {
    /// One event.
    fn event(&self, event: Event<'_>);
}

impl<F: Fn(Event<'_>) + Send + Sync> Observer for F {
    fn event(&self, event: Event<'_>) {
        self(event)
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The workload's status as a shell reports it (see [`exit_status`]).
    pub status: u8,
    /// The instance the session ran in (released and destroyed).
    pub instance_id: String,
    /// The output copy, when an output folder was given.
    pub outputs: Option<CopyReport>,
    /// The snapshot a durable release settled.
    pub snapshot: Option<SandboxSnapshot>,
    /// That snapshot with what resuming it needs (record it in a
    /// [`CheckpointStore`](crate::CheckpointStore) to resume it later).
    pub checkpoint: Option<Checkpoint>,
}

impl RunOutcome {
    /// False when some output file was skipped or not written.
    pub fn outputs_complete(&self) -> bool {
        self.outputs.as_ref().is_none_or(CopyReport::complete)
    }
}

/// The adapter a session uses and the instance it holds.
type Held = Option<(Adapter, Option<String>)>;

#[derive(Default, Clone)]
struct Tracked(Arc<Mutex<Held>>);

impl Tracked {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // A poisoned lock only means a panic elsewhere; the value is sound.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn set(&self, adapter: &Adapter, instance_id: Option<&str>) {
        *self.lock() = Some((adapter.clone(), instance_id.map(str::to_owned)));
    }
    /// Released: nothing to destroy; the adapter stays for settling.
    fn clear(&self) {
        if let Some((_, instance)) = self.lock().as_mut() {
            *instance = None;
        }
    }
    fn take(&self) -> Held {
        self.lock().take()
    }
}

/// The platform of this machine.
pub fn host_platform() -> Platform {
    Platform {
        os: Os::Linux,
        architecture: if std::env::consts::ARCH == "aarch64" {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
    }
}

/// Runs `plan` on `provider`, stamping deadlines with `clock`, reporting to
/// `observer`, until the workload settled and the instance is released and
/// destroyed, or `cancel` fires.
///
/// # Errors
/// [`SessionError::Cancelled`] after a cancellation (in-flight calls
/// settled, the instance destroyed); otherwise the first failure, after
/// the instance (if one was provisioned) was destroyed.
pub async fn run(
    provider: Arc<dyn SandboxProvider>,
    clock: Arc<dyn Clock>,
    plan: &RunPlan,
    observer: &dyn Observer,
    cancel: CancellationToken,
) -> Result<RunOutcome, SessionError> {
    let tracked = Tracked::default();
    let result = tokio::select! {
        r = flow(provider, clock, plan, observer, &tracked) => r,
        () = cancel.cancelled() => {
            unwind(tracked.take(), observer).await;
            return Err(SessionError::Cancelled);
        }
    };
    if result.is_err() {
        if let Some((adapter, Some(id))) = tracked.take() {
            destroy_bounded(&adapter, &id, observer).await;
        }
    }
    result
}

/// After a cancellation: let provider calls settle (the runtime rolls back
/// their handoffs), then destroy the instance.
async fn unwind(held: Held, observer: &dyn Observer) {
    let Some((adapter, instance)) = held else {
        observer.event(Event::Cancelled { instance_id: None });
        return;
    };
    observer.event(Event::Cancelled {
        instance_id: instance.as_deref(),
    });
    let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
    if !adapter.settle(bound).await {
        observer.event(Event::Unsettled {
            seconds: bound.as_secs(),
        });
    }
    if let Some(id) = instance {
        destroy_bounded(&adapter, &id, observer).await;
    }
}

/// The profile of a session: the pinned image's digest, network `none`,
/// the workload's timeout as the longest command, the limits asked for
/// (with [`DEFAULT_PIDS`] when `pids_enforced` and none was asked).
pub fn profile(plan: &RunPlan, image_digest: Digest, pids_enforced: bool) -> SandboxProfile {
    let mut resources = plan.resources.clone();
    if resources.pids.is_none() && pids_enforced {
        resources.pids = Some(DEFAULT_PIDS);
    }
    SandboxProfile {
        profile_id: "checkfu-cli-run".into(),
        profile_version: 1,
        profile_digest: image_digest,
        retention: if plan.durable {
            RetentionMode::Durable
        } else {
            RetentionMode::EphemeralZdr
        },
        network_policy: NetworkPolicy::None,
        max_duration_seconds: plan.command.timeout_seconds,
        resources,
        packages: Vec::new(),
    }
}

async fn flow(
    provider: Arc<dyn SandboxProvider>,
    clock: Arc<dyn Clock>,
    plan: &RunPlan,
    observer: &dyn Observer,
    tracked: &Tracked,
) -> Result<RunOutcome, SessionError> {
    let mut runtime = SandboxRuntime::new(clock);
    let provider_id = provider.provider_id().to_owned();
    runtime
        .register_as(provider, plan.enrollment.as_ref())
        .map_err(SandboxFailure::from)?;
    // The registered adapter pins the image and tells whether a process
    // limit is enforced; selection then proves it meets the run's needs.
    // A resumed checkpoint carries its pinned image: the runtime's resume
    // checks hold it to the snapshot, and the provider to its record.
    let registered = runtime.adapter(&provider_id)?;
    let root_image = match &plan.resume {
        Some(c) => c.root_image.clone(),
        None => registered.resolve_image(&plan.image).await?,
    };
    observer.event(Event::Image(&root_image));
    let enforcement = registered.envelope().enforcement;
    let pids_enforced = enforcement.pids != EnforcementLevel::NotEnforced;
    // A limit nobody enforces is refused naming the limit and both values
    // (selection alone would say only "lacks resources").
    let asked = &plan.resources;
    for (field, value, level) in [
        (
            "resources.cpu_millis",
            asked.cpu_millis.map(u64::from),
            enforcement.cpu,
        ),
        (
            "resources.memory_bytes",
            asked.memory_bytes,
            enforcement.memory,
        ),
        (
            "resources.pids",
            asked.pids.map(u64::from),
            enforcement.pids,
        ),
        ("resources.disk_bytes", asked.disk_bytes, enforcement.disk),
    ] {
        if let (Some(value), EnforcementLevel::NotEnforced) = (value, level) {
            return Err(SandboxError::unavailable(
                Requirement::Resources,
                format!(
                    "{field}: expected a provider that enforces it, actual provider \
{provider_id} enforcement not_enforced (asked {value})"
                ),
            )
            .into());
        }
    }
    let profile = profile(plan, root_image.digest(), pids_enforced);
    let platform = host_platform();
    let declared = plan.declared_mounts();
    let mut needs =
        Requirements::for_profile(&profile, Tier::Container, platform, declared.clone());
    needs.physically_contained_file_read = plan.outputs.is_some();
    let adapter = runtime.select(&needs)?;
    tracked.set(&adapter, None);

    let now = runtime.clock().now();
    let run_id = format!("cli-{}-{}", std::process::id(), now.unix_millis());
    let request = SandboxProvisionRequest {
        provider: adapter.provider_id().to_owned(),
        placement: adapter.envelope().placement,
        workspace_id: plan.workspace_id.clone(),
        // A resumed instance continues its snapshot's Session.
        session_id: match &plan.resume {
            Some(c) => c.snapshot.session_id.clone(),
            None => run_id.clone(),
        },
        run_id: run_id.clone(),
        attempt_id: "1".into(),
        lease_id: run_id.clone(),
        lease_epoch: 1,
        target: Tier::Container,
        profile,
        platform,
        root_image: root_image.clone(),
        mounts: declared.clone(),
        expires_at: now.add_seconds(i64::from(plan.command.timeout_seconds) + EXPIRY_SLACK_SECONDS),
    };
    let id = match &plan.resume {
        Some(c) => {
            let instance = adapter.resume(request, c.snapshot.clone()).await?;
            tracked.set(&adapter, Some(&instance.instance_id));
            tracing::info!(instance_id = %instance.instance_id, snapshot_id = %c.snapshot.snapshot_id, "resumed");
            instance.instance_id
        }
        None => {
            let instance = adapter.provision(request).await?;
            let id = instance.instance_id.clone();
            tracked.set(&adapter, Some(&id));
            tracing::info!(instance_id = %id, "provisioned");
            stage_all(&adapter, &id, plan, observer).await?;
            adapter.activate(&id).await?;
            id
        }
    };
    tracing::info!(instance_id = %id, "workload started");
    let workload_started = tokio::time::Instant::now();

    let status = match &plan.prompt {
        None => {
            let result = adapter.execute(&id, plan.command.clone()).await?;
            observer.event(Event::Output {
                stdout: &result.stdout_base64.0,
                stderr: &result.stderr_base64.0,
            });
            if result.exit == ExitCause::TimedOut {
                observer.event(Event::TimedOut {
                    seconds: plan.command.timeout_seconds,
                });
            }
            exit_status(result.exit)
        }
        Some(prompt) => one_shot_run(&adapter, &id, plan, prompt, observer).await?,
    };
    observer.event(Event::Exited { status });

    let outputs = match &plan.outputs {
        Some(dir) => {
            let deadline = copy_deadline(workload_started, plan.command.timeout_seconds);
            let report = copy_outputs(&adapter, &id, dir, deadline).await?;
            observer.event(Event::OutputsCopied {
                dir,
                report: &report,
            });
            Some(report)
        }
        None => None,
    };
    let checkpoint = |snapshot: &SandboxSnapshot| Checkpoint {
        revision: CHECKPOINT_REVISION,
        snapshot: snapshot.clone(),
        root_image: root_image.clone(),
        mounts: declared.clone(),
    };
    let snapshot = if plan.durable {
        let expires = runtime
            .clock()
            .now()
            .add_seconds(plan.snapshot_retention_seconds);
        let deadline = snapshot_deadline(workload_started, plan.command.timeout_seconds);
        let released = tokio::time::timeout_at(deadline, adapter.release(&id, Some(expires)))
            .await
            .map_err(|_| {
                SandboxError::failed(
                    checkfu_sandbox_contract::provider::op::RELEASE,
                    FailureReason::TimedOut,
                    format!(
                        "the snapshot did not settle by the run's deadline (timeout {} s, \
at least {SNAPSHOT_MIN_SECONDS} s after the workload)",
                        plan.command.timeout_seconds
                    ),
                )
            })?;
        match released? {
            ReleaseDisposition::Released { snapshot } => {
                observer.event(Event::Snapshot(&snapshot));
                Some(snapshot)
            }
            ReleaseDisposition::Destroyed => None,
        }
    } else {
        adapter.release(&id, None).await?;
        None
    };
    tracked.clear();
    // Release settled; destroy is idempotent and makes sure nothing of the
    // instance outlives the session.
    destroy_bounded(&adapter, &id, observer).await;
    Ok(RunOutcome {
        status,
        instance_id: id,
        outputs,
        checkpoint: snapshot.as_ref().map(checkpoint),
        snapshot,
    })
}

/// Stages every mount of the plan, in order, into a provisioning instance.
async fn stage_all(
    adapter: &Adapter,
    id: &str,
    plan: &RunPlan,
    observer: &dyn Observer,
) -> Result<(), SessionError> {
    for mount in &plan.mounts {
        let progress = stage_progress(&mount.mount.path, observer);
        let staged = match &mount.source {
            MountSource::Folder(dir) => {
                stage_folder(adapter, id, dir, &mount.mount.path, &progress).await
            }
            MountSource::Git {
                repo,
                rev,
                repo_path,
            } => {
                let path = &mount.mount.path;
                stage_git(adapter, id, repo, rev, repo_path, path, &progress).await
            }
        };
        staged.map_err(|f| SessionError::input(&mount.input, f))?;
    }
    Ok(())
}

/// Staging progress as events, from [`PROGRESS_FROM_FILES`] files on, at
/// each tenth and at the end.
fn stage_progress<'a>(
    mount_path: &'a str,
    observer: &'a dyn Observer,
) -> impl Fn(StageProgress) + Send + Sync + 'a {
    let last_decile = Mutex::new(0usize);
    move |p: StageProgress| {
        if p.total < PROGRESS_FROM_FILES {
            return;
        }
        let decile = p.done * 10 / p.total.max(1);
        let mut last = last_decile.lock().unwrap_or_else(|e| e.into_inner());
        if decile > *last || p.done == p.total {
            *last = decile;
            observer.event(Event::Staging {
                mount_path,
                done: p.done,
                total: p.total,
            });
        }
    }
}

async fn one_shot_run(
    adapter: &Adapter,
    id: &str,
    plan: &RunPlan,
    prompt: &[u8],
    observer: &dyn Observer,
) -> Result<u8, SessionError> {
    let c = &plan.command;
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
            observer.event(Event::TimedOut {
                seconds: c.timeout_seconds,
            });
            return Ok(EXIT_TIMED_OUT);
        }
    };
    match result {
        Ok(r) => {
            observer.event(Event::Output {
                stdout: &r.stdout,
                stderr: &r.stderr,
            });
            Ok(match r.exit {
                ProcessExit::ExitCode(code) => code,
                ProcessExit::Signal(s) => 128u8.saturating_add(signal_number(s)),
            })
        }
        Err(DriverError::StdoutTooLarge { limit_bytes }) => {
            Err(SandboxError::SandboxOutputLimitExceeded {
                stream: OutputStream::Stdout,
                limit_bytes,
            }
            .into())
        }
        Err(DriverError::Sandbox(f)) => Err(SessionError::Sandbox(f)),
        Err(e) => {
            let _ = handle.destroy().await;
            Err(SandboxError::failed(
                Operation::OneShot,
                FailureReason::ProviderError,
                e.to_string(),
            )
            .into())
        }
    }
}

/// Destroys `instance_id`, bounded at 30 s; a failure is an event.
async fn destroy_bounded(adapter: &Adapter, instance_id: &str, observer: &dyn Observer) {
    let bound = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
    let failed = |failure| {
        observer.event(Event::DestroyFailed {
            instance_id,
            failure,
            seconds: bound.as_secs(),
        })
    };
    match tokio::time::timeout(bound, adapter.destroy(instance_id)).await {
        Ok(Ok(())) => {}
        Ok(Err(f)) => failed(Some(&f)),
        Err(_) => failed(None),
    }
}

/// The status of a command's settlement as a shell reports it: its exit
/// code, [`EXIT_TIMED_OUT`], or 128 + the signal's number.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_container_tools() {
        assert_eq!(exit_status(ExitCause::ExitCode(42)), 42);
        assert_eq!(exit_status(ExitCause::TimedOut), 124);
        assert_eq!(exit_status(ExitCause::Signal(SignalName::Sigkill)), 137);
        assert_eq!(exit_status(ExitCause::Signal(SignalName::Sigterm)), 143);
    }
}
