//! A deliberate rejected handoff, for conformance: does a provider's
//! rollback compensate exactly its own allocation, idempotently?

use checkfu_sandbox_contract::identity::check_instance;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::Member;
use checkfu_sandbox_contract::{InstanceState, SandboxFailure, SandboxProvisionRequest};

use crate::handoff::acquire;
use crate::Adapter;

/// What a rollback probe observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackProbe {
    /// The instance the provider allocated and the rollback unwound.
    pub instance_id: String,
}

impl Adapter {
    /// Provisions `request`, checks the instance's identity, then refuses
    /// the handoff on purpose: the rollback runs, and runs a second time to
    /// prove it settles the same way after a lost response. The runtime
    /// never records the instance. The provision goes through the handoff
    /// guard (decision 009): a caller dropped mid-probe strands nothing.
    ///
    /// # Errors
    /// Admission and provider errors as for provision;
    /// `instance_identity` mismatches (after the rollback ran);
    /// `SandboxOperationFailed{operation: provision_rollback}` when either
    /// rollback fails or passes its 30 s bound.
    ///
    /// # Cancel safety
    /// Cancel-safe: the probe's provision goes through the handoff guard
    /// (decision 009), so a future dropped mid-probe leaves the allocation
    /// to the guard's rollback, run once; nothing is stranded.
    pub async fn probe_rollback(
        &self,
        request: SandboxProvisionRequest,
    ) -> Result<RollbackProbe, SandboxFailure> {
        self.admit_provision(&request)?;
        // Through the handoff, as every provision: the call runs in its own
        // task and the guard rolls back if this caller is dropped first.
        let (provider, req) = (self.provider_arc(), request.clone());
        let (instance, guard) = acquire(
            self.tasks(),
            Member::Provision,
            async move { provider.provision(req).await },
            self.rollback_bound(),
            self.verdicts(),
            None,
        )
        .await
        .map_err(|e| SandboxFailure::from(self.verdicts().admit(op::PROVISION, e)))?;
        let instance_id = instance.instance_id.clone();
        let problems = check_instance(
            &request,
            InstanceState::Provisioning,
            self.envelope(),
            &instance,
        );
        let [first, second] = guard.unwind_twice().await;
        let mut failure: Option<SandboxFailure> = None;
        for m in problems {
            let e = m.into_error(op::INSTANCE_IDENTITY);
            failure = Some(match failure {
                None => e.into(),
                Some(f) => f.then(e),
            });
        }
        for r in [first, second] {
            if let Err(e) = r {
                failure = Some(match failure {
                    None => e.into(),
                    Some(f) => f.then(e),
                });
            }
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(RollbackProbe { instance_id }),
        }
    }
}

impl Adapter {
    /// Whether the provider offers listProjectDir (the member is present).
    pub fn list_project_dir_offered(&self) -> bool {
        self.provider().list_project_dir().is_some()
    }

    /// Whether the provider offers openProcess (the member is present).
    pub fn open_process_offered(&self) -> bool {
        self.provider().open_process().is_some()
    }

    /// Whether the provider offers a native readFiles (else the runtime
    /// falls back to sequential readFile).
    pub fn read_files_offered(&self) -> bool {
        self.provider().read_files().is_some()
    }
}
