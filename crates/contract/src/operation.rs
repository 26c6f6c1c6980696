//! The closed vocabulary of `operation` fields in errors (spec "Errors";
//! DESIGN D4): [`Operation`], built from the members ([`Member`]), the
//! decoded wire types ([`WireType`]) and the process steps
//! ([`ProcessStep`]); and the closed `actual` of a lifecycle conflict
//! ([`ConflictActual`]).
//!
//! Every value has one snake_case wire string; an unknown string is a
//! decode error. The sets are append-only, like every closed enum of the
//! contract.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `as_str` (the snake_case name strum derives) and `Display` for closed
/// name enums.
macro_rules! snake_names {
    ($($ty:ty),* $(,)?) => {$(
        impl $ty {
            /// The snake_case name, as the wire spells it.
            pub fn as_str(&self) -> &'static str {
                self.into()
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

snake_names!(Member, WireType, ProcessStep, ConflictActual);

/// A member of the provider contract (the eighteen of the spec plus the
/// `resolveImage` and `cleanupInventory` extensions of decision 010), by
/// its snake_case name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum Member {
    /// capabilities
    Capabilities,
    /// provision
    Provision,
    /// writeFile
    WriteFile,
    /// beginActiveWrite
    BeginActiveWrite,
    /// activate
    Activate,
    /// execute
    Execute,
    /// readFile
    ReadFile,
    /// readFiles
    ReadFiles,
    /// listDir
    ListDir,
    /// listProjectDir
    ListProjectDir,
    /// snapshot
    Snapshot,
    /// cloneSnapshot
    CloneSnapshot,
    /// release
    Release,
    /// resume
    Resume,
    /// destroy
    Destroy,
    /// destroySnapshot
    DestroySnapshot,
    /// cleanup
    Cleanup,
    /// openProcess
    OpenProcess,
    /// resolveImage (contract extension, decision 010).
    ResolveImage,
    /// cleanupInventory (contract extension, decision 010).
    CleanupInventory,
}

/// A document the strict wire codec decodes, by the name its decode
/// operation carries (`decode_<name>`): a boundary type's Rust name in
/// snake_case without a leading `Sandbox` (`SandboxCommandResult` →
/// `command_result`; the envelope is `capabilities`), the `null` result of
/// a member that returns nothing (`write_file_result`, ...), and the wire
/// protocol's own documents (`initialize_result`, ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum WireType {
    /// `SandboxProviderCapabilities`.
    Capabilities,
    /// `SandboxProvisionRequest`.
    ProvisionRequest,
    /// `SandboxInstance`.
    Instance,
    /// `WriteFileRequest`.
    WriteFileRequest,
    /// The `null` result of writeFile.
    WriteFileResult,
    /// `ActivateRequest`.
    ActivateRequest,
    /// `ExecuteRequest`.
    ExecuteRequest,
    /// `SandboxCommand`.
    Command,
    /// `SandboxCommandResult`.
    CommandResult,
    /// `ReadFileRequest`.
    ReadFileRequest,
    /// `SandboxFileContent`.
    FileContent,
    /// `ReadFilesRequest`.
    ReadFilesRequest,
    /// `ReadFilesResult`.
    ReadFilesResult,
    /// `ListDirRequest`.
    ListDirRequest,
    /// `ListDirResult`.
    ListDirResult,
    /// `ListProjectDirRequest`.
    ListProjectDirRequest,
    /// `ListProjectDirResult`.
    ListProjectDirResult,
    /// `SnapshotRequest`.
    SnapshotRequest,
    /// `SandboxSnapshot`.
    Snapshot,
    /// `CloneSnapshotRequest`.
    CloneSnapshotRequest,
    /// `ReleaseRequest`.
    ReleaseRequest,
    /// `ReleaseDisposition`.
    ReleaseDisposition,
    /// `ResumeRequest`.
    ResumeRequest,
    /// `DestroyRequest`.
    DestroyRequest,
    /// The `null` result of destroy.
    DestroyResult,
    /// `DestroySnapshotRequest`.
    DestroySnapshotRequest,
    /// The `null` result of destroySnapshot.
    DestroySnapshotResult,
    /// `CleanupRequest`.
    CleanupRequest,
    /// `CleanupResult`.
    CleanupResult,
    /// `SandboxProcessRequest`.
    ProcessRequest,
    /// `SandboxProcessEvidence`.
    ProcessEvidence,
    /// `ProcessExit`.
    ProcessExit,
    /// `ActiveWriteRequest`.
    ActiveWriteRequest,
    /// `ActiveWriteOutcome`.
    ActiveWriteOutcome,
    /// `SandboxError`.
    Error,
    /// `SandboxFailure`.
    Failure,
    /// Conformance `Evidence`.
    Evidence,
    /// A `Timestamp` on its own.
    Timestamp,
    /// An `InstanceState` on its own.
    InstanceState,
    /// The wire protocol's `initialize` result.
    InitializeResult,
    /// The wire protocol's openProcess result (evidence and process handle).
    OpenProcessResult,
    /// The wire protocol's `process/resume` parameters.
    ResumeProcessParams,
    /// The wire protocol's `process/resume` result.
    ResumeProcessResult,
    /// The wire protocol's `sandbox/resolveImage` result (a pinned image
    /// reference).
    ImageReference,
}

/// A control step on a process opened by openProcess, by the suffix its
/// operation carries (`open_process_<step>`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum ProcessStep {
    /// Waiting for the exit.
    Wait,
    /// Delivering a signal.
    Signal,
    /// Destroying the process.
    Destroy,
    /// Resuming the process's streams over a new connection (wire
    /// protocol).
    Resume,
}

/// The `operation` of an error: a member, an identity cross-check, the
/// decoding of a wire document, a rollback or destroy that compensates a
/// member, or a step the runtime side takes on its own.
///
/// Wire form: one snake_case string, for example `execute`,
/// `instance_identity`, `decode_command_result`, `decode_instance_handoff`,
/// `provision_rollback`, `open_process_destroy`, `stage_git`. Decoding an
/// unknown string is a decode error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A member: `provision`, `write_file`, ...
    Member(Member),
    /// The 21 instance identity checks: `instance_identity`.
    InstanceIdentity,
    /// The snapshot identity checks: `snapshot_identity`.
    SnapshotIdentity,
    /// The clone identity checks: `clone_identity`.
    CloneIdentity,
    /// The process evidence checks: `open_process_identity`.
    OpenProcessIdentity,
    /// Strict decoding of a document: `decode_<wire type>`.
    Decode(WireType),
    /// Decoding the wire protocol's handoff envelope (value plus rollback
    /// handle) around a document: `decode_<wire type>_handoff`.
    DecodeHandoff(WireType),
    /// The rollback of an allocation made by a member: `<member>_rollback`.
    Rollback(Member),
    /// Control of an open process: `open_process_wait`,
    /// `open_process_signal`, `open_process_destroy`, `open_process_resume`.
    Process(ProcessStep),
    /// Reaching a provider's platform (a daemon, a served provider):
    /// `connect`.
    Connect,
    /// Building a conformance fixture: `fixture`.
    Fixture,
    /// Staging a mount from a Git repository on the Runner: `stage_git`.
    StageGit,
    /// Staging a mount from a host folder on the Runner: `stage_folder`.
    StageFolder,
    /// A one-shot run's process on the Runner side: `one_shot`.
    OneShot,
    /// Copying a session's output tree to the host: `copy_outputs`.
    CopyOutputs,
    /// The wire protocol's handshake with a served provider: `initialize`.
    Initialize,
    /// A wire protocol `conformance/*` hook: `conformance_hook`.
    ConformanceHook,
    /// The rollback of an allocation whose caller stopped waiting for it
    /// (wire protocol): `cancelled_call_rollback`.
    CancelledCallRollback,
    /// The wire protocol's `sandbox/rollback` of a handle: `rollback`.
    RollbackHandle,
    /// An enrolled provider's declared envelope against its enrollment
    /// ceiling: `enrollment_ceiling`.
    EnrollmentCeiling,
    /// An enrolled provider's live envelope against the envelope it was
    /// enrolled with: `enrolled_envelope`.
    EnrolledEnvelope,
}

const DECODE: &str = "decode_";
const HANDOFF: &str = "_handoff";
const ROLLBACK: &str = "_rollback";
const PROCESS: &str = "open_process_";

impl Operation {
    /// True for a `decode_*` operation: the runtime side's own verdict on
    /// a document, never a provider's.
    pub fn is_decode(&self) -> bool {
        matches!(self, Operation::Decode(_) | Operation::DecodeHandoff(_))
    }

    /// The rollback of this operation's allocation, when it is a member.
    pub fn rollback(&self) -> Option<Operation> {
        match self {
            Operation::Member(m) => Some(Operation::Rollback(*m)),
            _ => None,
        }
    }
}

impl From<Member> for Operation {
    fn from(m: Member) -> Self {
        Operation::Member(m)
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::Member(m) => f.write_str(m.as_str()),
            Operation::InstanceIdentity => f.write_str("instance_identity"),
            Operation::SnapshotIdentity => f.write_str("snapshot_identity"),
            Operation::CloneIdentity => f.write_str("clone_identity"),
            Operation::OpenProcessIdentity => f.write_str("open_process_identity"),
            Operation::Decode(t) => write!(f, "{DECODE}{}", t.as_str()),
            Operation::DecodeHandoff(t) => write!(f, "{DECODE}{}{HANDOFF}", t.as_str()),
            Operation::Rollback(m) => write!(f, "{}{ROLLBACK}", m.as_str()),
            Operation::Process(step) => write!(f, "{PROCESS}{}", step.as_str()),
            Operation::Connect => f.write_str("connect"),
            Operation::Fixture => f.write_str("fixture"),
            Operation::StageGit => f.write_str("stage_git"),
            Operation::StageFolder => f.write_str("stage_folder"),
            Operation::OneShot => f.write_str("one_shot"),
            Operation::CopyOutputs => f.write_str("copy_outputs"),
            Operation::Initialize => f.write_str("initialize"),
            Operation::ConformanceHook => f.write_str("conformance_hook"),
            Operation::CancelledCallRollback => f.write_str("cancelled_call_rollback"),
            Operation::RollbackHandle => f.write_str("rollback"),
            Operation::EnrollmentCeiling => f.write_str("enrollment_ceiling"),
            Operation::EnrolledEnvelope => f.write_str("enrolled_envelope"),
        }
    }
}

/// A string that names no [`Operation`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation {0:?}")]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownOperation(s.to_owned());
        let simple = match s {
            "instance_identity" => Some(Operation::InstanceIdentity),
            "snapshot_identity" => Some(Operation::SnapshotIdentity),
            "clone_identity" => Some(Operation::CloneIdentity),
            "open_process_identity" => Some(Operation::OpenProcessIdentity),
            "connect" => Some(Operation::Connect),
            "fixture" => Some(Operation::Fixture),
            "stage_git" => Some(Operation::StageGit),
            "stage_folder" => Some(Operation::StageFolder),
            "one_shot" => Some(Operation::OneShot),
            "copy_outputs" => Some(Operation::CopyOutputs),
            "initialize" => Some(Operation::Initialize),
            "conformance_hook" => Some(Operation::ConformanceHook),
            "cancelled_call_rollback" => Some(Operation::CancelledCallRollback),
            "rollback" => Some(Operation::RollbackHandle),
            "enrollment_ceiling" => Some(Operation::EnrollmentCeiling),
            "enrolled_envelope" => Some(Operation::EnrolledEnvelope),
            _ => None,
        };
        if let Some(op) = simple {
            return Ok(op);
        }
        if let Ok(m) = s.parse::<Member>() {
            return Ok(Operation::Member(m));
        }
        if let Some(rest) = s.strip_prefix(DECODE) {
            if let Ok(t) = rest.parse::<WireType>() {
                return Ok(Operation::Decode(t));
            }
            let t = rest.strip_suffix(HANDOFF).ok_or_else(unknown)?;
            return t
                .parse::<WireType>()
                .map(Operation::DecodeHandoff)
                .map_err(|_| unknown());
        }
        if let Some(m) = s.strip_suffix(ROLLBACK) {
            return m
                .parse::<Member>()
                .map(Operation::Rollback)
                .map_err(|_| unknown());
        }
        if let Some(step) = s.strip_prefix(PROCESS) {
            return step
                .parse::<ProcessStep>()
                .map(Operation::Process)
                .map_err(|_| unknown());
        }
        Err(unknown())
    }
}

impl PartialEq<str> for Operation {
    fn eq(&self, other: &str) -> bool {
        other.parse::<Operation>().is_ok_and(|o| o == *self)
    }
}

impl PartialEq<&str> for Operation {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl Serialize for Operation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Operation {
    /// # Errors
    /// serde's invalid-value error (`expected a closed operation name`) for
    /// a string that names no operation.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        s.parse().map_err(|_| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&s),
                &"a closed operation name",
            )
        })
    }
}

/// The seen value of a `SandboxLifecycleConflict`: the instance's state
/// or a closed reason the operation cannot run.
///
/// Wire form: one snake_case string; an unknown string is a decode error.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ConflictActual {
    /// The instance is provisioning.
    Provisioning,
    /// The instance is active.
    Active,
    /// The instance was released.
    Released,
    /// The instance was destroyed.
    Destroyed,
    /// A live process already holds the instance's process slot.
    ProcessAlreadyOpen,
    /// The envelope declares `list_dir: false`.
    ListDirUnsupported,
    /// The provider has no listProjectDir member.
    ListProjectDirUnsupported,
    /// The envelope declares `active_mount_write: false`.
    ActiveMountWriteUnsupported,
    /// The provider has no openProcess member.
    OpenProcessUnsupported,
    /// The provider has no cleanupInventory member.
    CleanupInventoryUnsupported,
    /// An activate of the same instance is in flight (one lifecycle call at
    /// a time per instance, decision 022).
    ActivateInFlight,
    /// A snapshot of the same instance is in flight.
    SnapshotInFlight,
    /// A release of the same instance is in flight.
    ReleaseInFlight,
    /// A destroy of the same instance is in flight.
    DestroyInFlight,
    /// A resume of the same snapshot is in flight.
    ResumeInFlight,
    /// A beginActiveWrite on the same instance is in flight.
    BeginActiveWriteInFlight,
}

impl ConflictActual {
    /// The `*_in_flight` value naming a lifecycle `member` in flight, for
    /// the six members the runtime serializes (activate, snapshot,
    /// release, destroy, resume, beginActiveWrite); `None` for any other.
    pub fn in_flight(member: Member) -> Option<ConflictActual> {
        Some(match member {
            Member::Activate => ConflictActual::ActivateInFlight,
            Member::Snapshot => ConflictActual::SnapshotInFlight,
            Member::Release => ConflictActual::ReleaseInFlight,
            Member::Destroy => ConflictActual::DestroyInFlight,
            Member::Resume => ConflictActual::ResumeInFlight,
            Member::BeginActiveWrite => ConflictActual::BeginActiveWriteInFlight,
            _ => return None,
        })
    }
}

impl From<crate::types::InstanceState> for ConflictActual {
    fn from(s: crate::types::InstanceState) -> Self {
        match s {
            crate::types::InstanceState::Provisioning => ConflictActual::Provisioning,
            crate::types::InstanceState::Active => ConflictActual::Active,
        }
    }
}

/// Both closed strings keep the schema the kit publishes: a string.
#[cfg(feature = "schema")]
mod schema {
    use super::{ConflictActual, Operation};

    macro_rules! as_string {
        ($ty:ty) => {
            impl schemars::JsonSchema for $ty {
                fn inline_schema() -> bool {
                    true
                }

                fn schema_name() -> std::borrow::Cow<'static, str> {
                    <String as schemars::JsonSchema>::schema_name()
                }

                fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                    <String as schemars::JsonSchema>::json_schema(generator)
                }
            }
        };
    }

    as_string!(Operation);
    as_string!(ConflictActual);
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    fn every() -> Vec<Operation> {
        let mut all = vec![
            Operation::InstanceIdentity,
            Operation::SnapshotIdentity,
            Operation::CloneIdentity,
            Operation::OpenProcessIdentity,
            Operation::Connect,
            Operation::Fixture,
            Operation::StageGit,
            Operation::StageFolder,
            Operation::OneShot,
            Operation::CopyOutputs,
            Operation::Initialize,
            Operation::ConformanceHook,
            Operation::CancelledCallRollback,
            Operation::RollbackHandle,
            Operation::EnrollmentCeiling,
            Operation::EnrolledEnvelope,
        ];
        for m in Member::iter() {
            all.extend([Operation::Member(m), Operation::Rollback(m)]);
        }
        all.extend(ProcessStep::iter().map(Operation::Process));
        for t in WireType::iter() {
            all.extend([Operation::Decode(t), Operation::DecodeHandoff(t)]);
        }
        all
    }

    #[test]
    fn every_operation_round_trips_through_its_wire_string() {
        for op in every() {
            let text = op.to_string();
            assert_eq!(text.parse::<Operation>(), Ok(op), "{text}");
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Operation>(&json).unwrap(), op);
        }
    }

    #[test]
    fn wire_strings_are_as_before() {
        assert_eq!(
            Operation::Member(Member::WriteFile).to_string(),
            "write_file"
        );
        assert_eq!(
            Operation::Decode(WireType::CommandResult).to_string(),
            "decode_command_result"
        );
        assert_eq!(
            Operation::DecodeHandoff(WireType::Instance).to_string(),
            "decode_instance_handoff"
        );
        assert_eq!(
            Operation::Rollback(Member::Provision).to_string(),
            "provision_rollback"
        );
        assert_eq!(
            Operation::Process(ProcessStep::Destroy).to_string(),
            "open_process_destroy"
        );
    }

    #[test]
    fn an_unknown_operation_is_a_decode_error() {
        for s in [
            "",
            "x",
            "decode_",
            "decode_nothing",
            "nothing_rollback",
            "Execute",
        ] {
            assert_eq!(s.parse::<Operation>(), Err(UnknownOperation(s.to_owned())));
            assert!(serde_json::from_str::<Operation>(&format!("\"{s}\"")).is_err());
        }
    }

    #[test]
    fn conflict_actual_round_trips_and_refuses_unknown() {
        for a in ConflictActual::iter() {
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.as_str()));
            assert_eq!(serde_json::from_str::<ConflictActual>(&json).unwrap(), a);
        }
        assert!(serde_json::from_str::<ConflictActual>("\"sleeping\"").is_err());
        // Removed: no producer (decision 024).
        assert!(serde_json::from_str::<ConflictActual>("\"read_files_unsupported\"").is_err());
        assert!(serde_json::from_str::<crate::FailureReason>("\"interrupted\"").is_err());
    }

    #[test]
    fn each_serialized_member_has_its_in_flight_value() {
        let serialized = [
            (Member::Activate, "activate_in_flight"),
            (Member::Snapshot, "snapshot_in_flight"),
            (Member::Release, "release_in_flight"),
            (Member::Destroy, "destroy_in_flight"),
            (Member::Resume, "resume_in_flight"),
            (Member::BeginActiveWrite, "begin_active_write_in_flight"),
        ];
        for m in Member::iter() {
            let want = serialized.iter().find(|(s, _)| *s == m).map(|(_, w)| *w);
            assert_eq!(
                ConflictActual::in_flight(m).map(|a| a.as_str()),
                want,
                "{m}"
            );
        }
    }
}
