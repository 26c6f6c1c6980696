//! openProcess: one live command per instance, with its stdio as streams,
//! opened through [`checkfu_sandbox_hostfs::process::begin`].

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::process as opening;

use checkfu_sandbox_hostexec::command::{spawn_piped, Program};
use checkfu_sandbox_hostexec::process;

use super::inner::{LinuxProvider, PROVIDER_ID};

#[async_trait]
impl OpenProcessMember for LinuxProvider {
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
        let spawned = match inner.command(OP, &opening.record, Program::of_process(&request)) {
            Ok(command) => spawn_piped(OP, command, &request.executable).await,
            Err(e) => Err(e),
        };
        let (reservation, child, evidence) =
            opening.started(PROVIDER_ID, request.executable, spawned)?;
        process::wrap(reservation, child, evidence)
    }
}
