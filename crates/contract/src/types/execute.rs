//! execute: one bounded command, its signal vocabulary and how it ended (spec
//! "execute"; DESIGN D10).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bytes::Bytes;
use crate::timestamp::Timestamp;

/// One bounded command (execute).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxCommand {
    /// Program to run (resolved on the sandbox PATH when not absolute).
    pub executable: String,
    /// Arguments after the executable: at most 256, each at most 65,536
    /// bytes, no NUL.
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
    /// Bytes for standard input, then end of file. Absent: stdin is closed
    /// at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<Bytes>,
    /// Wall-clock bound in seconds, 1..= the profile's `max_duration_seconds`.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub timeout_seconds: u32,
    /// Bound on each of stdout and stderr, in bytes, at most 16 MiB.
    #[cfg_attr(feature = "schema", schemars(range(max = 16_777_216)))]
    pub output_limit_bytes: u64,
}

/// execute: run one command in an active instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ExecuteRequest {
    /// The instance, in `active`.
    pub instance_id: String,
    /// The command.
    pub command: SandboxCommand,
}

/// A POSIX signal name in the contract's vocabulary.
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
#[strum(serialize_all = "UPPERCASE")]
pub enum SignalName {
    /// Hang-up.
    #[serde(rename = "SIGHUP")]
    Sighup,
    /// Interrupt.
    #[serde(rename = "SIGINT")]
    Sigint,
    /// Quit.
    #[serde(rename = "SIGQUIT")]
    Sigquit,
    /// Abort.
    #[serde(rename = "SIGABRT")]
    Sigabrt,
    /// Kill.
    #[serde(rename = "SIGKILL")]
    Sigkill,
    /// Segmentation fault.
    #[serde(rename = "SIGSEGV")]
    Sigsegv,
    /// Broken pipe.
    #[serde(rename = "SIGPIPE")]
    Sigpipe,
    /// Alarm.
    #[serde(rename = "SIGALRM")]
    Sigalrm,
    /// Terminate.
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// User 1.
    #[serde(rename = "SIGUSR1")]
    Sigusr1,
    /// User 2.
    #[serde(rename = "SIGUSR2")]
    Sigusr2,
    /// Bus error.
    #[serde(rename = "SIGBUS")]
    Sigbus,
    /// Floating-point exception.
    #[serde(rename = "SIGFPE")]
    Sigfpe,
    /// Illegal instruction.
    #[serde(rename = "SIGILL")]
    Sigill,
    /// Trap.
    #[serde(rename = "SIGTRAP")]
    Sigtrap,
    /// CPU time exceeded.
    #[serde(rename = "SIGXCPU")]
    Sigxcpu,
    /// File size exceeded.
    #[serde(rename = "SIGXFSZ")]
    Sigxfsz,
    /// Another signal.
    #[serde(rename = "SIGOTHER")]
    #[strum(serialize = "SIGOTHER")]
    Other,
}

impl SignalName {
    /// The name as on the wire (`SIGKILL`).
    pub fn as_str(&self) -> &'static str {
        self.into()
    }

    /// The Linux signal number's name, from a raw number.
    pub fn from_number(n: i32) -> Self {
        match n {
            1 => SignalName::Sighup,
            2 => SignalName::Sigint,
            3 => SignalName::Sigquit,
            4 => SignalName::Sigill,
            5 => SignalName::Sigtrap,
            6 => SignalName::Sigabrt,
            7 => SignalName::Sigbus,
            8 => SignalName::Sigfpe,
            9 => SignalName::Sigkill,
            10 => SignalName::Sigusr1,
            11 => SignalName::Sigsegv,
            12 => SignalName::Sigusr2,
            13 => SignalName::Sigpipe,
            14 => SignalName::Sigalrm,
            15 => SignalName::Sigterm,
            24 => SignalName::Sigxcpu,
            25 => SignalName::Sigxfsz,
            _ => SignalName::Other,
        }
    }
}

/// How a command ended: exactly one cause (DESIGN D10).
///
/// Wire form: an object with exactly one of `exit_code` (0..=255), `signal`
/// (a [`SignalName`]) or `timed_out` (`true`). Two causes or none are
/// refused at decode, naming the field `exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "ExitCauseWire", into = "ExitCauseWire")]
pub enum ExitCause {
    /// Exited with this status.
    ExitCode(u8),
    /// Ended by this signal.
    Signal(SignalName),
    /// Ended by the runtime's `timeout_seconds`.
    TimedOut,
}

/// The wire shape of [`ExitCause`], before the exactly-one check.
///
/// Its JSON Schema states the exactly-one rule (a `null` member counts as
/// absent, as the decoder treats it).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "ExitCause", extend("oneOf" = [
    {
        "required": ["exit_code"],
        "properties": {
            "exit_code": {"type": "integer"},
            "signal": {"type": "null"},
            "timed_out": {"type": "null"}
        }
    },
    {
        "required": ["signal"],
        "properties": {
            "exit_code": {"type": "null"},
            "signal": {"type": "string"},
            "timed_out": {"type": "null"}
        }
    },
    {
        "required": ["timed_out"],
        "properties": {
            "exit_code": {"type": "null"},
            "signal": {"type": "null"},
            "timed_out": {"const": true}
        }
    }
])))]
pub struct ExitCauseWire {
    /// Exit status, 0..=255.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// Signal name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalName>,
    /// Present and `true` when the command timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

impl TryFrom<ExitCauseWire> for ExitCause {
    type Error = String;
    fn try_from(w: ExitCauseWire) -> Result<Self, String> {
        let mut causes = Vec::new();
        if w.exit_code.is_some() {
            causes.push("exit_code");
        }
        if w.signal.is_some() {
            causes.push("signal");
        }
        match w.timed_out {
            Some(true) => causes.push("timed_out"),
            Some(false) => return Err("timed_out: expected true or absent, actual false".into()),
            None => {}
        }
        match (causes.len(), w.exit_code, w.signal) {
            (1, Some(code), _) => Ok(ExitCause::ExitCode(code)),
            (1, _, Some(sig)) => Ok(ExitCause::Signal(sig)),
            (1, _, _) => Ok(ExitCause::TimedOut),
            (n, _, _) => {
                Err(format!(
                "expected exactly one exit cause of exit_code, signal, timed_out; actual {n} ({})",
                if causes.is_empty() { "none".to_string() } else { causes.join(", ") }
            ))
            }
        }
    }
}

impl From<ExitCause> for ExitCauseWire {
    fn from(c: ExitCause) -> Self {
        match c {
            ExitCause::ExitCode(code) => ExitCauseWire {
                exit_code: Some(code),
                ..Default::default()
            },
            ExitCause::Signal(s) => ExitCauseWire {
                signal: Some(s),
                ..Default::default()
            },
            ExitCause::TimedOut => ExitCauseWire {
                timed_out: Some(true),
                ..Default::default()
            },
        }
    }
}

/// execute's settlement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxCommandResult {
    /// Exactly one exit cause.
    pub exit: ExitCause,
    /// Standard output, at most `output_limit_bytes`.
    pub stdout_base64: Bytes,
    /// Standard error, at most `output_limit_bytes`.
    pub stderr_base64: Bytes,
    /// When the command started.
    pub started_at: Timestamp,
    /// When it settled; not before `started_at`.
    pub finished_at: Timestamp,
}
