//! Allowlist egress on the provider's side: admission, the plan of one
//! activation, and loading the rules into a started container's namespace
//! ([`crate::egress`] holds the host-side mechanics and the rule set).

use checkfu_sandbox_contract::*;

use super::errors::{daemon_error, provider_error};
use super::inner::Inner;
use crate::daemon;
use crate::egress::{self, EgressPlan, EgressSupport};

impl Inner {
    /// Refuses a network policy this provider does not offer:
    /// `allowlist` without host support names the missing piece.
    pub(super) fn admit_network(&self, policy: &NetworkPolicy) -> Result<(), SandboxError> {
        match (policy.mode(), &self.egress_support) {
            (NetworkMode::None, _) | (NetworkMode::Allowlist, EgressSupport::Enforced { .. }) => {
                Ok(())
            }
            (NetworkMode::Allowlist, EgressSupport::Unavailable(why)) => {
                Err(SandboxError::unavailable(
                    Requirement::NetworkPolicy,
                    format!("allowlist is not offered on this host: {why}"),
                ))
            }
        }
    }

    /// The plan of an allowlist activation (names resolved now), or `None`
    /// for a `none` policy.
    pub(super) async fn egress_plan(
        &self,
        operation: Operation,
        policy: &NetworkPolicy,
    ) -> Result<Option<EgressPlan>, SandboxError> {
        self.admit_network(policy)?;
        match policy {
            NetworkPolicy::None => Ok(None),
            NetworkPolicy::Allowlist { destinations } => egress::plan(&self.egress, destinations)
                .await
                .map(Some)
                .map_err(|m| provider_error(operation, m)),
        }
    }

    /// Loads `plan`'s rules into the namespace of the started container
    /// `cid` and checks that the container still runs with the same init
    /// process afterwards (so the rules are in its namespace, not in one a
    /// reused pid named).
    pub(super) async fn enforce_egress(
        &self,
        operation: Operation,
        cid: &str,
        plan: &EgressPlan,
    ) -> Result<(), SandboxError> {
        let EgressSupport::Enforced { nsenter, nft } = &self.egress_support else {
            return Err(SandboxError::unavailable(
                Requirement::NetworkPolicy,
                "allowlist is not offered on this host",
            ));
        };
        let pid = self.running_pid(operation, cid).await?;
        egress::install(nsenter, nft, pid, &plan.endpoints)
            .await
            .map_err(|m| provider_error(operation, format!("egress rules: {m}")))?;
        let after = self.running_pid(operation, cid).await?;
        if after != pid {
            return Err(provider_error(
                operation,
                format!("egress rules: container {cid} changed init pid from {pid} to {after} while its rules were loaded"),
            ));
        }
        Ok(())
    }

    async fn running_pid(&self, operation: Operation, cid: &str) -> Result<u32, SandboxError> {
        let info = daemon::inspect_container(&self.docker, cid)
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        let state = info.and_then(|i| i.state);
        let running = state.as_ref().and_then(|s| s.running) == Some(true);
        match state
            .and_then(|s| s.pid)
            .and_then(|p| u32::try_from(p).ok())
        {
            Some(pid) if running && pid > 0 => Ok(pid),
            _ => Err(provider_error(
                operation,
                format!("egress rules: container {cid} is not running"),
            )),
        }
    }
}
