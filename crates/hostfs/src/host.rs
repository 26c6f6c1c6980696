//! What the shared lifecycle code needs of a host-side provider: its
//! instance records ([`HostInstances`]) and the two fields of a record
//! every shared member reads ([`InstanceRecordView`]).
//!
//! A provider implements [`HostInstances`] once; the contained reads
//! ([`crate::reads`], through [`InstanceHomes`]), the rollbacks
//! ([`crate::rollbacks`]) and openProcess's opening
//! ([`crate::process::begin`]) are written against it.

use async_trait::async_trait;
use checkfu_sandbox_contract::{InstanceState, Operation, SandboxError, SandboxProvisionRequest};

use crate::reads::InstanceHomes;
use crate::store::Layout;

/// The fields of a provider's instance record the shared members read
/// (each provider keeps its own record type; decision 034).
pub trait InstanceRecordView {
    /// The instance's lifecycle state as recorded.
    fn state(&self) -> InstanceState;
    /// The provision (or resume) request the instance was made from.
    fn request(&self) -> &SandboxProvisionRequest;
}

/// A host-side provider's instances: its state directory, its records and
/// the backend steps the shared rollbacks call.
#[async_trait]
pub trait HostInstances: Send + Sync + 'static {
    /// The provider's instance record.
    type Record: InstanceRecordView + Send + Sync;

    /// The provider's state directory.
    fn layout(&self) -> &Layout;

    /// The record of this provider's (and scope's) instance `instance_id`.
    ///
    /// # Errors
    ///
    /// `SandboxInstanceNotFound` for an id this provider does not hold;
    /// `ProviderError` of `operation` for an unreadable record.
    fn load_instance(
        &self,
        operation: Operation,
        instance_id: &str,
    ) -> Result<Self::Record, SandboxError>;

    /// Writes `record` back, atomically.
    ///
    /// # Errors
    ///
    /// `ProviderError` of `operation` when the record cannot be written.
    fn save_instance(
        &self,
        operation: Operation,
        record: &Self::Record,
    ) -> Result<(), SandboxError>;

    /// Removes every trace of instance `instance_id`. Idempotent; an
    /// unknown id succeeds.
    ///
    /// # Errors
    ///
    /// `ProviderError` of `operation` when a trace cannot be removed.
    async fn destroy_instance(
        &self,
        operation: Operation,
        instance_id: &str,
    ) -> Result<(), SandboxError>;

    /// Removes every trace of snapshot `snapshot_id`. Idempotent; an
    /// unknown id succeeds.
    ///
    /// # Errors
    ///
    /// `ProviderError` of `operation` when a trace cannot be removed.
    async fn destroy_snapshot(
        &self,
        operation: Operation,
        snapshot_id: &str,
    ) -> Result<(), SandboxError>;

    /// Undoes what activation started for instance `instance_id` (its
    /// `record`, `None` when the instance is gone) and puts the record back
    /// to `provisioning`; the caller saves it.
    ///
    /// # Errors
    ///
    /// `ProviderError` of `operation` when what activation started cannot
    /// be stopped.
    async fn deactivate(
        &self,
        operation: Operation,
        instance_id: &str,
        record: Option<&mut Self::Record>,
    ) -> Result<(), SandboxError>;
}

impl<H: HostInstances> InstanceHomes for H {
    fn instance_request(
        &self,
        operation: Operation,
        instance_id: &str,
    ) -> Result<SandboxProvisionRequest, SandboxError> {
        self.load_instance(operation, instance_id)
            .map(|rec| rec.request().clone())
    }

    fn layout(&self) -> &Layout {
        HostInstances::layout(self)
    }
}

/// The record of instance `instance_id` when it is `active`.
///
/// # Errors
///
/// As [`HostInstances::load_instance`]; `SandboxConflict{expected:
/// "active", actual: <state>}` for an instance in another state.
pub fn load_active<H: HostInstances>(
    host: &H,
    operation: Operation,
    instance_id: &str,
) -> Result<H::Record, SandboxError> {
    let rec = host.load_instance(operation, instance_id)?;
    match rec.state() {
        InstanceState::Active => Ok(rec),
        state => Err(SandboxError::conflict(operation, "active", state)),
    }
}
