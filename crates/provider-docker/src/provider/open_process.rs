//! openProcess: one live streaming exec per instance, opened through
//! [`checkfu_sandbox_hostfs::process::begin`].

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::process as opening;

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
        let opening = opening::begin(
            &**inner,
            &inner.processes,
            &*inner.clock,
            &request.instance_id,
        )?;
        let mut argv = Vec::with_capacity(request.arguments.len() + 1);
        argv.push(request.executable.clone());
        argv.extend(request.arguments.iter().cloned());
        let env: Vec<String> = request
            .environment
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let exec = daemon::exec_streaming(
            &inner.docker,
            &Inner::container_of(&opening.record),
            &argv,
            &env,
            Some(&request.working_directory),
            None,
        )
        .await
        .map_err(|e| daemon_error(OP, &e));
        let (reservation, exec, evidence) =
            opening.started(PROVIDER_ID, request.executable, exec)?;
        Ok(process::wrap(reservation, exec, evidence))
    }
}
