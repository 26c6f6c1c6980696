//! The kernel's argument space as the contract models it
//! ([`bounds::EXEC_ARGUMENT_SPACE_BYTES`]): a command over it is never
//! started and is reported as could not be executed (exit code 126).

use std::collections::BTreeMap;

use checkfu_sandbox_contract::bounds::{self, exec_argument_space};
use checkfu_sandbox_contract::{Bytes, ExitCause, SandboxCommandResult, Timestamp};

/// The reason a command's argv (`executable` then `arguments`) and
/// `environment` are over the kernel's argument space
/// ([`bounds::EXEC_ARGUMENT_SPACE_BYTES`]), or `None` when they fit.
pub fn over_argument_space(
    executable: &str,
    arguments: &[String],
    environment: &BTreeMap<String, String>,
) -> Option<String> {
    let space = exec_argument_space(
        std::iter::once(executable).chain(arguments.iter().map(String::as_str)),
        environment.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    (space > bounds::EXEC_ARGUMENT_SPACE_BYTES).then(|| {
        format!(
            "{executable}: Argument list too long (arguments and environment take {space} bytes, \
over the kernel's {}); not executed",
            bounds::EXEC_ARGUMENT_SPACE_BYTES
        )
    })
}

/// The result of a command that never started: exit `code`, no stdout,
/// `message` as stderr, `finished_at` no earlier than `started_at`.
pub fn not_started(
    code: u8,
    message: String,
    started_at: Timestamp,
    finished_at: Timestamp,
) -> SandboxCommandResult {
    SandboxCommandResult {
        exit: ExitCause::ExitCode(code),
        stdout_base64: Bytes(Vec::new()),
        stderr_base64: Bytes(message.into_bytes()),
        started_at,
        finished_at: finished_at.max(started_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_over_the_argument_space_is_refused_by_name() {
        let big = vec!["a".repeat(64_000); 33];
        let reason = over_argument_space("true", &big, &BTreeMap::new()).expect("over");
        assert!(
            reason.starts_with("true: Argument list too long"),
            "{reason}"
        );
        assert!(over_argument_space("true", &big[..32], &BTreeMap::new()).is_none());
        let env = BTreeMap::from([("K".to_owned(), "v".repeat(2_200_000))]);
        assert!(over_argument_space("true", &[], &env).is_some());
    }
}
