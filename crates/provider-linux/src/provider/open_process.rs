//! openProcess: one live command per instance, with its stdio as streams.

use std::process::Stdio;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    command::{spawn_failure, SpawnFailure},
    errors::provider_error,
    inner::{LinuxProvider, PROVIDER_ID},
};
use crate::process;

#[async_trait]
impl OpenProcessMember for LinuxProvider {
    async fn open_process(
        &self,
        request: SandboxProcessRequest,
    ) -> Result<SandboxProcess, SandboxError> {
        const OP: Operation = op::OPEN_PROCESS;
        let inner = &self.inner;
        let rec = inner.load_instance(OP, &request.instance_id)?;
        if rec.state != InstanceState::Active {
            return Err(SandboxError::conflict(OP, "active", rec.state));
        }
        let reservation = inner.processes.reserve(&rec.instance_id)?;
        let started_at = inner.clock.now();
        let spawned = inner
            .command(
                OP,
                &rec,
                &request.executable,
                &request.arguments,
                &request.environment,
                &request.working_directory,
            )
            .and_then(|mut prepared| {
                prepared
                    .command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| match spawn_failure(OP, &request.executable, &e) {
                        SpawnFailure::Provider(e) => e,
                        SpawnFailure::Launch { message, .. } => {
                            provider_error(OP, message.trim_end().to_owned())
                        }
                    })
            });
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                reservation.release();
                return Err(e);
            }
        };
        let evidence = SandboxProcessEvidence {
            provider: PROVIDER_ID.to_owned(),
            instance_id: rec.instance_id.clone(),
            session_id: rec.request.session_id.clone(),
            placement: rec.request.placement,
            tier: rec.request.target,
            network_mode: rec.request.profile.network_policy.mode(),
            executable: request.executable,
            started_at,
        };
        process::wrap(reservation, child, evidence)
    }
}
