//! beginActiveWrite's runtime checks beyond the path rules of
//! [`crate::admission`]: the batch bounds, redelivery consistency and the
//! outcome's shape against the dispatch marker (spec "The operations",
//! "beginActiveWrite has an explicit ownership handoff"; decision
//! `027-active-write-journal`).
//!
//! The runtime keeps, per instance, a ledger of the transactions it sent:
//! the batch digest ([`checkfu_sandbox_contract::active_write::batch_digest`]),
//! whether the provider invoked the dispatch marker, and the settled
//! outcome. With it the runtime refuses, before the provider is called, a
//! redelivery whose batch differs, and refuses as a protocol failure:
//!
//! * an outcome naming another transaction, mount or path list;
//! * `committed` or `indeterminate` for a transaction whose marker was
//!   never invoked (nothing can be dispatched without it);
//! * anything but `rolled_back` after the caller aborted at the marker;
//! * a marker naming another transaction;
//! * a redelivery whose settled outcome differs from the first one.
//!
//! A provider error after the marker leaves the transaction
//! `indeterminate` (it is dispatched; redelivery settles it). The provider
//! call runs in the adapter's own task, so a caller that stops observing
//! never interrupts a dispatched transaction halfway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use checkfu_sandbox_contract::active_write::batch_digest;
use checkfu_sandbox_contract::bounds::*;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use crate::admission::{ancestor_conflict, owning_rw_mount};
use crate::checks::Verdicts;
use crate::Adapter;

type Res<T> = Result<T, SandboxFailure>;
const OP: Operation = op::BEGIN_ACTIVE_WRITE;

/// One transaction the runtime sent.
#[derive(Debug, Clone)]
struct Entry {
    digest: String,
    /// The provider invoked the marker in some delivery.
    dispatched: bool,
    /// The first settled (`committed` / `rolled_back`) outcome.
    settled: Option<ActiveWriteOutcome>,
}

/// The runtime's record of beginActiveWrite transactions, per instance;
/// an instance's entries go when it is released or destroyed.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: Mutex<HashMap<String, HashMap<String, Entry>>>,
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets every transaction of `instance_id`.
    pub(crate) fn forget(&self, instance_id: &str) {
        self.lock().remove(instance_id);
    }

    /// Records a delivery; refuses a known transaction with another batch.
    fn deliver(&self, instance_id: &str, transaction_id: &str, digest: String) -> Res<()> {
        let mut all = self.lock();
        let txs = all.entry(instance_id.to_owned()).or_default();
        match txs.get(transaction_id) {
            Some(e) if e.digest != digest => Err(SandboxError::invalid_request(
                OP,
                "transaction_id",
                format!("a redelivery of {transaction_id}'s batch {}", e.digest),
                format!("another batch {digest}"),
            )
            .into()),
            Some(_) => Ok(()),
            None => {
                txs.insert(
                    transaction_id.to_owned(),
                    Entry {
                        digest,
                        dispatched: false,
                        settled: None,
                    },
                );
                Ok(())
            }
        }
    }

    fn with<T>(
        &self,
        instance_id: &str,
        transaction_id: &str,
        f: impl FnOnce(&mut Entry) -> T,
    ) -> Option<T> {
        self.lock()
            .get_mut(instance_id)
            .and_then(|t| t.get_mut(transaction_id))
            .map(f)
    }
}

/// What the provider did with the marker in this delivery.
#[derive(Debug, Default)]
struct Seen {
    invoked: bool,
    aborted: bool,
    /// A marker naming another transaction.
    foreign: Option<String>,
}

/// The marker the provider receives: records the invocation, then asks
/// the caller's marker.
struct RuntimeMarker {
    ledger: Arc<Ledger>,
    instance_id: String,
    transaction_id: String,
    caller: Arc<dyn DispatchMarker>,
    seen: Arc<Mutex<Seen>>,
}

#[async_trait]
impl DispatchMarker for RuntimeMarker {
    async fn dispatch(&self, transaction_id: &str) -> Result<(), SandboxError> {
        if transaction_id != self.transaction_id {
            lock(&self.seen).foreign = Some(transaction_id.to_owned());
            return Err(SandboxError::invalid_request(
                OP,
                "transaction_id",
                self.transaction_id.clone(),
                transaction_id.to_owned(),
            ));
        }
        match self.caller.dispatch(transaction_id).await {
            Ok(()) => {
                lock(&self.seen).invoked = true;
                self.ledger
                    .with(&self.instance_id, &self.transaction_id, |e| {
                        e.dispatched = true
                    });
                Ok(())
            }
            Err(e) => {
                let mut s = lock(&self.seen);
                s.invoked = true;
                s.aborted = true;
                Err(e)
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The batch bounds: at most 1,024 files, each at most 16 MiB, 128 MiB in
/// all.
fn check_bounds(request: &ActiveWriteRequest) -> Res<()> {
    if request.files.len() > MAX_ACTIVE_WRITE_FILES {
        return Err(SandboxError::invalid_request(
            OP,
            "files",
            format!("at most {MAX_ACTIVE_WRITE_FILES}"),
            request.files.len().to_string(),
        )
        .into());
    }
    let mut total: u64 = 0;
    for (i, f) in request.files.iter().enumerate() {
        let len = f.content_base64.len() as u64;
        if len > MAX_FILE_BYTES {
            return Err(SandboxError::SandboxFileTooLarge {
                path: f.path.clone(),
                limit_bytes: MAX_FILE_BYTES,
                actual_bytes: len,
            }
            .into());
        }
        total = total
            .checked_add(len)
            .filter(|t| *t <= MAX_ACTIVE_WRITE_AGGREGATE_BYTES)
            .ok_or_else(|| {
                SandboxError::invalid_request(
                    OP,
                    format!("files[{i}]"),
                    format!("an aggregate of at most {MAX_ACTIVE_WRITE_AGGREGATE_BYTES} bytes"),
                    "more",
                )
            })?;
    }
    Ok(())
}

/// Admits the batch, calls the provider in the adapter's task, checks the
/// outcome.
pub(crate) async fn run(
    adapter: &Adapter,
    member_present: bool,
    mounts: &[SandboxMount],
    request: ActiveWriteRequest,
    caller: Arc<dyn DispatchMarker>,
    hold: impl Send + 'static,
) -> Res<ActiveWriteOutcome> {
    if !member_present {
        return Err(SandboxError::conflict(
            OP,
            "active_mount_write: true",
            ConflictActual::ActiveMountWriteUnsupported,
        )
        .into());
    }
    check_bounds(&request)?;
    let paths: Vec<&str> = request.files.iter().map(|f| f.path.as_str()).collect();
    let mount = owning_rw_mount(&paths, mounts)?;
    if let Some((a, b)) = ancestor_conflict(&paths) {
        return Err(SandboxError::invalid_request(
            OP,
            "files",
            "no path equal to or an ancestor of another",
            format!("{a} and {b}"),
        )
        .into());
    }
    let expected_paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    crate::checks::first_refusal(OP, validate::active_write_request(&request))?;
    let ledger = adapter.active_writes();
    let instance_id = request.instance_id.clone();
    let transaction_id = request.transaction_id.clone();
    ledger.deliver(&instance_id, &transaction_id, batch_digest(&request))?;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let marker = Arc::new(RuntimeMarker {
        ledger: ledger.clone(),
        instance_id: instance_id.clone(),
        transaction_id: transaction_id.clone(),
        caller,
        seen: seen.clone(),
    });
    let provider = adapter.provider_arc();
    let check = Check {
        ledger: ledger.clone(),
        instance_id,
        transaction_id,
        mount_path: mount.path,
        expected_paths,
        seen,
        verdicts: adapter.verdicts(),
    };
    // The provider call and its checks run in the adapter's task: a caller
    // that stops observing after the marker leaves the transaction to
    // settle (and to be recorded for redelivery), never half done.
    // The task also holds the instance's in-flight lifecycle marker
    // (`hold`), so no other lifecycle call starts before it settles.
    let task = adapter.tasks().spawn(async move {
        let _hold = hold;
        let Some(member) = provider.begin_active_write() else {
            return Err(SandboxError::conflict(
                OP,
                "active_mount_write: true",
                ConflictActual::ActiveMountWriteUnsupported,
            )
            .into());
        };
        let result = member
            .begin_active_write(ActiveWriteTransaction::new(request, marker))
            .await;
        check.settle(result)
    });
    match task.await {
        Ok(r) => r,
        Err(join) => Err(SandboxError::failed(
            OP,
            FailureReason::ProviderError,
            format!("the beginActiveWrite task ended abnormally: {join}"),
        )
        .into()),
    }
}

struct Check {
    ledger: Arc<Ledger>,
    instance_id: String,
    transaction_id: String,
    mount_path: String,
    expected_paths: Vec<String>,
    seen: Arc<Mutex<Seen>>,
    verdicts: Verdicts,
}

impl Check {
    fn protocol(
        &self,
        field: &str,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> SandboxFailure {
        SandboxError::protocol(OP, field, expected.into(), actual.into()).into()
    }

    fn settle(self, result: Result<ActiveWriteOutcome, SandboxError>) -> Res<ActiveWriteOutcome> {
        let seen = std::mem::take(&mut *lock(&self.seen));
        if let Some(other) = &seen.foreign {
            return Err(self.protocol(
                "dispatch_marker.transaction_id",
                self.transaction_id.clone(),
                other.clone(),
            ));
        }
        let dispatched_before = self
            .ledger
            .with(&self.instance_id, &self.transaction_id, |e| e.dispatched)
            .unwrap_or(false);
        let outcome = match result {
            Ok(o) => o,
            Err(e) if seen.invoked && !seen.aborted => {
                // Past the marker: the command is the provider's and its
                // end is unknown here.
                let e = self.verdicts.admit(OP, e);
                return Ok(ActiveWriteOutcome::Indeterminate {
                    transaction_id: self.transaction_id.clone(),
                    reason: e.to_string(),
                });
            }
            Err(e) => return Err(self.verdicts.admit(OP, e).into()),
        };
        if outcome.transaction_id() != self.transaction_id {
            return Err(self.protocol(
                "transaction_id",
                self.transaction_id.clone(),
                outcome.transaction_id(),
            ));
        }
        if seen.aborted && !matches!(outcome, ActiveWriteOutcome::RolledBack { .. }) {
            return Err(self.protocol(
                "outcome",
                "rolled_back (the caller aborted at the dispatch marker)",
                outcome.kind(),
            ));
        }
        match &outcome {
            ActiveWriteOutcome::Committed {
                mount_path,
                published,
                ..
            } => {
                if *mount_path != self.mount_path {
                    return Err(self.protocol(
                        "mount_path",
                        self.mount_path.clone(),
                        mount_path.clone(),
                    ));
                }
                if *published != self.expected_paths {
                    return Err(self.protocol(
                        "published",
                        format!("{:?}", self.expected_paths),
                        format!("{published:?}"),
                    ));
                }
                if !dispatched_before {
                    return Err(self.protocol(
                        "dispatch_marker",
                        "invoked before the journal became dispatched",
                        "committed without the dispatch marker",
                    ));
                }
            }
            ActiveWriteOutcome::Indeterminate { .. } => {
                if !dispatched_before {
                    return Err(self.protocol(
                        "dispatch_marker",
                        "invoked before the journal became dispatched",
                        "indeterminate without the dispatch marker",
                    ));
                }
                return Ok(outcome);
            }
            ActiveWriteOutcome::RolledBack { .. } => {}
        }
        let first = self
            .ledger
            .with(&self.instance_id, &self.transaction_id, |e| {
                e.settled.get_or_insert_with(|| outcome.clone()).clone()
            });
        if let Some(first) = first {
            // The same outcome: the same kind, and for `committed` the same
            // mount and paths (a rolled-back reason may be worded anew).
            let same = match (&first, &outcome) {
                (ActiveWriteOutcome::Committed { .. }, _) => first == outcome,
                _ => first.kind() == outcome.kind(),
            };
            if !same {
                return Err(self.protocol(
                    "outcome",
                    format!(
                        "the first outcome of {}: {}",
                        self.transaction_id,
                        excerpt(&format!("{first:?}"))
                    ),
                    excerpt(&format!("{outcome:?}")),
                ));
            }
        }
        Ok(outcome)
    }
}
