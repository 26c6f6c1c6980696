//! beginActiveWrite with a real journal (spec "beginActiveWrite has an
//! explicit ownership handoff"; decision `027-active-write-journal`).
//!
//! Per instance the oracle keeps its journals (`open` → `dispatched` →
//! `committed`), the settled outcome of every transaction with its batch
//! digest, and the workload's pause state:
//!
//! 1. A delivery whose `transaction_id` has a settled outcome gets that
//!    outcome (a different batch is refused `invalid_request` naming
//!    `transaction_id`); nothing is published again.
//! 2. Otherwise the batch is staged in an **open** journal (bodies and the
//!    owning mount). An open journal of the same transaction (a delivery
//!    whose caller stopped observing before the marker) is restaged; open
//!    journals of other transactions are never touched.
//! 3. The dispatch marker is invoked. An abort discards the journal and
//!    settles `rolled_back`.
//! 4. The journal becomes **dispatched**; the oracle records its pause token
//!    and pauses the workload — unless the workload is already paused
//!    without a token of the oracle's (a pre-existing pause), which it then
//!    neither pauses nor resumes.
//! 5. Publication swaps a staged copy of the tree in (all files or none);
//!    the old tree is the rollback evidence. A staging failure restores
//!    nothing because nothing was swapped, and settles `rolled_back`.
//! 6. The **committed** marker (the settled outcome) is recorded before the
//!    evidence is dropped; then the workload is unpaused and only after the
//!    unpause the token is cleared; the journal is removed.
//!
//! The journal lives in memory only, so the oracle accepts `ephemeral_zdr`
//! transactions; [`crate::MemoryProvider`] can simulate a journal on
//! durable host storage ([`crate::MemoryProviderBuilder::durable_journal`]),
//! which refuses them before any body is staged.

use std::collections::BTreeMap;

use async_trait::async_trait;
use checkfu_sandbox_contract::active_write::batch_digest;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::Inner;
use crate::fault::{ActiveWriteFault as F, Fault};
use crate::fs::{is_within, split, Fs, FsNode};

const OP: Operation = op::BEGIN_ACTIVE_WRITE;

/// Where a journal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JournalState {
    /// Staged, caller-owned, abortable.
    Open,
    /// Past the marker: the oracle's to publish or roll back.
    Dispatched,
    /// The committed marker is recorded; evidence may be deleted.
    Committed,
}

#[derive(Debug)]
pub(crate) struct Journal {
    pub(crate) state: JournalState,
    digest: String,
    /// The staged bodies, in request order.
    staged: Vec<ActiveWriteFile>,
    mount_path: String,
    /// The tree before publication (rollback evidence), while dispatched.
    evidence: Option<Fs>,
}

/// One instance's beginActiveWrite state.
#[derive(Debug, Default)]
pub(crate) struct ActiveWrites {
    pub(crate) journals: BTreeMap<String, Journal>,
    /// transaction id -> (batch digest, settled outcome).
    settled: BTreeMap<String, (String, ActiveWriteOutcome)>,
    /// Paused from outside the oracle (an operator, a snapshot).
    pub(crate) paused_externally: bool,
    /// The oracle's own pause token: the transaction that paused.
    pub(crate) pause_token: Option<String>,
}

impl ActiveWrites {
    /// Whether the workload is paused now.
    pub(crate) fn paused(&self) -> bool {
        self.paused_externally || self.pause_token.is_some()
    }
}

impl Inner {
    fn aw(&self, f: F) -> bool {
        self.has(Fault::ActiveWrite(f))
    }

    /// Whether the journal keeps bodies on durable host storage (simulated).
    pub(crate) fn journal_durable(&self) -> bool {
        self.durable_journal || self.aw(F::ZdrBodyAccepted)
    }

    /// Steps 1 and 2: the settled outcome, or a fresh open journal and the
    /// owning mount.
    fn open_journal(
        &self,
        request: &ActiveWriteRequest,
    ) -> Result<Option<ActiveWriteOutcome>, SandboxError> {
        let digest = batch_digest(request);
        let durable = self.journal_durable();
        let mut st = self.lock();
        let record = st.instance(&request.instance_id)?;
        if let Some((d, outcome)) = record.active_writes.settled.get(&request.transaction_id) {
            if *d != digest {
                return Err(SandboxError::invalid_request(
                    OP,
                    "transaction_id",
                    format!("a redelivery of batch {d}"),
                    format!("another batch {digest}"),
                ));
            }
            let outcome = outcome.clone();
            if let ActiveWriteOutcome::Committed { .. } = &outcome {
                if self.aw(F::RedeliveryReapplied) {
                    let _ = stage(&mut record.fs, &mount_of(&outcome), &request.files);
                }
                if self.aw(F::RedeliveryDiffers) {
                    return Ok(Some(ActiveWriteOutcome::RolledBack {
                        transaction_id: request.transaction_id.clone(),
                        reason: "already applied".into(),
                    }));
                }
            }
            return Ok(Some(outcome));
        }
        if let Some(j) = record.active_writes.journals.get(&request.transaction_id) {
            if j.digest != digest {
                return Err(SandboxError::invalid_request(
                    OP,
                    "transaction_id",
                    format!("a redelivery of batch {}", j.digest),
                    format!("another batch {digest}"),
                ));
            }
        }
        if record.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", record.state));
        }
        if durable
            && record.request.profile.retention == RetentionMode::EphemeralZdr
            && !self.aw(F::ZdrBodyAccepted)
        {
            return Err(SandboxError::unavailable(
                Requirement::ActiveMountWrite,
                "this journal keeps file bodies on durable host storage; an ephemeral_zdr \
                 instance's bodies may not be placed there",
            ));
        }
        let mut owner: Option<SandboxMount> = None;
        for f in &request.files {
            let owners: Vec<&SandboxMount> = record
                .request
                .mounts
                .iter()
                .filter(|m| is_within(&f.path, &m.path) && f.path != m.path)
                .collect();
            let pick = if self.aw(F::ShallowMount) {
                owners.iter().min_by_key(|m| split(&m.path).len())
            } else {
                owners.iter().max_by_key(|m| split(&m.path).len())
            };
            let Some(m) = pick.map(|m| (*m).clone()) else {
                return Err(SandboxError::failed(
                    OP,
                    FailureReason::PathNotAdmitted,
                    format!("{} is inside no mount", f.path),
                ));
            };
            if m.access == MountAccess::ReadOnly && !self.has(Fault::SealIgnored) {
                return Err(SandboxError::failed(
                    OP,
                    FailureReason::ReadOnly,
                    format!("{} is inside read-only mount {}", f.path, m.path),
                ));
            }
            match &owner {
                Some(o) if o.path != m.path => {
                    return Err(SandboxError::failed(
                        OP,
                        FailureReason::PathNotAdmitted,
                        format!("{} and {} are owned by different mounts", o.path, m.path),
                    ))
                }
                _ => owner = Some(m),
            }
        }
        let Some(owner) = owner else {
            return Err(SandboxError::invalid_request(
                OP,
                "files",
                "at least one file",
                "[]",
            ));
        };
        record.active_writes.journals.insert(
            request.transaction_id.clone(),
            Journal {
                state: JournalState::Open,
                digest,
                staged: request.files.clone(),
                mount_path: owner.path,
                evidence: None,
            },
        );
        Ok(None)
    }

    /// Records the settled outcome and drops the journal.
    fn settle(&self, instance_id: &str, transaction_id: &str, outcome: &ActiveWriteOutcome) {
        let mut st = self.lock();
        if let Ok(record) = st.instance(instance_id) {
            if let Some(j) = record.active_writes.journals.remove(transaction_id) {
                record
                    .active_writes
                    .settled
                    .insert(transaction_id.to_owned(), (j.digest, outcome.clone()));
            }
        }
    }

    /// Steps 4 to 6 under one lock.
    fn dispatch_and_publish(
        &self,
        instance_id: &str,
        transaction_id: &str,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        let mut st = self.lock();
        let record = st.instance(instance_id)?;
        let aw = &mut record.active_writes;
        let Some(journal) = aw.journals.get_mut(transaction_id) else {
            return Ok(ActiveWriteOutcome::RolledBack {
                transaction_id: transaction_id.to_owned(),
                reason: "the open journal was discarded before dispatch".into(),
            });
        };
        journal.state = JournalState::Dispatched;
        // The pause token is recorded before the pause; a pre-existing
        // pause (no token of ours) is neither issued nor resumed.
        let ours = !aw.paused_externally;
        if ours {
            aw.pause_token = Some(transaction_id.to_owned());
        }
        let journal = aw.journals.get_mut(transaction_id).expect("present");
        journal.evidence = Some(record.fs.clone());
        let mut staged = record.fs.clone();
        let published = if self.aw(F::PartialPublish) {
            stage(&mut record.fs, &journal.mount_path, &journal.staged)
        } else {
            stage(&mut staged, &journal.mount_path, &journal.staged).map(|()| {
                record.fs = staged;
            })
        };
        let outcome = match published {
            Ok(()) => {
                // The committed marker before the evidence goes.
                journal.state = JournalState::Committed;
                let paths: Vec<String> = journal.staged.iter().map(|f| f.path.clone()).collect();
                ActiveWriteOutcome::Committed {
                    transaction_id: transaction_id.to_owned(),
                    mount_path: journal.mount_path.clone(),
                    published: paths,
                }
            }
            Err(reason) => ActiveWriteOutcome::RolledBack {
                transaction_id: transaction_id.to_owned(),
                reason,
            },
        };
        journal.evidence = None;
        let digest = journal.digest.clone();
        aw.journals.remove(transaction_id);
        aw.settled
            .insert(transaction_id.to_owned(), (digest, outcome.clone()));
        // Unpause, then clear the token once the unpause settled.
        if self.aw(F::ForeignPauseResumed) {
            aw.paused_externally = false;
        }
        if ours {
            aw.pause_token = None;
        }
        Ok(outcome)
    }
}

fn mount_of(outcome: &ActiveWriteOutcome) -> String {
    match outcome {
        ActiveWriteOutcome::Committed { mount_path, .. } => mount_path.clone(),
        _ => String::new(),
    }
}

#[async_trait]
impl ActiveWriteMember for Inner {
    /// See the module documentation.
    async fn begin_active_write(
        &self,
        transaction: ActiveWriteTransaction,
    ) -> Result<ActiveWriteOutcome, SandboxError> {
        let request = transaction.request();
        if let Some(outcome) = self.open_journal(request)? {
            return Ok(outcome);
        }
        let (instance_id, transaction_id) =
            (request.instance_id.clone(), request.transaction_id.clone());
        if self.aw(F::IndeterminateUndispatched) {
            self.lock()
                .instance(&instance_id)?
                .active_writes
                .journals
                .remove(&transaction_id);
            return Ok(ActiveWriteOutcome::Indeterminate {
                transaction_id,
                reason: "the daemon did not answer".into(),
            });
        }
        if !self.aw(F::MarkerSkipped) {
            if let Err(e) = transaction.mark_dispatched().await {
                if !self.aw(F::AbortIgnored) {
                    let outcome = ActiveWriteOutcome::RolledBack {
                        transaction_id: transaction_id.clone(),
                        reason: format!("the caller aborted the open transaction: {e}"),
                    };
                    self.settle(&instance_id, &transaction_id, &outcome);
                    return Ok(outcome);
                }
            }
        }
        self.dispatch_and_publish(&instance_id, &transaction_id)
    }
}

/// Writes every file under `root`, contained, creating parents.
fn stage(fs: &mut Fs, root: &str, files: &[ActiveWriteFile]) -> Result<(), String> {
    let root_comps = fs
        .physical_root(root)
        .map_err(|_| format!("mount root {root} is not a directory"))?;
    let depth = root_comps.len();
    for f in files {
        let rel = split(&f.path)[depth..].to_vec();
        let mut parent = root_comps.clone();
        for i in 1..rel.len() {
            match fs.walk(root_comps.clone(), rel[..i].to_vec(), true, Some(depth)) {
                Ok((p, None)) => {
                    fs.insert(crate::fs::join(&p), FsNode::Directory);
                    parent = p;
                }
                Ok((p, Some(FsNode::Directory))) => parent = p,
                Ok(_) | Err(_) => {
                    return Err(format!(
                        "{}: a parent is not a directory inside the mount",
                        f.path
                    ))
                }
            }
        }
        parent.push(rel[rel.len() - 1].clone());
        let target = crate::fs::join(&parent);
        if let Some(FsNode::Directory) = fs.get(&target) {
            return Err(format!("{}: is a directory", f.path));
        }
        fs.insert(&target, FsNode::File(f.content_base64.0.clone()));
    }
    Ok(())
}
