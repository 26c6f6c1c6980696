//! execute: one bounded command in the instance, its output counted as it
//! is read, its whole PID namespace killed on timeout or overflow
//! ([`checkfu_sandbox_hostexec::bounded::run`]).

use std::time::Duration;

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostexec::bounded::{self, Bounds};
use checkfu_sandbox_hostexec::command::Program;
use checkfu_sandbox_hostfs::argument_space::{not_started, over_argument_space};
use checkfu_sandbox_hostfs::host::load_active;

use super::inner::Inner;

impl Inner {
    pub(super) async fn execute(
        &self,
        request: ExecuteRequest,
    ) -> Result<SandboxCommandResult, SandboxError> {
        const OP: Operation = op::EXECUTE;
        let rec = load_active(self, OP, &request.instance_id)?;
        let c = request.command;
        let started_at = self.clock.now();
        if let Some(reason) = over_argument_space(&c.executable, &c.arguments, &c.environment) {
            // The kernel would refuse the execve (E2BIG): reported as could
            // not be executed, without starting anything.
            let message = format!("{reason}\n");
            return Ok(not_started(126, message, started_at, self.clock.now()));
        }
        let command = self.command(OP, &rec, Program::of_command(&c))?;
        let bounds = Bounds {
            stdin: c.stdin_base64.map(|b| b.0),
            output_limit_bytes: c.output_limit_bytes,
            timeout: Duration::from_secs(u64::from(c.timeout_seconds)),
        };
        bounded::run(OP, command, &c.executable, bounds, &*self.clock, started_at).await
    }
}
