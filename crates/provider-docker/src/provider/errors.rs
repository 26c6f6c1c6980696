//! Mapping daemon and containment failures onto the contract's closed
//! error vocabulary.

use checkfu_sandbox_contract::*;

use crate::daemon::DaemonError;

pub(super) use checkfu_sandbox_hostfs::errors::{blocking, chain, provider_error};

pub(super) fn daemon_error(operation: Operation, e: &DaemonError) -> SandboxError {
    provider_error(operation, chain(e))
}
