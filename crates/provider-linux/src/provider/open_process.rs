//! openProcess: one live command per instance, with its stdio as streams,
//! opened through [`checkfu_sandbox_hostfs::process::begin`].

use std::process::Stdio;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::process as opening;

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
        let opening = opening::begin(
            &**inner,
            &inner.processes,
            &*inner.clock,
            &request.instance_id,
        )?;
        let spawned = inner
            .command(
                OP,
                &opening.record,
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
        let (reservation, child, evidence) =
            opening.started(PROVIDER_ID, request.executable, spawned)?;
        process::wrap(reservation, child, evidence)
    }
}
