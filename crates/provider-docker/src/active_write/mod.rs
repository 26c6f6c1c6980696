//! beginActiveWrite on Docker: a durable journal in the state directory,
//! pauses through the daemon under a pause token, publication by `rename`
//! into the owning mount's host directory, and recovery on the provider's
//! next start (spec "beginActiveWrite has an explicit ownership handoff";
//! decision `027-active-write-journal`).
//!
//! # One transaction
//!
//! 1. Refusals before any body: an instance not `active`, an
//!    `ephemeral_zdr` instance (`SandboxCapabilityUnavailable{
//!    active_mount_write}`: the journal keeps bodies on durable host
//!    storage), a path outside one read-write mount (the deepest mount
//!    owning every target decides).
//! 2. A settled journal of the same `transaction_id` answers its outcome
//!    (another batch: `invalid_request` naming `transaction_id`); a
//!    dispatched or committed one whose delivery was abandoned is recovered
//!    first, then answered.
//! 3. **open**: the bodies are written to `staged/` of a temporary
//!    directory with the journal, which is renamed into place.
//! 4. The dispatch marker; an abort discards the journal and settles
//!    `rolled_back`.
//! 5. **dispatched** is written; the pause token is recorded, then the
//!    container is paused — unless it is already paused without a token
//!    (a pre-existing pause, never resumed by this provider); a token left
//!    by a predecessor is transferred to this transaction first.
//! 6. While paused: which targets exist is recorded; then per target the
//!    old file moves to `rollback/` and the staged body moves into place.
//!    A failure rolls every move back from the evidence.
//! 7. **committed** (with the outcome) is written before the evidence is
//!    deleted; the journal becomes **settled**; the container is unpaused
//!    and only then the token is cleared.
//!
//! # Recovery
//!
//! [`DockerProvider::recover_active_writes`] (run by
//! [`DockerProvider::connect`]) rolls every dispatched journal back from
//! its evidence, finishes every committed one forward, leaves open ones to
//! their callers, then takes over any pause token (transferred to
//! `recovery` before the predecessor's is cleared), unpauses and clears it.
//! One provider process per state directory and scope is assumed.

mod journal;
mod publish;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::active_write::batch_digest;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::provider::DockerProvider;
use crate::store::{self, InstanceRecord};
use journal::{Dirs, Journal, JournalState, PauseToken, JOURNAL_REVISION};
use publish::Target;

const OP: Operation = op::BEGIN_ACTIVE_WRITE;
/// The workload's user, owner of files published into read-write mounts.
const WORKLOAD_UID: u32 = 1000;

/// A named step of a transaction, for crash tests: the hook set with
/// [`DockerProvider::set_active_write_step_hook`] is called when the step
/// is reached (a test's child process kills itself there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActiveWriteStep {
    /// The journal is open with every body staged; the marker is next.
    Staged,
    /// The marker returned; the journal is still open.
    Marked,
    /// The journal is dispatched, the workload paused and the first target
    /// moved; more moves and the committed marker are next.
    Dispatched,
    /// The committed marker is written; evidence, unpause and token are
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

/// The hook type of [`DockerProvider::set_active_write_step_hook`].
pub type StepHook = Arc<dyn Fn(ActiveWriteStep) + Send + Sync>;

/// What [`DockerProvider::recover_active_writes`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActiveWriteRecovery {
    /// `(instance id, transaction id)` rolled back from their evidence.
    pub rolled_back: Vec<(String, String)>,
    /// `(instance id, transaction id)` whose cleanup was finished forward.
    pub finished: Vec<(String, String)>,
    /// Instances whose workload was unpaused under an inherited token.
    pub unpaused: Vec<String>,
}

/// Transaction directories a call of this process is working on.
static IN_FLIGHT: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

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
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| failed(format!("blocking task failed: {e}")))
}

fn within(path: &str, root: &str) -> bool {
    path == root || path.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
}

/// The index of the deepest mount owning every path; it must be
/// read-write.
fn owning_mount(
    request: &ActiveWriteRequest,
    mounts: &[SandboxMount],
) -> Result<usize, SandboxError> {
    let mut owner: Option<usize> = None;
    for f in &request.files {
        let deepest = mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| within(&f.path, &m.path) && f.path != m.path)
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

fn refuse_other_batch(journal: &Journal, digest: &str) -> Result<(), SandboxError> {
    if journal.batch_digest == digest {
        Ok(())
    } else {
        Err(SandboxError::invalid_request(
            OP,
            "transaction_id",
            format!("a redelivery of batch {}", journal.batch_digest),
            format!("another batch {digest}"),
        ))
    }
}

impl DockerProvider {
    /// Sets the hook called at each [`ActiveWriteStep`] (once per
    /// provider object; later calls are ignored). A crash-test seam.
    pub fn set_active_write_step_hook(&self, hook: StepHook) {
        let _ = self.inner.active_write_hook.set(hook);
    }

    fn step(&self, s: ActiveWriteStep) {
        if let Some(h) = self.inner.active_write_hook.get() {
            h(s);
        }
    }

    fn load(&self, id: &str) -> Result<InstanceRecord, SandboxError> {
        let not_found = || SandboxError::SandboxInstanceNotFound {
            instance_id: id.to_owned(),
        };
        match store::read_record::<InstanceRecord>(&self.inner.layout.instance_record(id)) {
            Ok(Some(rec)) if rec.scope == self.inner.scope => Ok(rec),
            Ok(_) => Err(not_found()),
            Err(m) => Err(failed(m)),
        }
    }

    /// The instance's container: the pooled container its record names
    /// (a warm-pool claim), else `checkfu-<id>`.
    fn container(&self, id: &str) -> String {
        self.load(id)
            .ok()
            .and_then(|rec| rec.pool_container)
            .unwrap_or_else(|| crate::provider::container_name(id))
    }

    /// Whether the container is paused; `None` when it does not exist.
    async fn paused(&self, id: &str) -> Result<Option<bool>, String> {
        crate::daemon::inspect_container(self.docker(), &self.container(id))
            .await
            .map(|c| c.map(|c| c.state.and_then(|s| s.paused).unwrap_or(false)))
            .map_err(|e| e.to_string())
    }

    /// Records the token (or takes over a predecessor's), then pauses.
    /// `Ok(false)`: a pre-existing pause without a token, left alone.
    async fn pause(&self, id: &str, dirs: &Dirs, holder: &str) -> Result<bool, String> {
        let paused = self.paused(id).await?.unwrap_or(false);
        let inherited = journal::read_token(dirs)?;
        if inherited.is_none() && paused {
            return Ok(false);
        }
        let token = PauseToken {
            holder: holder.to_owned(),
            inherited_from: inherited.map(|t| t.holder),
        };
        let d = dirs.clone();
        blocking(move || journal::write_token(&d, &token))
            .await
            .map_err(|e| e.to_string())??;
        if !paused {
            self.docker()
                .pause_container(&self.container(id))
                .await
                .map_err(|e| format!("pausing the workload: {e}"))?;
        }
        Ok(true)
    }

    /// Unpauses, and only once the unpause settled, clears the token.
    async fn unpause(&self, id: &str, dirs: &Dirs) -> Result<(), String> {
        if self.paused(id).await? == Some(true) {
            self.docker()
                .unpause_container(&self.container(id))
                .await
                .map_err(|e| format!("unpausing the workload: {e}"))?;
        }
        let d = dirs.clone();
        blocking(move || journal::clear_token(&d))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Rolls a dispatched journal back or finishes a committed one; the
    /// journal is settled afterwards. Open and settled journals are left.
    fn recover_journal(
        mount_root: &Path,
        dir: &Path,
        mut j: Journal,
    ) -> Result<Option<Journal>, String> {
        match j.state {
            JournalState::Open | JournalState::Settled => return Ok(None),
            JournalState::Dispatched => {
                let targets = j
                    .paths
                    .iter()
                    .map(|p| Target::new(p, &j.mount_path))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(existed) = &j.existed {
                    publish::roll_back(mount_root, dir, &targets, existed)?;
                }
                j.outcome = Some(ActiveWriteOutcome::RolledBack {
                    transaction_id: j.transaction_id.clone(),
                    reason: "rolled back from its evidence after an interrupted dispatch".into(),
                });
            }
            JournalState::Committed => {}
        }
        journal::remove_tree(&journal::staged(dir))?;
        journal::remove_tree(&journal::rollback(dir))?;
        j.state = JournalState::Settled;
        journal::write(dir, &j)?;
        Ok(Some(j))
    }

    /// Recovers every transaction of one instance that no call of this
    /// process is working on, then any pause token.
    async fn recover_instance(
        &self,
        rec: &InstanceRecord,
        report: &mut ActiveWriteRecovery,
    ) -> Result<(), SandboxError> {
        let id = rec.instance_id.clone();
        let dirs = Dirs::new(&self.inner.layout.instance_dir(&id));
        let d = dirs.clone();
        let layout = self.inner.layout.clone();
        let rec2 = rec.clone();
        let done = blocking(move || -> Result<Vec<Journal>, String> {
            let mut out = Vec::new();
            for dir in journal::transactions(&d)? {
                if Flight::busy(&dir) {
                    continue;
                }
                let Some(j) = journal::read(&dir)? else {
                    continue;
                };
                if rec2.request.mounts.get(j.mount_index).is_none() {
                    return Err(format!(
                        "journal {} names no mount {}",
                        dir.display(),
                        j.mount_index
                    ));
                }
                let root = layout.mount_dir(&rec2.instance_id, j.mount_index);
                let before = j.state;
                if let Some(settled) = Self::recover_journal(&root, &dir, j)? {
                    out.push(Journal {
                        state: before,
                        ..settled
                    });
                }
            }
            Ok(out)
        })
        .await?
        .map_err(failed)?;
        for j in done {
            let entry = (id.clone(), j.transaction_id.clone());
            if j.state == JournalState::Dispatched {
                report.rolled_back.push(entry);
            } else {
                report.finished.push(entry);
            }
        }
        if let Some(token) = journal::read_token(&dirs).map_err(failed)? {
            // Transfer the inherited token before clearing the predecessor's.
            let d = dirs.clone();
            let taken = PauseToken {
                holder: "recovery".into(),
                inherited_from: Some(token.holder),
            };
            blocking(move || journal::write_token(&d, &taken))
                .await?
                .map_err(failed)?;
            self.unpause(&id, &dirs).await.map_err(failed)?;
            report.unpaused.push(id);
        }
        Ok(())
    }

    /// Recovery of every instance of this provider's scope: dispatched
    /// journals rolled back from their evidence, committed ones finished
    /// forward, open ones left to their callers, inherited pause tokens
    /// taken over and released.
    ///
    /// # Errors
    /// `SandboxOperationFailed{begin_active_write, provider_error}` naming
    /// what could not be recovered (the rest is still attempted first).
    pub async fn recover_active_writes(&self) -> Result<ActiveWriteRecovery, SandboxError> {
        let instances = self.inner.layout.instances();
        let ids = blocking(move || -> Vec<String> {
            // The provider-owned state directory.
            #[allow(clippy::disallowed_methods)]
            let entries = match std::fs::read_dir(&instances) {
                Ok(e) => e,
                Err(_) => return Vec::new(),
            };
            let mut ids: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            ids.sort();
            ids
        })
        .await?;
        let mut report = ActiveWriteRecovery::default();
        let mut errors = Vec::new();
        for id in ids {
            let Ok(rec) = self.load(&id) else { continue };
            if let Err(e) = self.recover_instance(&rec, &mut report).await {
                errors.push(format!("{id}: {e}"));
            }
        }
        if errors.is_empty() {
            Ok(report)
        } else {
            Err(failed(format!(
                "active-write recovery: {}",
                errors.join("; ")
            )))
        }
    }

    /// Steps 6 and 7, or the rollback; the token is released either way.
    async fn publish(
        &self,
        rec: &InstanceRecord,
        dirs: &Dirs,
        dir: &Path,
        mut j: Journal,
        ours: bool,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        let id = rec.instance_id.clone();
        let root = self.inner.layout.mount_dir(&id, j.mount_index);
        let owner = match rec.request.mounts[j.mount_index].access {
            MountAccess::ReadWrite => Some(WORKLOAD_UID),
            MountAccess::ReadOnly => None,
        };
        let targets = j
            .paths
            .iter()
            .map(|p| Target::new(p, &j.mount_path))
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)?;
        let (r, d) = (root.clone(), dir.to_path_buf());
        let (result, j_back, targets) = blocking(move || {
            let mut j = j;
            let existed = match publish::existed(&r, &targets, owner) {
                Ok(e) => e,
                Err(reason) => return (Err(reason), j, targets),
            };
            j.existed = Some(existed.clone());
            if let Err(e) = journal::write(&d, &j) {
                return (Err(e), j, targets);
            }
            for k in 0..targets.len() {
                if let Err(reason) = publish::publish_one(&r, &d, &targets, &existed, k) {
                    return (Err(reason), j, targets);
                }
                if k == 0 {
                    return (Ok(true), j, targets);
                }
            }
            (Ok(false), j, targets)
        })
        .await?;
        j = j_back;
        // The first move is done: the crash point, then the rest.
        let result = match result {
            Ok(true) => {
                self.step(ActiveWriteStep::Dispatched);
                let (r, d) = (root.clone(), dir.to_path_buf());
                let existed = j.existed.clone().unwrap_or_default();
                blocking(move || {
                    (1..targets.len())
                        .try_for_each(|k| publish::publish_one(&r, &d, &targets, &existed, k))
                })
                .await?
            }
            Ok(false) => Ok(()),
            Err(reason) => Err(reason),
        };
        let outcome = match result {
            Ok(()) => {
                let outcome = ActiveWriteOutcome::Committed {
                    transaction_id: j.transaction_id.clone(),
                    mount_path: j.mount_path.clone(),
                    published: j.paths.clone(),
                };
                j.state = JournalState::Committed;
                j.outcome = Some(outcome.clone());
                let (d, jj) = (dir.to_path_buf(), j.clone());
                blocking(move || journal::write(&d, &jj))
                    .await?
                    .map_err(failed)?;
                self.step(ActiveWriteStep::Committed);
                outcome
            }
            Err(reason) => {
                let (r, d, jj) = (root.clone(), dir.to_path_buf(), j.clone());
                blocking(move || -> Result<(), String> {
                    let targets = jj
                        .paths
                        .iter()
                        .map(|p| Target::new(p, &jj.mount_path))
                        .collect::<Result<Vec<_>, _>>()?;
                    if let Some(existed) = &jj.existed {
                        publish::roll_back(&r, &d, &targets, existed)?;
                    }
                    Ok(())
                })
                .await?
                .map_err(failed)?;
                let outcome = ActiveWriteOutcome::RolledBack {
                    transaction_id: j.transaction_id.clone(),
                    reason,
                };
                j.outcome = Some(outcome.clone());
                outcome
            }
        };
        // Cleanup forward: evidence, settled, unpause, token.
        let d = dir.to_path_buf();
        blocking(move || -> Result<(), String> {
            journal::remove_tree(&journal::staged(&d))?;
            journal::remove_tree(&journal::rollback(&d))?;
            j.state = JournalState::Settled;
            journal::write(&d, &j)
        })
        .await?
        .map_err(failed)?;
        if ours {
            self.unpause(&id, dirs).await.map_err(failed)?;
        }
        Ok(outcome)
    }
}

#[async_trait]
impl ActiveWriteMember for DockerProvider {
    /// See the module documentation.
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        let request = transaction.request().clone();
        let rec = self.load(&request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state));
        }
        if rec.request.profile.retention == RetentionMode::EphemeralZdr {
            return Err(SandboxError::unavailable(
                Requirement::ActiveMountWrite,
                "the docker provider's active-write journal keeps file bodies in its state \
                 directory on durable host storage; ephemeral_zdr transactions are refused",
            ));
        }
        let mount_index = owning_mount(&request, &rec.request.mounts)?;
        let mount_path = rec.request.mounts[mount_index].path.clone();
        let digest = batch_digest(&request);
        let id = rec.instance_id.clone();
        let dirs = Dirs::new(&self.inner.layout.instance_dir(&id));
        let dir = dirs.transaction(&request.transaction_id);
        let Some(_flight) = Flight::take(&dir) else {
            return Err(failed(format!(
                "transaction {} is already being delivered",
                request.transaction_id
            )));
        };

        // A journal of this transaction from an earlier delivery.
        let (d, dg, root) = (
            dir.clone(),
            digest.clone(),
            self.inner.layout.mount_dir(&id, mount_index),
        );
        let earlier = blocking(
            move || -> Result<Result<Option<ActiveWriteOutcome>, SandboxError>, String> {
                let Some(j) = journal::read(&d)? else {
                    return Ok(Ok(None));
                };
                if let Err(e) = refuse_other_batch(&j, &dg) {
                    return Ok(Err(e));
                }
                match j.state {
                    JournalState::Open => {
                        // Its caller stopped observing before the marker: restage.
                        journal::remove_tree(&d)?;
                        Ok(Ok(None))
                    }
                    _ => {
                        let settled = match Self::recover_journal(&root, &d, j.clone())? {
                            Some(s) => s,
                            None => j,
                        };
                        Ok(Ok(settled.outcome))
                    }
                }
            },
        )
        .await?
        .map_err(failed)??;
        if let Some(outcome) = earlier {
            if journal::read_token(&dirs)
                .map_err(failed)?
                .is_some_and(|t| t.holder == request.transaction_id)
            {
                self.unpause(&id, &dirs).await.map_err(failed)?;
            }
            return Ok(outcome);
        }

        // Open: stage every body, then rename the journal into place.
        let j = Journal {
            journal_revision: JOURNAL_REVISION,
            transaction_id: request.transaction_id.clone(),
            batch_digest: digest,
            state: JournalState::Open,
            mount_index,
            mount_path,
            paths: request.files.iter().map(|f| f.path.clone()).collect(),
            existed: None,
            outcome: None,
        };
        let owner = WORKLOAD_UID;
        let (d, root_dir, jj) = (dir.clone(), dirs.root.clone(), j.clone());
        blocking(move || stage(&root_dir, &d, &jj, &request.files, owner))
            .await?
            .map_err(failed)?;
        self.step(ActiveWriteStep::Staged);

        if let Err(e) = transaction.mark_dispatched().await {
            let outcome = ActiveWriteOutcome::RolledBack {
                transaction_id: j.transaction_id.clone(),
                reason: format!("the caller aborted the open transaction: {e}"),
            };
            let (d, mut jj) = (dir.clone(), j.clone());
            jj.state = JournalState::Settled;
            jj.outcome = Some(outcome.clone());
            blocking(move || -> Result<(), String> {
                journal::remove_tree(&journal::staged(&d))?;
                journal::remove_tree(&journal::rollback(&d))?;
                journal::write(&d, &jj)
            })
            .await?
            .map_err(failed)?;
            return Ok(outcome);
        }
        self.step(ActiveWriteStep::Marked);

        let mut j = j;
        j.state = JournalState::Dispatched;
        let (d, jj) = (dir.clone(), j.clone());
        blocking(move || journal::write(&d, &jj))
            .await?
            .map_err(failed)?;
        let ours = match self.pause(&id, &dirs, &j.transaction_id).await {
            Ok(ours) => ours,
            Err(reason) => {
                // The pause is ambiguous: nothing moved; settle rolled back
                // and release whatever token was recorded.
                let outcome = ActiveWriteOutcome::RolledBack {
                    transaction_id: j.transaction_id.clone(),
                    reason,
                };
                let (d, mut jj) = (dir.clone(), j.clone());
                jj.state = JournalState::Settled;
                jj.outcome = Some(outcome.clone());
                blocking(move || -> Result<(), String> {
                    journal::remove_tree(&journal::staged(&d))?;
                    journal::remove_tree(&journal::rollback(&d))?;
                    journal::write(&d, &jj)
                })
                .await?
                .map_err(failed)?;
                self.unpause(&id, &dirs).await.map_err(failed)?;
                return Ok(outcome);
            }
        };
        self.publish(&rec, &dirs, &dir, j, ours).await
    }
}

/// Writes the open journal: bodies and record in a temporary directory,
/// renamed into place.
fn stage(
    root: &Path,
    dir: &Path,
    j: &Journal,
    files: &[ActiveWriteFile],
    owner: u32,
) -> Result<(), String> {
    use std::io::Write as _;
    std::fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    let tmp = root.join(format!(
        "{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("tx"),
        std::process::id()
    ));
    journal::remove_tree(&tmp)?;
    let io = |e: std::io::Error| format!("staging in {}: {e}", tmp.display());
    std::fs::create_dir_all(journal::staged(&tmp)).map_err(io)?;
    std::fs::create_dir_all(journal::rollback(&tmp)).map_err(io)?;
    for (k, f) in files.iter().enumerate() {
        let path = journal::staged(&tmp).join(k.to_string());
        let mut file = std::fs::File::create(&path).map_err(io)?;
        file.write_all(f.content_base64.as_slice()).map_err(io)?;
        std::os::unix::fs::fchown(&file, Some(owner), Some(owner)).map_err(io)?;
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    journal::sync_dir(&journal::staged(&tmp)).map_err(io)?;
    journal::write(&tmp, j)?;
    std::fs::rename(&tmp, dir)
        .map_err(|e| format!("opening the journal {}: {e}", dir.display()))?;
    journal::sync_dir(root).map_err(|e| e.to_string())
}
