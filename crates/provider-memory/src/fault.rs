//! The registry of named faults (issue "Memory oracle"; DESIGN D17).
//!
//! Each [`Fault`] makes the oracle break exactly one rule of the contract
//! that a real provider could break, so the runtime's checks and the
//! conformance cases can be proven to catch it. Faults are fixed at
//! construction ([`crate::MemoryProviderBuilder::fault`]); an honest oracle
//! has none.
//!
//! Names are kebab-case and stable: the CLI lists them with
//! `checkfu sandbox faults` and tests select them by name
//! ([`Fault::from_name`]).

use std::fmt;

/// One of the 21 instance identity checks (spec "Identity is cross-checked,
/// not trusted"; DESIGN D7), in the spec's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IdentityField {
    /// `provider`.
    Provider,
    /// `placement`.
    Placement,
    /// `state`.
    State,
    /// `workspace_id`.
    WorkspaceId,
    /// `session_id`.
    SessionId,
    /// `run_id`.
    RunId,
    /// `attempt_id`.
    AttemptId,
    /// `lease_id`.
    LeaseId,
    /// `lease_epoch`.
    LeaseEpoch,
    /// `target`.
    Target,
    /// `profile`.
    Profile,
    /// `platform`.
    Platform,
    /// `root_image`.
    RootImage,
    /// `mounts`.
    Mounts,
    /// `output_path`.
    OutputPath,
    /// `expires_at`.
    ExpiresAt,
    /// `materialization.profile_digest`.
    MaterializationProfileDigest,
    /// `materialization.image_reference`.
    MaterializationImageReference,
    /// `materialization.image_digest`.
    MaterializationImageDigest,
    /// `materialization.provider_revision`.
    MaterializationProviderRevision,
    /// `materialization.materialization_revision`.
    MaterializationMaterializationRevision,
}

impl IdentityField {
    /// All 21 fields in the spec's order.
    pub const ALL: [IdentityField; 21] = [
        IdentityField::Provider,
        IdentityField::Placement,
        IdentityField::State,
        IdentityField::WorkspaceId,
        IdentityField::SessionId,
        IdentityField::RunId,
        IdentityField::AttemptId,
        IdentityField::LeaseId,
        IdentityField::LeaseEpoch,
        IdentityField::Target,
        IdentityField::Profile,
        IdentityField::Platform,
        IdentityField::RootImage,
        IdentityField::Mounts,
        IdentityField::OutputPath,
        IdentityField::ExpiresAt,
        IdentityField::MaterializationProfileDigest,
        IdentityField::MaterializationImageReference,
        IdentityField::MaterializationImageDigest,
        IdentityField::MaterializationProviderRevision,
        IdentityField::MaterializationMaterializationRevision,
    ];

    /// The field path as the contract's identity check names it (for
    /// example `materialization.image_digest`).
    pub fn field_path(&self) -> &'static str {
        match self {
            IdentityField::Provider => "provider",
            IdentityField::Placement => "placement",
            IdentityField::State => "state",
            IdentityField::WorkspaceId => "workspace_id",
            IdentityField::SessionId => "session_id",
            IdentityField::RunId => "run_id",
            IdentityField::AttemptId => "attempt_id",
            IdentityField::LeaseId => "lease_id",
            IdentityField::LeaseEpoch => "lease_epoch",
            IdentityField::Target => "target",
            IdentityField::Profile => "profile",
            IdentityField::Platform => "platform",
            IdentityField::RootImage => "root_image",
            IdentityField::Mounts => "mounts",
            IdentityField::OutputPath => "output_path",
            IdentityField::ExpiresAt => "expires_at",
            IdentityField::MaterializationProfileDigest => "materialization.profile_digest",
            IdentityField::MaterializationImageReference => "materialization.image_reference",
            IdentityField::MaterializationImageDigest => "materialization.image_digest",
            IdentityField::MaterializationProviderRevision => "materialization.provider_revision",
            IdentityField::MaterializationMaterializationRevision => {
                "materialization.materialization_revision"
            }
        }
    }

    /// The kebab-case fault name, `identity-` followed by the field path with
    /// `.` and `_` turned into `-` (for example
    /// `identity-materialization-image-digest`).
    pub fn fault_name(&self) -> String {
        format!("identity-{}", self.field_path().replace(['.', '_'], "-"))
    }
}

/// A named fault: the oracle breaks exactly one rule while it is configured.
///
/// Every fault acts on the members' return values or effects as the runtime
/// observes them, except [`Fault::ExitTwoCauses`] and [`Fault::ExitNoCause`]:
/// the contract's [`checkfu_sandbox_contract::ExitCause`] makes both
/// unrepresentable in Rust, so they act only on the wire form produced by
/// [`crate::MemoryProvider::command_result_wire`] /
/// [`crate::MemoryProvider::execute_wire`], which a caller decodes with the
/// contract's wire codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Every returned instance (provision, activate, resume) misreports one
    /// identity field.
    Identity(IdentityField),
    /// A snapshot carries the platform's deadline instead of the requested
    /// `expires_at`.
    SnapshotExpiryReplaced,
    /// A snapshot names a different source instance.
    SnapshotSourceMismatch,
    /// A clone reports the source's snapshot id.
    CloneReusesSourceId,
    /// A clone moves the expiry one hour later.
    CloneMovesExpiry,
    /// A clone reports a `created_at` before the source's.
    ClonePredatesSource,
    /// execute's wire settlement carries two exit causes.
    ExitTwoCauses,
    /// execute's wire settlement carries no exit cause.
    ExitNoCause,
    /// execute returns more bytes than `output_limit_bytes` instead of
    /// failing.
    OutputOverLimit,
    /// Contained reads compare path text only and follow symlinks out of the
    /// root.
    TextualContainment,
    /// listProjectDir drops special files.
    ListProjectDirDropsSpecial,
    /// listProjectDir reports `complete: false`.
    ListProjectDirIncomplete,
    /// cleanup sweeps pinned snapshots at the orphan cutoff.
    CleanupIgnoresPin,
    /// cleanup keeps a pinned snapshot past its own expiry.
    CleanupKeepsExpiredPin,
    /// release on a ZDR instance returns `released` with a snapshot.
    ReleasedOnZdr,
    /// release on a durable instance returns `destroyed`.
    DestroyedOnDurable,
    /// Rollbacks derive their target from the returned value.
    RollbackDerivesFromValue,
    /// A second rollback call fails.
    RollbackNotIdempotent,
    /// Rollbacks never settle.
    RollbackHangs,
    /// A `none` network profile reaches external listeners.
    NetworkNoneReachesListener,
    /// An allowlist profile reaches listeners that are not allowlisted.
    AllowlistIgnored,
    /// openProcess allows a second live process per instance.
    SecondOpenProcessAllowed,
    /// The process never observes end of file on its standard input.
    StdinEofNeverDelivered,
    /// Process evidence names a different instance.
    ProcessEvidenceMismatch,
    /// The envelope declares `list_dir: true` but the member is absent.
    ListDirMemberAbsent,
    /// readFiles returns its outcomes in reverse order.
    ReadFilesOutOfOrder,
    /// readFiles returns whole files over the members' budgets.
    ReadFilesOverBudget,
    /// execute reports `finished_at` before `started_at`.
    NonMonotonicInterval,
    /// Read-only mounts stay writable after activation.
    SealIgnored,
    /// Process evidence reports a start at the instance's hard expiry.
    ProcessStartsAtExpiry,
    /// Once an instance is active, the envelope starts claiming CPU
    /// enforcement it did not claim at registration.
    EnvelopeDrifts,
    /// beginActiveWrite breaks one rule of its ownership handoff.
    ActiveWrite(ActiveWriteFault),
}

/// The beginActiveWrite faults (spec "beginActiveWrite has an explicit
/// ownership handoff").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActiveWriteFault {
    /// Publishes without invoking the dispatch marker.
    MarkerSkipped,
    /// Publishes although the caller aborted at the dispatch marker.
    AbortIgnored,
    /// A redelivery of a committed transaction answers `rolled_back`.
    RedeliveryDiffers,
    /// A redelivery of a committed transaction publishes the batch again
    /// over the workload's later changes.
    RedeliveryReapplied,
    /// A batch that fails mid-publication answers `rolled_back` but leaves
    /// the files written before the failure.
    PartialPublish,
    /// The outcome names the shallowest mount owning the targets.
    ShallowMount,
    /// A pause that existed before the transaction is resumed afterwards.
    ForeignPauseResumed,
    /// The journal keeps bodies on (simulated) durable host storage and
    /// still accepts `ephemeral_zdr` transactions.
    ZdrBodyAccepted,
    /// Answers `indeterminate` for a transaction it never dispatched.
    IndeterminateUndispatched,
}

impl ActiveWriteFault {
    /// Every beginActiveWrite fault.
    pub const ALL: [ActiveWriteFault; 9] = [
        ActiveWriteFault::MarkerSkipped,
        ActiveWriteFault::AbortIgnored,
        ActiveWriteFault::RedeliveryDiffers,
        ActiveWriteFault::RedeliveryReapplied,
        ActiveWriteFault::PartialPublish,
        ActiveWriteFault::ShallowMount,
        ActiveWriteFault::ForeignPauseResumed,
        ActiveWriteFault::ZdrBodyAccepted,
        ActiveWriteFault::IndeterminateUndispatched,
    ];

    fn name(&self) -> &'static str {
        match self {
            ActiveWriteFault::MarkerSkipped => "active-write-marker-skipped",
            ActiveWriteFault::AbortIgnored => "active-write-abort-ignored",
            ActiveWriteFault::RedeliveryDiffers => "active-write-redelivery-differs",
            ActiveWriteFault::RedeliveryReapplied => "active-write-redelivery-reapplied",
            ActiveWriteFault::PartialPublish => "active-write-partial-publish",
            ActiveWriteFault::ShallowMount => "active-write-shallow-mount",
            ActiveWriteFault::ForeignPauseResumed => "active-write-foreign-pause-resumed",
            ActiveWriteFault::ZdrBodyAccepted => "active-write-zdr-body-accepted",
            ActiveWriteFault::IndeterminateUndispatched => {
                "active-write-indeterminate-undispatched"
            }
        }
    }

    fn rule(&self) -> &'static str {
        match self {
            ActiveWriteFault::MarkerSkipped => {
                "a transaction invokes its dispatch marker immediately before it is dispatched"
            }
            ActiveWriteFault::AbortIgnored => {
                "a transaction its caller aborted while open publishes nothing"
            }
            ActiveWriteFault::RedeliveryDiffers => {
                "a redelivery with the same transaction_id and batch gets the same outcome"
            }
            ActiveWriteFault::RedeliveryReapplied => {
                "a redelivered committed transaction is not published again"
            }
            ActiveWriteFault::PartialPublish => {
                "a rolled-back transaction leaves every file old, never mixed"
            }
            ActiveWriteFault::ShallowMount => {
                "a transaction resolves the deepest mount that owns every target"
            }
            ActiveWriteFault::ForeignPauseResumed => {
                "a pre-existing pause is never resumed without the provider's own pause token"
            }
            ActiveWriteFault::ZdrBodyAccepted => {
                "a journal that would put bodies on durable host storage refuses ephemeral_zdr"
            }
            ActiveWriteFault::IndeterminateUndispatched => {
                "indeterminate only after the dispatch marker"
            }
        }
    }
}

impl Fault {
    /// Every fault, identity faults first, in a stable order.
    pub fn all() -> Vec<Fault> {
        let mut out: Vec<Fault> = IdentityField::ALL
            .iter()
            .map(|f| Fault::Identity(*f))
            .collect();
        out.extend([
            Fault::SnapshotExpiryReplaced,
            Fault::SnapshotSourceMismatch,
            Fault::CloneReusesSourceId,
            Fault::CloneMovesExpiry,
            Fault::ClonePredatesSource,
            Fault::ExitTwoCauses,
            Fault::ExitNoCause,
            Fault::OutputOverLimit,
            Fault::TextualContainment,
            Fault::ListProjectDirDropsSpecial,
            Fault::ListProjectDirIncomplete,
            Fault::CleanupIgnoresPin,
            Fault::CleanupKeepsExpiredPin,
            Fault::ReleasedOnZdr,
            Fault::DestroyedOnDurable,
            Fault::RollbackDerivesFromValue,
            Fault::RollbackNotIdempotent,
            Fault::RollbackHangs,
            Fault::NetworkNoneReachesListener,
            Fault::AllowlistIgnored,
            Fault::SecondOpenProcessAllowed,
            Fault::StdinEofNeverDelivered,
            Fault::ProcessEvidenceMismatch,
            Fault::ListDirMemberAbsent,
            Fault::ReadFilesOutOfOrder,
            Fault::ReadFilesOverBudget,
            Fault::NonMonotonicInterval,
            Fault::SealIgnored,
            Fault::ProcessStartsAtExpiry,
            Fault::EnvelopeDrifts,
        ]);
        out.extend(ActiveWriteFault::ALL.map(Fault::ActiveWrite));
        out
    }

    /// The stable kebab-case name.
    pub fn name(&self) -> String {
        let fixed = match self {
            Fault::Identity(field) => return field.fault_name(),
            Fault::SnapshotExpiryReplaced => "snapshot-expiry-replaced",
            Fault::SnapshotSourceMismatch => "snapshot-source-mismatch",
            Fault::CloneReusesSourceId => "clone-reuses-source-id",
            Fault::CloneMovesExpiry => "clone-moves-expiry",
            Fault::ClonePredatesSource => "clone-predates-source",
            Fault::ExitTwoCauses => "exit-two-causes",
            Fault::ExitNoCause => "exit-no-cause",
            Fault::OutputOverLimit => "output-over-limit",
            Fault::TextualContainment => "textual-containment",
            Fault::ListProjectDirDropsSpecial => "list-project-dir-drops-special",
            Fault::ListProjectDirIncomplete => "list-project-dir-incomplete",
            Fault::CleanupIgnoresPin => "cleanup-ignores-pin",
            Fault::CleanupKeepsExpiredPin => "cleanup-keeps-expired-pin",
            Fault::ReleasedOnZdr => "released-on-zdr",
            Fault::DestroyedOnDurable => "destroyed-on-durable",
            Fault::RollbackDerivesFromValue => "rollback-derives-from-value",
            Fault::RollbackNotIdempotent => "rollback-not-idempotent",
            Fault::RollbackHangs => "rollback-hangs",
            Fault::NetworkNoneReachesListener => "network-none-reaches-listener",
            Fault::AllowlistIgnored => "allowlist-ignored",
            Fault::SecondOpenProcessAllowed => "second-open-process-allowed",
            Fault::StdinEofNeverDelivered => "stdin-eof-never-delivered",
            Fault::ProcessEvidenceMismatch => "process-evidence-mismatch",
            Fault::ListDirMemberAbsent => "list-dir-member-absent",
            Fault::ReadFilesOutOfOrder => "read-files-out-of-order",
            Fault::ReadFilesOverBudget => "read-files-over-budget",
            Fault::NonMonotonicInterval => "non-monotonic-interval",
            Fault::SealIgnored => "seal-ignored",
            Fault::ProcessStartsAtExpiry => "process-starts-at-expiry",
            Fault::EnvelopeDrifts => "envelope-drifts",
            Fault::ActiveWrite(f) => f.name(),
        };
        fixed.to_string()
    }

    /// One line: the rule this fault breaks.
    pub fn rule(&self) -> String {
        let fixed = match self {
            Fault::Identity(field) => {
                return format!(
                    "a returned instance echoes the request's {} byte-exactly",
                    field.field_path()
                )
            }
            Fault::SnapshotExpiryReplaced => {
                "a snapshot carries exactly the expires_at the request supplied"
            }
            Fault::SnapshotSourceMismatch => {
                "a snapshot names the instance it was captured from as source_instance_id"
            }
            Fault::CloneReusesSourceId => "a clone uses a snapshot_id different from its source's",
            Fault::CloneMovesExpiry => "a clone keeps the source's expires_at byte-identical",
            Fault::ClonePredatesSource => "a clone's created_at is at or after the source's",
            Fault::ExitTwoCauses => "a command settles with exactly one exit cause (not two)",
            Fault::ExitNoCause => "a command settles with exactly one exit cause (not none)",
            Fault::OutputOverLimit => {
                "a stream over output_limit_bytes ends the command with SandboxOutputLimitExceeded"
            }
            Fault::TextualContainment => {
                "reads are physically contained: a symlink out of allowed_root is outside_root"
            }
            Fault::ListProjectDirDropsSpecial => {
                "listProjectDir names every leaf, special files included"
            }
            Fault::ListProjectDirIncomplete => "listProjectDir reports complete: true",
            Fault::CleanupIgnoresPin => {
                "a pinned snapshot is exempt from the orphan cutoff until its own expiry"
            }
            Fault::CleanupKeepsExpiredPin => {
                "retention expiry wins over a pin: an expired pinned snapshot is swept"
            }
            Fault::ReleasedOnZdr => "release of a ZDR instance settles destroyed, leaving no trace",
            Fault::DestroyedOnDurable => "release of a durable instance settles a snapshot",
            Fault::RollbackDerivesFromValue => {
                "a rollback derives its authority from the provider's own record, not the value"
            }
            Fault::RollbackNotIdempotent => "a rollback called again settles the same way",
            Fault::RollbackHangs => "a rollback settles within its 30 second bound",
            Fault::NetworkNoneReachesListener => {
                "a none network profile reaches no destination outside the sandbox"
            }
            Fault::AllowlistIgnored => {
                "an allowlist profile reaches only its declared destinations"
            }
            Fault::SecondOpenProcessAllowed => {
                "at most one live process per instance; a second is process_already_open"
            }
            Fault::StdinEofNeverDelivered => {
                "a half-close of the process input is observed by the child as end of file"
            }
            Fault::ProcessEvidenceMismatch => {
                "process evidence agrees with the instance it runs in"
            }
            Fault::ListDirMemberAbsent => "an envelope declaring list_dir: true offers listDir",
            Fault::ReadFilesOutOfOrder => "readFiles returns one outcome per member, in order",
            Fault::ReadFilesOverBudget => {
                "readFiles stays within each member's maximum_bytes and the aggregate budget"
            }
            Fault::NonMonotonicInterval => "a command's finished_at is not before its started_at",
            Fault::SealIgnored => "read-only mounts are sealed at activation",
            Fault::ProcessStartsAtExpiry => {
                "a process starts strictly before its instance's expires_at"
            }
            Fault::EnvelopeDrifts => {
                "the capability envelope is unchanging for the revision, in every field"
            }
            Fault::ActiveWrite(f) => f.rule(),
        };
        fixed.to_string()
    }

    /// The fault named `name`, if any.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::all().into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Every fault as `(name, rule)`, in [`Fault::all`] order (for the CLI's
/// `checkfu sandbox faults`).
pub fn faults() -> Vec<(String, String)> {
    Fault::all()
        .into_iter()
        .map(|f| (f.name(), f.rule()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_kebab_and_round_trip() {
        let all = Fault::all();
        assert!(all.len() >= 40, "{}", all.len());
        let names: BTreeSet<String> = all.iter().map(Fault::name).collect();
        assert_eq!(names.len(), all.len());
        for f in all {
            let n = f.name();
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
            assert_eq!(Fault::from_name(&n), Some(f));
            assert!(!f.rule().is_empty() && !f.rule().contains('\n'));
        }
        assert_eq!(
            Fault::Identity(IdentityField::MaterializationImageDigest).name(),
            "identity-materialization-image-digest"
        );
        assert_eq!(Fault::from_name("no-such-fault"), None);
        assert_eq!(faults().len(), Fault::all().len());
    }
}
