//! The live processes of a provider's openProcess: at most one per
//! instance, reserved before the process starts and released when it
//! settles its exit or is destroyed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{ConflictActual, FailureReason, SandboxError};

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
