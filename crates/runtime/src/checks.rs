//! Bounds and shape checks on requests before a call and on results after
//! it (spec "Bounds"; DESIGN D9). Arithmetic on budgets is checked.

use checkfu_sandbox_contract::identity::Mismatch;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::results;
use checkfu_sandbox_contract::validate;
use checkfu_sandbox_contract::Operation;
use checkfu_sandbox_contract::{
    ReadFileOutcome, ReadFilesEntry, SandboxCommand, SandboxError, SandboxFailure,
    SandboxProcessRequest, SandboxProfile,
};

type Res<T> = Result<T, SandboxFailure>;

/// Whose `SandboxProtocolInvalid` a provider's errors may carry.
///
/// A provider in process never judges the protocol: a runtime-only tag it
/// returns is itself a protocol failure naming `_tag`. A transport in
/// front of a provider in another process (the wire client, whose
/// [`SandboxProvider::transport_verdicts`] is true) returns the Runner
/// side's own verdicts on the bytes that crossed it (`field: "line"`,
/// `"error"`, a `decode_*` operation): those pass through unchanged, so
/// the field PROTOCOL.md names is the field the caller sees.
///
/// [`SandboxProvider::transport_verdicts`]: checkfu_sandbox_contract::SandboxProvider::transport_verdicts
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdicts {
    /// Only the closed adapter vocabulary (a provider in process).
    ProviderOnly,
    /// The adapter vocabulary plus the transport's own
    /// `SandboxProtocolInvalid` (a wire client).
    WithTransport,
}

impl Verdicts {
    /// What `provider` declares.
    pub(crate) fn of(provider: &dyn checkfu_sandbox_contract::SandboxProvider) -> Self {
        if provider.transport_verdicts() {
            Verdicts::WithTransport
        } else {
            Verdicts::ProviderOnly
        }
    }

    /// A provider's error, if it is in the vocabulary these verdicts
    /// admit; any other runtime-only tag is a protocol failure naming
    /// `_tag`. Applied to every error a provider hands back: results,
    /// rollbacks and process control alike.
    pub(crate) fn admit(self, operation: Operation, e: SandboxError) -> SandboxError {
        // A decode failure from a wire transport in front of the provider
        // (operation `decode_*`) is the runtime side's own verdict: keep it.
        let transport_verdict = matches!(
            &e,
            SandboxError::SandboxProtocolInvalid { operation, .. }
                if operation.is_decode() || self == Verdicts::WithTransport
        );
        if e.is_runtime_only() && !transport_verdict {
            SandboxError::protocol(
                operation,
                "_tag",
                "one of the eight adapter error tags",
                e.tag(),
            )
        } else {
            e
        }
    }
}

/// The first violation in `found`, as `invalid_request` under `operation`:
/// the last gate before a request reaches the provider, so the runtime
/// refuses every request the author kit's `validate:` vectors refuse.
pub(crate) fn first_refusal(operation: Operation, found: Vec<Mismatch>) -> Res<()> {
    match found.into_iter().next() {
        None => Ok(()),
        Some(m) => Err(validate::invalid_request(operation, m).into()),
    }
}

/// execute's request bounds (the contract's validator, shared with the
/// author kit's `validate:` vectors).
pub(crate) fn command(c: &SandboxCommand, max_duration_seconds: u32) -> Res<()> {
    first_refusal(op::EXECUTE, validate::command(c, max_duration_seconds))
}

/// openProcess's request bounds.
pub(crate) fn process_request(r: &SandboxProcessRequest) -> Res<()> {
    first_refusal(op::OPEN_PROCESS, validate::process_request(r))
}

/// A profile's own shape.
pub(crate) fn profile(operation: Operation, p: &SandboxProfile) -> Res<()> {
    if p.max_duration_seconds == 0 {
        return Err(SandboxError::invalid_request(
            operation,
            "profile.max_duration_seconds",
            "at least 1",
            "0",
        )
        .into());
    }
    if p.profile_id.is_empty() {
        return Err(SandboxError::invalid_request(
            operation,
            "profile.profile_id",
            "a non-empty id",
            "\"\"",
        )
        .into());
    }
    Ok(())
}

/// A readFiles group's result (the contract's
/// [`results::read_files_result`]): the closed union, one per member, in
/// order, each within its member's budget and the group's aggregate.
pub(crate) fn read_files_result(
    group: &[ReadFilesEntry],
    aggregate: u64,
    got: &[ReadFileOutcome],
) -> Res<()> {
    protocol(
        op::READ_FILES,
        results::read_files_result(group, aggregate, got),
    )
}

/// A refusal of a provider's result: the first violation, as
/// `SandboxProtocolInvalid` naming `operation`.
pub(crate) fn protocol(operation: Operation, found: Option<Mismatch>) -> Res<()> {
    match found {
        None => Ok(()),
        Some(m) => Err(m.into_error(operation).into()),
    }
}
