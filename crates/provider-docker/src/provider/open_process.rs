//! openProcess: one live streaming exec per instance.

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;

use super::{
    errors::daemon_error,
    inner::{DockerProvider, Inner, PROVIDER_ID},
};
use crate::daemon;
use crate::process;

#[async_trait]
impl OpenProcessMember for DockerProvider {
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
        let mut argv = Vec::with_capacity(request.arguments.len() + 1);
        argv.push(request.executable.clone());
        argv.extend(request.arguments.iter().cloned());
        let env: Vec<String> = request
            .environment
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let started_at = inner.clock.now();
        let exec = daemon::exec_streaming(
            &inner.docker,
            &Inner::container_of(&rec),
            &argv,
            &env,
            Some(&request.working_directory),
            None,
        )
        .await;
        let exec = match exec {
            Ok(e) => e,
            Err(e) => {
                reservation.release();
                return Err(daemon_error(OP, &e));
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
        Ok(process::wrap(reservation, exec, evidence))
    }
}
