//! openProcess: one live process per instance, opened through
//! [`checkfu_sandbox_hostfs::process::begin`]: a command entered from the
//! host where the instance's route is the host path
//! ([`super::host_exec`]), else a streaming exec through the daemon.

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::command::{spawn_opened, Opened, Program};
use checkfu_sandbox_hostexec::process as hostexec_process;
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
        let host = inner.host_command(OP, &opening.record, Program::of_process(&request));
        if let Some(command) = host.transpose() {
            let spawned = match command {
                Ok(c) => spawn_opened(OP, c.into(), &request.executable).await,
                Err(e) => Err(e),
            };
            let (reservation, opened, evidence) =
                opening.started(PROVIDER_ID, request.executable, spawned)?;
            // A program that could not be executed settles with 126 or 127
            // and the reason on the error stream, as the daemon path does.
            return match opened {
                Opened::Running(child) => hostexec_process::wrap(reservation, child, evidence),
                Opened::Launch { code, message } => Ok(hostexec_process::launch_failed(
                    reservation,
                    code,
                    message,
                    evidence,
                )),
            };
        }
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
