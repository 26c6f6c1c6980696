//! The closed error vocabulary (spec "Errors"; DESIGN D4).
//!
//! Eight tags a provider may return and three that only the runtime authors.
//! The set is append-only: a retired variant keeps its tag forever. Each
//! variant has typed detail fields; wire form is a JSON object tagged by
//! `_tag`, for example
//! `{"_tag":"SandboxLifecycleConflict","operation":"execute","expected":"active","actual":"provisioning"}`.
//! `operation` is a closed [`Operation`] and a conflict's `actual` a closed
//! [`ConflictActual`]; the schema keeps both as strings.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::capabilities::RetentionMode;
use crate::operation::{ConflictActual, Operation};

/// The closed `SandboxCapabilityUnavailable.requirement` vocabulary, which is
/// also the vocabulary selection speaks.
///
/// The spec's list has eleven values; `snapshot_clone` is added because the
/// spec's capability table refuses a clone with it (DESIGN D4).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Requirement {
    /// The isolation tier (`container`, ...).
    Tier,
    /// Operating system and architecture.
    Platform,
    /// The root image cannot be resolved or is of an unsupported kind.
    BaseImage,
    /// Package materialization.
    Packages,
    /// The network mode or egress grade (see the spec's three conditions).
    NetworkPolicy,
    /// The retention mode (`ephemeral_zdr` / `durable`).
    Retention,
    /// Snapshot capture.
    Snapshots,
    /// CPU, memory, pids or disk limits.
    Resources,
    /// The mount plan (reserved roots, duplicates, count over `max_mounts`).
    Mounts,
    /// Reads bound to a physical root (openat2-like containment).
    PhysicallyContainedFileRead,
    /// beginActiveWrite.
    ActiveMountWrite,
    /// cloneSnapshot.
    SnapshotClone,
}

impl Requirement {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Closed reasons for `SandboxOperationFailed`.
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
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FailureReason {
    /// A bound on time was exceeded (a rollback past 30 s, a case deadline).
    TimedOut,
    /// A read resolved outside its `allowed_root` (symlink, `..`, swap).
    OutsideRoot,
    /// The path does not exist.
    NotFound,
    /// The path exists but is not a regular file.
    NotRegularFile,
    /// A caller's input was refused; `field`, `expected`, `actual` say why.
    InvalidRequest,
    /// A path outside every declared mount and the output tree.
    PathNotAdmitted,
    /// A write into a read-only location.
    ReadOnly,
    /// The provider's platform failed (daemon error, I/O error, ...).
    ProviderError,
}

/// Which output stream of a command.
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
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl OutputStream {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for OutputStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One adapter that selection could not use, with every requirement it
/// failed (part of `SandboxAdapterUnavailable`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UnmetAdapter {
    /// The adapter's provider id.
    pub provider: String,
    /// Every requirement it does not meet, in vocabulary order.
    pub unmet: Vec<Requirement>,
}

/// The closed sandbox error vocabulary.
///
/// Providers author the first eight; `SandboxAdapterUnavailable`,
/// `SandboxAdapterAmbiguous` and `SandboxProtocolInvalid` are authored only
/// by the runtime. `operation` fields carry the snake_case member name
/// (`provision`, `write_file`, `read_files`, ...), an identity check name
/// (`instance_identity`, `snapshot_identity`, `clone_identity`,
/// `open_process_identity`), a decode name (`decode_<type>`), or a member
/// name with a `_rollback` / `_destroy` suffix.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    thiserror::Error,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "_tag", deny_unknown_fields)]
pub enum SandboxError {
    /// A requirement the provider (or this instance) cannot meet.
    #[error("capability unavailable: {requirement}{}", suffix(detail))]
    SandboxCapabilityUnavailable {
        /// The unmet requirement.
        requirement: Requirement,
        /// Human detail: what was asked and what is offered. May be empty.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// A file over a size bound.
    #[error("file too large: {path}: limit {limit_bytes} bytes, actual {actual_bytes} bytes")]
    SandboxFileTooLarge {
        /// The path in the sandbox.
        path: String,
        /// The bound, in bytes.
        limit_bytes: u64,
        /// The size seen, in bytes (at least `limit_bytes + 1`).
        actual_bytes: u64,
    },
    /// No such instance at the provider (or in the runtime's record).
    #[error("instance not found: {instance_id}")]
    SandboxInstanceNotFound {
        /// The instance id asked for.
        instance_id: String,
    },
    /// The operation is not allowed in the instance's state, or the member
    /// it needs is absent.
    #[error("lifecycle conflict: {operation}: expected {expected}, actual {actual}")]
    SandboxLifecycleConflict {
        /// The refused operation.
        operation: Operation,
        /// The accepted state(s) (`provisioning`, `active`, `provisioning|active`)
        /// or the capability needed.
        expected: String,
        /// The state seen, or a closed reason: `released`, `destroyed`,
        /// `process_already_open`, `list_dir_unsupported`,
        /// `list_project_dir_unsupported`, `active_mount_write_unsupported`,
        /// `open_process_unsupported`, `cleanup_inventory_unsupported`, or
        /// the serialized lifecycle call in flight (`activate_in_flight`,
        /// `snapshot_in_flight`, `release_in_flight`, `destroy_in_flight`,
        /// `resume_in_flight`, `begin_active_write_in_flight`).
        actual: ConflictActual,
    },
    /// The operation was attempted and failed.
    #[error("operation failed: {operation}: {}{}{}", reason.as_str(), suffix(message), field_suffix(field, expected, actual))]
    SandboxOperationFailed {
        /// The failed operation (may end in `_rollback` or `_destroy`).
        operation: Operation,
        /// The closed reason.
        reason: FailureReason,
        /// Human detail. May be empty.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
        /// For `invalid_request`: the offending input field path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
        /// For `invalid_request`: what was acceptable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<String>,
        /// For `invalid_request`: what was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actual: Option<String>,
    },
    /// A command's stream passed `output_limit_bytes`; the command was ended.
    #[error("output limit exceeded: {stream} over {limit_bytes} bytes")]
    SandboxOutputLimitExceeded {
        /// The stream that overflowed.
        stream: OutputStream,
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// Snapshots are forbidden for this instance's retention (ZDR).
    #[error("snapshot forbidden: {instance_id} has retention {retention:?}")]
    SandboxSnapshotForbidden {
        /// The instance.
        instance_id: String,
        /// Its retention mode.
        retention: RetentionMode,
    },
    /// No such snapshot at the provider.
    #[error("snapshot not found: {snapshot_id}")]
    SandboxSnapshotNotFound {
        /// The snapshot id asked for.
        snapshot_id: String,
    },
    /// Selection found no adapter meeting every requirement.
    #[error("no adapter available: {}", unmet_list(adapters))]
    SandboxAdapterUnavailable {
        /// Each registered adapter with the requirements it does not meet
        /// (an adapter whose envelope fails decoding lists none and is named
        /// with `invalid_envelope` in `SandboxAdapterUnavailable.invalid`).
        adapters: Vec<UnmetAdapter>,
        /// Adapters skipped because their envelope failed validation.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        invalid: Vec<String>,
    },
    /// Selection found more than one adapter.
    #[error("adapter ambiguous: candidates {}", candidates.join(", "))]
    SandboxAdapterAmbiguous {
        /// Provider ids of every adapter that met all requirements.
        candidates: Vec<String>,
    },
    /// A provider result failed decoding or a cross-check.
    #[error("protocol invalid: {operation}: {field}: expected {expected}, actual {actual}")]
    SandboxProtocolInvalid {
        /// The check (`instance_identity`, `execute`, `decode_capabilities`, ...).
        operation: Operation,
        /// The offending field path, e.g. `materialization.image_digest`.
        field: String,
        /// The value (or rule) expected.
        expected: String,
        /// The value received.
        actual: String,
    },
}

fn suffix(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

fn field_suffix(
    field: &Option<String>,
    expected: &Option<String>,
    actual: &Option<String>,
) -> String {
    match field {
        None => String::new(),
        Some(f) => format!(
            " ({f}: expected {}, actual {})",
            expected.as_deref().unwrap_or("?"),
            actual.as_deref().unwrap_or("?")
        ),
    }
}

fn unmet_list(adapters: &[UnmetAdapter]) -> String {
    if adapters.is_empty() {
        return "no adapters registered".into();
    }
    adapters
        .iter()
        .map(|a| {
            let unmet: Vec<&str> = a.unmet.iter().map(Requirement::as_str).collect();
            format!("{} lacks {}", a.provider, unmet.join("+"))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl FailureReason {
    /// The snake_case wire name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

impl SandboxError {
    /// The wire `_tag` of this error.
    pub fn tag(&self) -> &'static str {
        self.into()
    }

    /// True for the three tags only the runtime may author.
    pub fn is_runtime_only(&self) -> bool {
        matches!(
            self,
            SandboxError::SandboxAdapterUnavailable { .. }
                | SandboxError::SandboxAdapterAmbiguous { .. }
                | SandboxError::SandboxProtocolInvalid { .. }
        )
    }

    /// `SandboxCapabilityUnavailable{requirement}` with a detail line.
    pub fn unavailable(requirement: Requirement, detail: impl Into<String>) -> Self {
        SandboxError::SandboxCapabilityUnavailable {
            requirement,
            detail: detail.into(),
        }
    }

    /// `SandboxLifecycleConflict{operation, expected, actual}`.
    pub fn conflict(
        operation: Operation,
        expected: impl Into<String>,
        actual: impl Into<ConflictActual>,
    ) -> Self {
        SandboxError::SandboxLifecycleConflict {
            operation,
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    /// `SandboxOperationFailed{operation, reason, message}`.
    pub fn failed(operation: Operation, reason: FailureReason, message: impl Into<String>) -> Self {
        SandboxError::SandboxOperationFailed {
            operation,
            reason,
            message: message.into(),
            field: None,
            expected: None,
            actual: None,
        }
    }

    /// `SandboxOperationFailed{reason: invalid_request}` naming the input
    /// field and both values.
    pub fn invalid_request(
        operation: Operation,
        field: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        SandboxError::SandboxOperationFailed {
            operation,
            reason: FailureReason::InvalidRequest,
            message: String::new(),
            field: Some(field.into()),
            expected: Some(expected.into()),
            actual: Some(actual.into()),
        }
    }

    /// `SandboxProtocolInvalid{operation, field, expected, actual}`.
    pub fn protocol(
        operation: Operation,
        field: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        SandboxError::SandboxProtocolInvalid {
            operation,
            field: field.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }
}

/// A failure of one or more causes, kept in order (spec "Allocation
/// handoff": a rejection combined with a rollback that timed out).
///
/// Wire form: `{"causes": [<SandboxError>, ...]}` with at least one cause.
/// Display joins the causes with `; then `.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxFailure {
    /// The causes, first the one that started the failure.
    causes: Causes,
}

/// At least one cause: the first, then the later ones in order. An empty
/// list cannot be built, and `causes: []` is refused at decode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Causes {
    first: SandboxError,
    later: Vec<SandboxError>,
}

impl Serialize for Causes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(1 + self.later.len()))?;
        seq.serialize_element(&self.first)?;
        for cause in &self.later {
            seq.serialize_element(cause)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Causes {
    /// # Errors
    /// serde's invalid-length error (`invalid length 0, expected at least
    /// one cause`) for an empty list; the wire decoder reports it as
    /// `SandboxProtocolInvalid{field: "causes", actual: "[]"}`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut all = Vec::<SandboxError>::deserialize(deserializer)?.into_iter();
        match all.next() {
            Some(first) => Ok(Causes {
                first,
                later: all.collect(),
            }),
            None => Err(serde::de::Error::invalid_length(0, &"at least one cause")),
        }
    }
}

/// The schema of a list of causes, as `Vec<SandboxError>` has.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Causes {
    fn inline_schema() -> bool {
        <Vec<SandboxError>>::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Vec<SandboxError>>::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        <Vec<SandboxError>>::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<SandboxError>>::json_schema(generator)
    }
}

impl SandboxFailure {
    /// A failure of `first` followed by `later`, in order.
    pub fn new(first: SandboxError, later: impl IntoIterator<Item = SandboxError>) -> Self {
        SandboxFailure {
            causes: Causes {
                first,
                later: later.into_iter().collect(),
            },
        }
    }

    /// The first cause: the one that started the failure.
    pub fn error(&self) -> &SandboxError {
        &self.causes.first
    }

    /// The causes after the first, in order (empty for a single cause).
    pub fn later(&self) -> &[SandboxError] {
        &self.causes.later
    }

    /// Every cause in order, the first first.
    pub fn causes(&self) -> impl Iterator<Item = &SandboxError> {
        std::iter::once(&self.causes.first).chain(&self.causes.later)
    }

    /// How many causes (at least one).
    pub fn cause_count(&self) -> usize {
        1 + self.causes.later.len()
    }

    /// Every cause in order, the first first, by value.
    pub fn into_causes(self) -> Vec<SandboxError> {
        let Causes { first, mut later } = self.causes;
        later.insert(0, first);
        later
    }

    /// This failure followed by `later`.
    pub fn then(mut self, later: impl Into<SandboxFailure>) -> Self {
        let later = later.into();
        self.causes.later.push(later.causes.first);
        self.causes.later.extend(later.causes.later);
        self
    }
}

impl From<SandboxError> for SandboxFailure {
    fn from(e: SandboxError) -> Self {
        SandboxFailure::new(e, [])
    }
}

impl fmt::Display for SandboxFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.causes().enumerate() {
            if i > 0 {
                f.write_str("; then ")?;
            }
            write!(f, "{}: {c}", c.tag())?;
        }
        Ok(())
    }
}

impl std::error::Error for SandboxFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_is_tagged_and_strict() {
        let e = SandboxError::conflict(crate::op::EXECUTE, "active", ConflictActual::Provisioning);
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"_tag":"SandboxLifecycleConflict","operation":"execute","expected":"active","actual":"provisioning"}"#
        );
        let back: SandboxError = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        let unknown = r#"{"_tag":"SandboxLifecycleConflict","operation":"execute","expected":"a","actual":"active","extra":1}"#;
        assert!(serde_json::from_str::<SandboxError>(unknown).is_err());
        let unknown = r#"{"_tag":"SandboxLifecycleConflict","operation":"x","expected":"a","actual":"active"}"#;
        assert!(serde_json::from_str::<SandboxError>(unknown).is_err());
        let unknown = r#"{"_tag":"SandboxLifecycleConflict","operation":"execute","expected":"a","actual":"b"}"#;
        assert!(serde_json::from_str::<SandboxError>(unknown).is_err());
        assert!(serde_json::from_str::<SandboxError>(r#"{"_tag":"SandboxOops"}"#).is_err());
    }

    #[test]
    fn combined_failure_keeps_order() {
        let f = SandboxFailure::from(SandboxError::protocol(
            Operation::InstanceIdentity,
            "expires_at",
            "a",
            "b",
        ))
        .then(SandboxError::failed(
            Operation::Rollback(crate::Member::Provision),
            FailureReason::TimedOut,
            "30 s",
        ));
        let text = f.to_string();
        let first = text.find("SandboxProtocolInvalid").unwrap();
        let second = text.find("SandboxOperationFailed").unwrap();
        assert!(first < second, "{text}");
        assert_eq!(f.error().tag(), "SandboxProtocolInvalid");
        assert_eq!(f.cause_count(), 2);
        assert_eq!(f.later()[0].tag(), "SandboxOperationFailed");
        let tags: Vec<&str> = f.causes().map(SandboxError::tag).collect();
        assert_eq!(tags, ["SandboxProtocolInvalid", "SandboxOperationFailed"]);
        assert_eq!(f.into_causes().len(), 2);
    }
}
