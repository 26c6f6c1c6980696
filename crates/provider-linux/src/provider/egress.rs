//! Allowlist instances: the steps of [`crate::network`] at the points of an
//! instance's life where they belong (before its init starts, after it
//! started, when it stops, at cleanup).

use std::net::Ipv4Addr;

use checkfu_sandbox_contract::*;

use super::{
    errors::{blocking, provider_error},
    inner::{Inner, LinuxProvider},
};
use crate::network::{self, EgressPlan, EgressSupport, Plumbing};
use crate::store::{InstanceRecord, RootLayout, RootMode};

impl Inner {
    /// The scope's plumbing, when this host supports allowlists.
    pub(super) fn plumbing(&self) -> Option<Plumbing> {
        Plumbing::new(
            &EgressSupport::probe_cached(),
            &self.scope,
            self.layout.root(),
            &self.layout.instances(),
        )
    }

    /// For an allowlist instance: resolves its destinations and pins them
    /// in `/etc/hosts` of its writable layer. `None` for network `none`.
    pub(super) async fn egress_prepare(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<Option<EgressPlan>, SandboxError> {
        let NetworkPolicy::Allowlist { destinations } = &rec.request.profile.network_policy else {
            return Ok(None);
        };
        if self.plumbing().is_none() {
            return Err(SandboxError::unavailable(
                Requirement::NetworkPolicy,
                "network mode allowlist is not offered on this host",
            ));
        }
        let destinations = destinations.clone();
        let layer = match rec.root_mode {
            RootMode::Overlay => self.layout.upper_dir(&rec.instance_id),
            RootMode::Copy => self.layout.root_dir(&rec.instance_id),
        };
        let plan = blocking(operation, move || {
            let plan = network::plan(&destinations)?;
            network::write_hosts(&layer, &plan)?;
            Ok::<_, String>(plan)
        })
        .await?
        .map_err(|m| provider_error(operation, m))?;
        Ok(Some(plan))
    }

    /// Connects the started init `pid` of `rec` to the scope's bridge and
    /// loads its rules; the instance must not be handed out on failure.
    pub(super) async fn egress_attach(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
        pid: i32,
        plan: EgressPlan,
    ) -> Result<(), SandboxError> {
        let plumbing = self.plumbing().ok_or_else(|| {
            provider_error(operation, "allowlist support vanished during activation")
        })?;
        let id = rec.instance_id.clone();
        blocking(operation, move || plumbing.attach(&id, pid, &plan))
            .await?
            .map_err(|m| provider_error(operation, format!("allowlist egress: {m}")))
    }

    /// Returns an allowlist instance's address and host end (and the
    /// bridge, when it was the last). Nothing for network `none`.
    pub(super) async fn egress_detach(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        if rec.request.profile.network_policy.mode() != NetworkMode::Allowlist {
            return Ok(());
        }
        let Some(plumbing) = self.plumbing() else {
            return Ok(());
        };
        let id = rec.instance_id.clone();
        blocking(operation, move || plumbing.detach(&id))
            .await?
            .map_err(|m| provider_error(operation, format!("removing allowlist plumbing: {m}")))
    }

    /// Cleanup's part: host ends of gone instances, stale leases, an unused
    /// bridge. One line per object that could not be removed.
    pub(super) async fn egress_sweep(&self) -> Vec<String> {
        let Some(plumbing) = self.plumbing() else {
            return Vec::new();
        };
        blocking(checkfu_sandbox_contract::provider::op::CLEANUP, move || {
            plumbing.sweep()
        })
        .await
        .unwrap_or_else(|e| vec![e.to_string()])
    }
}

impl LinuxProvider {
    /// Whether this host lets the provider enforce allowlists (probed once
    /// per process); the envelope offers `allowlist` only when it does.
    pub fn egress_support(&self) -> EgressSupport {
        EgressSupport::probe_cached()
    }

    /// Creates the scope's bridge unless it exists and returns its gateway
    /// address, the host's address on the bridge: a listener bound there
    /// is reachable from an allowlist instance that lists it. The bridge
    /// is removed when the scope's last allowlist instance goes, and by
    /// cleanup.
    ///
    /// # Errors
    /// `SandboxUnavailable{network_policy}` without allowlist support;
    /// `SandboxOperationFailed{provider_error}` naming the failing step.
    pub async fn egress_gateway(&self) -> Result<Ipv4Addr, SandboxError> {
        const OP: Operation = checkfu_sandbox_contract::provider::op::ACTIVATE;
        let plumbing = self.inner.plumbing().ok_or_else(|| {
            SandboxError::unavailable(
                Requirement::NetworkPolicy,
                "network mode allowlist is not offered on this host",
            )
        })?;
        blocking(OP, move || plumbing.ensure_bridge())
            .await?
            .map_err(|m| provider_error(OP, m))
    }

    /// The allowlist table loaded in an active instance's network
    /// namespace (`nft list table`), for checks and tests.
    ///
    /// # Errors
    /// `SandboxInstanceNotFound` for an unknown or inactive instance;
    /// `SandboxOperationFailed{provider_error}` when it cannot be listed.
    pub async fn egress_rules(&self, instance_id: &str) -> Result<String, SandboxError> {
        const OP: Operation = checkfu_sandbox_contract::provider::op::EXECUTE;
        let pid =
            self.init_pid(instance_id)
                .ok_or_else(|| SandboxError::SandboxInstanceNotFound {
                    instance_id: instance_id.to_owned(),
                })?;
        let plumbing = self
            .inner
            .plumbing()
            .ok_or_else(|| provider_error(OP, "no allowlist support on this host"))?;
        blocking(OP, move || plumbing.list_rules(pid))
            .await?
            .map_err(|m| provider_error(OP, m))
    }

    /// The links of this scope on the host (its bridge and host-end
    /// veths), by name: empty once everything is released and swept.
    ///
    /// # Errors
    /// A line when the host's links cannot be listed.
    pub async fn egress_links(&self) -> Result<Vec<String>, String> {
        let Some(plumbing) = self.inner.plumbing() else {
            return Ok(Vec::new());
        };
        tokio::task::spawn_blocking(move || plumbing.scope_links())
            .await
            .map_err(|e| e.to_string())?
    }
}
