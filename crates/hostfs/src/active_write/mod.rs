//! beginActiveWrite for the providers that keep host directories: a
//! durable journal in the state directory, the workload paused under a
//! pause token, publication by `rename` into the owning mount's host
//! directory, and recovery on the provider's next start (spec
//! "beginActiveWrite has an explicit ownership handoff"; decision
//! `027-active-write-journal`).
//!
//! One copy serves the Docker and the Linux provider. What differs between
//! them is behind [`ActiveWriteHost`]: how an instance is looked up, how its
//! workload is paused, resumed and seen paused (the daemon's pause, the
//! cgroup freezer), and where its journals and pause token live. The
//! provider calls [`begin`] from its `ActiveWriteMember` and [`recover`]
//! when it starts.
//!
//! # One transaction
//!
//! 1. Refusals before any body: an instance not `active`, an
//!    `ephemeral_zdr` instance (`SandboxCapabilityUnavailable{
//!    active_mount_write}`: the journal keeps bodies on durable host
//!    storage), a path outside one read-write mount (the deepest mount
//!    owning every target decides, [`owning_mount`]).
//! 2. A settled journal of the same `transaction_id` answers its outcome
//!    (another batch: `invalid_request` naming `transaction_id`); a
//!    dispatched or committed one whose delivery was abandoned is recovered
//!    first, then answered.
//! 3. **open**: the bodies are written to `staged/` of a temporary
//!    directory with the journal, which is renamed into place.
//! 4. The dispatch marker; an abort discards the journal and settles
//!    `rolled_back`.
//! 5. **dispatched** is written; the pause token is recorded, then the
//!    workload is paused — unless it is already paused without a token
//!    (a pre-existing pause, never resumed here); a token left by a
//!    predecessor is transferred to this transaction first.
//! 6. While paused: which targets exist is recorded; then per target the
//!    old file moves to `rollback/` and the staged body moves into place.
//!    A failure rolls every move back from the evidence.
//! 7. **committed** (with the outcome) is written before the evidence is
//!    deleted; the journal becomes **settled**; the workload is resumed
//!    and only then the token is cleared.
//!
//! # Recovery
//!
//! [`recover`] rolls every dispatched journal back from its evidence,
//! finishes every committed one forward, leaves open ones to their
//! callers, then takes over any pause token (transferred to `recovery`
//! before the predecessor's is cleared), resumes the workload and clears
//! the token. One provider process per state directory and scope is
//! assumed.

mod journal;
mod publish;
mod recovery;
mod transaction;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::store::{is_within, Layout};

pub use recovery::recover;
pub use transaction::begin;

const OP: Operation = op::BEGIN_ACTIVE_WRITE;

/// The name of the directory, inside an instance's directory of the state
/// directory, holding its journals and its pause token.
pub const ACTIVE_WRITE_DIR: &str = "active-write";

/// A named step of a transaction, for crash tests: a provider reports it
/// through [`ActiveWriteHost::reached`] (a test's hook makes the provider
/// stop there, as a crash would).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActiveWriteStep {
    /// The journal is open with every body staged; the marker is next.
    Staged,
    /// The marker returned; the journal is still open.
    Marked,
    /// The journal is dispatched, the workload paused and the first target
    /// moved; more moves and the committed marker are next.
    Dispatched,
    /// The committed marker is written; evidence, resume and token are
    /// next.
    Committed,
}

impl ActiveWriteStep {
    /// Every step, in order.
    pub const ALL: [ActiveWriteStep; 4] = [
        ActiveWriteStep::Staged,
        ActiveWriteStep::Marked,
        ActiveWriteStep::Dispatched,
        ActiveWriteStep::Committed,
    ];

    /// A stable kebab-case name.
    pub fn name(&self) -> &'static str {
        match self {
            ActiveWriteStep::Staged => "staged",
            ActiveWriteStep::Marked => "marked",
            ActiveWriteStep::Dispatched => "dispatched",
            ActiveWriteStep::Committed => "committed",
        }
    }
}

/// A crash-test hook called at each [`ActiveWriteStep`].
pub type StepHook = Arc<dyn Fn(ActiveWriteStep) + Send + Sync>;

/// What [`recover`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActiveWriteRecovery {
    /// `(instance id, transaction id)` rolled back from their evidence.
    pub rolled_back: Vec<(String, String)>,
    /// `(instance id, transaction id)` whose cleanup was finished forward.
    pub finished: Vec<(String, String)>,
    /// Instances whose workload was resumed under an inherited token.
    pub unpaused: Vec<String>,
}

/// What a transaction needs to know of an instance, from the provider's
/// own record.
#[derive(Debug, Clone)]
pub struct ActiveWriteInstance {
    /// The instance id (already checked by the provider to name one of its
    /// instances, so it is safe to join to a path).
    pub instance_id: String,
    /// Its lifecycle state.
    pub state: InstanceState,
    /// The provision (or resume) request: its mounts and profile.
    pub request: SandboxProvisionRequest,
}

/// What differs between the providers that publish through this module.
///
/// Pausing is the provider's: it must stop every process of the workload
/// (no workload code runs while paused) and report a pause it did not make
/// as paused, so that such a pause is left alone.
#[async_trait]
pub trait ActiveWriteHost: Send + Sync {
    /// The provider's id, in messages.
    fn provider_name(&self) -> &str;

    /// The state directory's layout (instances, their mounts' host
    /// directories).
    fn layout(&self) -> &Layout;

    /// The instance `instance_id` of this provider's scope.
    ///
    /// # Errors
    ///
    /// `SandboxInstanceNotFound` for an id that names none of its
    /// instances (malformed, unknown, another scope's); `provider_error`
    /// for an unreadable record.
    fn instance(&self, instance_id: &str) -> Result<ActiveWriteInstance, SandboxError>;

    /// Whether the workload is paused now (by anyone); `Ok(None)` when it
    /// no longer exists.
    ///
    /// # Errors
    ///
    /// Why the state could not be read.
    async fn workload_paused(&self, instance_id: &str) -> Result<Option<bool>, String>;

    /// Pauses the workload; returns once no process of it runs.
    ///
    /// # Errors
    ///
    /// Why it could not be paused (the pause is then ambiguous: the caller
    /// resumes it under its token).
    async fn pause_workload(&self, instance_id: &str) -> Result<(), String>;

    /// Resumes a paused workload; returns once it runs again.
    ///
    /// # Errors
    ///
    /// Why it could not be resumed (the token is kept).
    async fn unpause_workload(&self, instance_id: &str) -> Result<(), String>;

    /// The directory of the instance's journals and pause token:
    /// `<instance dir>/active-write` unless a provider keeps them
    /// elsewhere (on the same file system as the mounts' host directories:
    /// publication is a `rename`).
    fn journal_root(&self, instance_id: &str) -> PathBuf {
        self.layout()
            .instance_dir(instance_id)
            .join(ACTIVE_WRITE_DIR)
    }

    /// Called when a transaction reaches `step` (a crash-test seam; nothing
    /// by default).
    fn reached(&self, step: ActiveWriteStep) {
        let _ = step;
    }
}

/// Transaction directories a call of this process is working on.
static IN_FLIGHT: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// A transaction directory held by one call of this process.
struct Flight(PathBuf);

impl Flight {
    fn take(dir: &Path) -> Option<Flight> {
        let mut set = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(dir.to_path_buf())
            .then(|| Flight(dir.to_path_buf()))
    }

    fn busy(dir: &Path) -> bool {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(dir)
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        IN_FLIGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

fn failed(message: impl Into<String>) -> SandboxError {
    SandboxError::failed(OP, FailureReason::ProviderError, message)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    crate::errors::blocking(OP, f).await
}

/// The index of the deepest mount owning every file of `request` (a mount
/// owns a path strictly below its own path); it must be read-write.
///
/// # Errors
///
/// `SandboxOperationFailed{begin_active_write}` with `path_not_admitted`
/// for a path inside no mount or targets owned by two mounts, `read_only`
/// for a read-only owner, `invalid_request` for an empty batch.
pub fn owning_mount(
    request: &ActiveWriteRequest,
    mounts: &[SandboxMount],
) -> Result<usize, SandboxError> {
    let mut owner: Option<usize> = None;
    for f in &request.files {
        let deepest = mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| is_within(&f.path, &m.path) && f.path != m.path)
            .max_by_key(|(_, m)| m.path.len())
            .map(|(i, _)| i);
        let Some(i) = deepest else {
            return Err(SandboxError::failed(
                OP,
                FailureReason::PathNotAdmitted,
                format!("{} is inside no mount", f.path),
            ));
        };
        if mounts[i].access != MountAccess::ReadWrite {
            return Err(SandboxError::failed(
                OP,
                FailureReason::ReadOnly,
                format!("{} is inside read-only mount {}", f.path, mounts[i].path),
            ));
        }
        match owner {
            Some(o) if o != i => {
                return Err(SandboxError::failed(
                    OP,
                    FailureReason::PathNotAdmitted,
                    format!(
                        "{} and {} are owned by different mounts",
                        mounts[o].path, mounts[i].path
                    ),
                ))
            }
            _ => owner = Some(i),
        }
    }
    owner.ok_or_else(|| SandboxError::invalid_request(OP, "files", "at least one file", "[]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(path: &str, access: MountAccess) -> SandboxMount {
        SandboxMount {
            path: path.into(),
            access,
        }
    }

    fn files(paths: &[&str]) -> ActiveWriteRequest {
        ActiveWriteRequest {
            instance_id: "i".into(),
            transaction_id: "t".into(),
            files: paths
                .iter()
                .map(|p| ActiveWriteFile {
                    path: (*p).into(),
                    content_base64: b"x".to_vec().into(),
                })
                .collect(),
        }
    }

    fn reason(e: SandboxError) -> String {
        match e {
            SandboxError::SandboxOperationFailed { reason, .. } => reason.as_str().to_owned(),
            other => panic!("expected SandboxOperationFailed, got {other:?}"),
        }
    }

    #[test]
    fn the_deepest_owning_mount_decides() {
        let mounts = [
            mount("/w", MountAccess::ReadWrite),
            mount("/w/ro", MountAccess::ReadOnly),
            mount("/w/deep", MountAccess::ReadWrite),
        ];
        assert_eq!(
            owning_mount(&files(&["/w/a", "/w/x/b"]), &mounts).unwrap(),
            0
        );
        assert_eq!(owning_mount(&files(&["/w/deep/a"]), &mounts).unwrap(), 2);
        // The read-write ancestor cannot authorize a path in the nested
        // read-only mount, nor one batch span two owners.
        assert_eq!(
            reason(owning_mount(&files(&["/w/ro/a"]), &mounts).unwrap_err()),
            "read_only"
        );
        assert_eq!(
            reason(owning_mount(&files(&["/w/a", "/w/deep/a"]), &mounts).unwrap_err()),
            "path_not_admitted"
        );
        assert_eq!(
            reason(owning_mount(&files(&["/elsewhere/a"]), &mounts).unwrap_err()),
            "path_not_admitted"
        );
        assert_eq!(
            reason(owning_mount(&files(&[]), &mounts).unwrap_err()),
            "invalid_request"
        );
    }
}
