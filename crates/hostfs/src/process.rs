//! The live processes of a provider's openProcess: at most one per
//! instance, reserved before the process starts ([`begin`]) and released
//! when it settles its exit or is destroyed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    Clock, ConflictActual, FailureReason, SandboxError, SandboxProcessEvidence, Timestamp,
};

use crate::host::{load_active, HostInstances, InstanceRecordView};

/// The live processes of a provider: at most one per instance, each held
/// by a [`Reservation`] from before its exec starts until it settles.
#[derive(Debug)]
pub struct ProcessTable {
    /// instance id -> token of the reservation holding it.
    slots: Mutex<HashMap<String, u64>>,
    next_token: AtomicU64,
}

impl Default for ProcessTable {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessTable {
    /// An empty table.
    pub fn new() -> Self {
        ProcessTable {
            slots: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
        }
    }

    /// Reserves the one process slot of `instance_id`.
    ///
    /// # Errors
    ///
    /// `SandboxConflict{expected: "no live process", actual:
    /// "process_already_open"}` when the slot is held;
    /// `SandboxOperationFailed{provider_error}` when the table is poisoned.
    pub fn reserve(self: &Arc<Self>, instance_id: &str) -> Result<Reservation, SandboxError> {
        let mut slots = self.slots.lock().map_err(|_| {
            SandboxError::failed(
                op::OPEN_PROCESS,
                FailureReason::ProviderError,
                "process table poisoned",
            )
        })?;
        if slots.contains_key(instance_id) {
            return Err(SandboxError::conflict(
                op::OPEN_PROCESS,
                "no live process",
                ConflictActual::ProcessAlreadyOpen,
            ));
        }
        let token = self.next_token.fetch_add(1, Ordering::SeqCst);
        slots.insert(instance_id.to_owned(), token);
        Ok(Reservation {
            table: self.clone(),
            instance_id: instance_id.to_owned(),
            token,
        })
    }
}

impl ProcessTable {
    /// Frees `instance_id`'s slot whoever holds it (the instance is being
    /// destroyed, and its process with it).
    pub fn forget(&self, instance_id: &str) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.remove(instance_id);
        }
    }
}

/// One instance's process slot, held until [`Reservation::release`]
/// (idempotent: releasing twice, or after another reservation took the
/// slot, changes nothing).
#[derive(Debug, Clone)]
pub struct Reservation {
    table: Arc<ProcessTable>,
    instance_id: String,
    token: u64,
}

impl Reservation {
    /// Frees the slot if this reservation still holds it.
    pub fn release(&self) {
        if let Ok(mut slots) = self.table.slots.lock() {
            if slots.get(&self.instance_id) == Some(&self.token) {
                slots.remove(&self.instance_id);
            }
        }
    }
}

/// An openProcess past its checks: the active instance's record, its
/// reserved process slot and the process's start time. The provider
/// starts the process, then settles the opening with
/// [`Opening::started`].
#[derive(Debug)]
pub struct Opening<R> {
    /// The active instance's record.
    pub record: R,
    instance_id: String,
    reservation: Reservation,
    started_at: Timestamp,
}

/// Opens a process of instance `instance_id`: loads its record, refuses
/// an instance that is not active, reserves its one process slot in
/// `table` and reads the start time from `clock`.
///
/// # Errors
///
/// As [`load_active`] (operation `openProcess`) and
/// [`ProcessTable::reserve`].
pub fn begin<H: HostInstances>(
    host: &H,
    table: &Arc<ProcessTable>,
    clock: &dyn Clock,
    instance_id: &str,
) -> Result<Opening<H::Record>, SandboxError> {
    let record = load_active(host, op::OPEN_PROCESS, instance_id)?;
    let reservation = table.reserve(instance_id)?;
    Ok(Opening {
        record,
        instance_id: instance_id.to_owned(),
        reservation,
        started_at: clock.now(),
    })
}

impl<R: InstanceRecordView> Opening<R> {
    /// Settles the opening with the provider's attempt to start
    /// `executable`: the reservation, the started process and its evidence
    /// (naming `provider`), or the start's error with the slot released.
    ///
    /// # Errors
    ///
    /// `started`'s error.
    pub fn started<P>(
        self,
        provider: &str,
        executable: String,
        started: Result<P, SandboxError>,
    ) -> Result<(Reservation, P, SandboxProcessEvidence), SandboxError> {
        let process = match started {
            Ok(p) => p,
            Err(e) => {
                self.reservation.release();
                return Err(e);
            }
        };
        let request = self.record.request();
        let evidence = SandboxProcessEvidence {
            provider: provider.to_owned(),
            instance_id: self.instance_id,
            session_id: request.session_id.clone(),
            placement: request.placement,
            tier: request.target,
            network_mode: request.profile.network_policy.mode(),
            executable,
            started_at: self.started_at,
        };
        Ok((self.reservation, process, evidence))
    }
}
