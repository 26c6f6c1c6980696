//! openProcess: the request, the provider's evidence, how a process ended and
//! its control signals (spec "openProcess").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capabilities::{NetworkMode, Placement, Tier};
use crate::timestamp::Timestamp;

use super::execute::SignalName;

/// openProcess: a long-lived process with live stdio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// Program to run.
    pub executable: String,
    /// Arguments: at most 256, each at most 65,536 bytes, no NUL.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 256),
            inner(length(max = 65536), regex(pattern = r"^[^\x00]*$"))
        )
    )]
    pub arguments: Vec<String>,
    /// Absolute working directory.
    pub working_directory: String,
    /// Environment; keys match `^[A-Za-z_][A-Za-z0-9_]*$`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"})))]
    pub environment: BTreeMap<String, String>,
}

/// Trusted provider evidence about an opened process, checked against the
/// instance and the envelope (`open_process_identity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessEvidence {
    /// Must equal the instance's provider.
    pub provider: String,
    /// Must equal the instance's id.
    pub instance_id: String,
    /// Must equal the instance's session.
    pub session_id: String,
    /// Must equal the instance's placement and the envelope's.
    pub placement: Placement,
    /// Must equal the instance's target and be among the envelope's tiers.
    pub tier: Tier,
    /// Must equal the profile's network mode and be among the envelope's.
    pub network_mode: NetworkMode,
    /// Must equal the request's executable.
    pub executable: String,
    /// When the process started.
    pub started_at: Timestamp,
}

/// How a process ended: an exit code xor a signal name.
///
/// Wire form: an object with exactly one of `exit_code` (0..=255) or
/// `signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "ProcessExitWire", into = "ProcessExitWire")]
pub enum ProcessExit {
    /// Exited with this status.
    ExitCode(u8),
    /// Ended by this signal.
    Signal(SignalName),
}

/// The wire shape of [`ProcessExit`], before the exactly-one check.
///
/// Its JSON Schema states the exactly-one rule (a `null` member counts as
/// absent, as the decoder treats it).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ProcessExit", extend("oneOf" = [
    {
        "required": ["exit_code"],
        "properties": {"exit_code": {"type": "integer"}, "signal": {"type": "null"}}
    },
    {
        "required": ["signal"],
        "properties": {"exit_code": {"type": "null"}, "signal": {"type": "string"}}
    }
])))]
pub struct ProcessExitWire {
    /// Exit status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// Signal name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalName>,
}

impl TryFrom<ProcessExitWire> for ProcessExit {
    type Error = String;
    fn try_from(w: ProcessExitWire) -> Result<Self, String> {
        match (w.exit_code, w.signal) {
            (Some(c), None) => Ok(ProcessExit::ExitCode(c)),
            (None, Some(s)) => Ok(ProcessExit::Signal(s)),
            (Some(_), Some(_)) => {
                Err("expected exactly one of exit_code, signal; actual both".into())
            }
            (None, None) => Err("expected exactly one of exit_code, signal; actual none".into()),
        }
    }
}

impl From<ProcessExit> for ProcessExitWire {
    fn from(e: ProcessExit) -> Self {
        match e {
            ProcessExit::ExitCode(c) => ProcessExitWire {
                exit_code: Some(c),
                signal: None,
            },
            ProcessExit::Signal(s) => ProcessExitWire {
                exit_code: None,
                signal: Some(s),
            },
        }
    }
}

/// Control signals openProcess accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ControlSignal {
    /// Interrupt.
    #[serde(rename = "SIGINT")]
    Sigint,
    /// Terminate (the only one sent today).
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// Kill.
    #[serde(rename = "SIGKILL")]
    Sigkill,
}

impl ControlSignal {
    /// The Linux signal number.
    pub fn number(&self) -> i32 {
        match self {
            ControlSignal::Sigint => 2,
            ControlSignal::Sigterm => 15,
            ControlSignal::Sigkill => 9,
        }
    }
    /// The matching [`SignalName`].
    pub fn name(&self) -> SignalName {
        match self {
            ControlSignal::Sigint => SignalName::Sigint,
            ControlSignal::Sigterm => SignalName::Sigterm,
            ControlSignal::Sigkill => SignalName::Sigkill,
        }
    }
}
