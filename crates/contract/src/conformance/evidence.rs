//! Conformance evidence: a JSON document (schema in the author kit) and a
//! human table (the suite crate writes JUnit XML from it).

use crate::{SandboxError, SandboxProviderCapabilities};
use serde::{Deserialize, Serialize};

use super::token::Token;

/// The suite's revision literal; evidence documents carry it.
pub const SUITE_REVISION: &str = "checkfu.sandbox.conformance/v1";

/// How one case ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// Every assertion held and nothing leaked.
    Passed,
    /// An assertion failed, an operation failed, or something leaked.
    Failed,
    /// A required token was not declared; recorded, never a pass.
    Skipped,
    /// The case's own deadline passed.
    TimedOut,
}

impl Outcome {
    /// The snake_case name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

/// Why a case failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CaseFailure {
    /// The step that failed, e.g. `read back the output file`.
    pub step: String,
    /// What was expected and what happened, in one line.
    pub message: String,
    /// The closed errors behind it, in order, when an operation failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SandboxError>,
}

/// One case's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CaseRecord {
    /// Case id.
    pub id: String,
    /// Tokens it requires.
    pub requires: Vec<Token>,
    /// The outcome.
    pub outcome: Outcome,
    /// Required tokens the target did not declare (non-empty iff skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_tokens: Vec<Token>,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
    /// The failure, when failed or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<CaseFailure>,
}

/// Counts per outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Cases passed.
    pub passed: u32,
    /// Cases failed.
    pub failed: u32,
    /// Cases skipped.
    pub skipped: u32,
    /// Cases timed out.
    pub timed_out: u32,
}

/// A provider command: the words it was split into, and the executable
/// that ran, by path and content digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProviderCommand {
    /// The command line split into words by POSIX shell quoting rules
    /// (no expansion); `argv[0]` names the executable. At least one word.
    pub argv: Vec<String>,
    /// `argv[0]` as run: itself when it contains a `/`, else the first
    /// executable regular file of that name in a `PATH` directory.
    pub executable: String,
    /// `sha256:` and the 64 lowercase hex digits of the SHA-256 of the
    /// executable's bytes, read when the suite started.
    pub executable_sha256: String,
}

/// The canonical JSON text of a value, the input of every digest evidence
/// records: object members sorted by key (byte order) at every level, no
/// whitespace, strings escaped as `serde_json` escapes them (`"`, `\` and
/// control characters only; other characters as UTF-8), numbers as
/// `serde_json` writes them (the envelope holds integers only).
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn sorted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let ordered: std::collections::BTreeMap<&String, serde_json::Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                let mut out = serde_json::Map::new();
                for (k, v) in ordered {
                    out.insert(k.clone(), v);
                }
                serde_json::Value::Object(out)
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).unwrap_or_default()
}

/// A whole run's evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// [`SUITE_REVISION`].
    pub suite_revision: String,
    /// The revision of the contract's types and strict codec the evidence
    /// was produced under: `checkfu.sandbox/v1`
    /// ([`crate::wire::WIRE_REVISION`]), the value `initialize` carries as
    /// `contract_revision`. It is not the wire protocol's revision
    /// (`checkfu.sandbox.wire/v1`): an in-process run uses no wire.
    pub wire_revision: String,
    /// Target name.
    pub target: String,
    /// Provider id.
    pub provider: String,
    /// Provider revision from the envelope.
    pub provider_revision: String,
    /// Materialization revision from the envelope.
    pub materialization_revision: String,
    /// The envelope as advertised.
    pub envelope: SandboxProviderCapabilities,
    /// The envelope's digest: `sha256:` and the 64 lowercase hex digits of
    /// the SHA-256 of [`canonical_json`] of `envelope` (the wire decision's
    /// evidence section).
    pub envelope_sha256: String,
    /// What was run when the provider was served from a command
    /// (`--provider-cmd`); absent for an in-process provider or a socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_command: Option<ProviderCommand>,
    /// Tokens the target declared.
    pub declared_tokens: Vec<Token>,
    /// Faults injected into the provider, if any (memory oracle only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected_faults: Vec<String>,
    /// When the run started (canonical UTC).
    pub started_at: String,
    /// Per case, in suite order.
    pub cases: Vec<CaseRecord>,
    /// Counts.
    pub summary: Summary,
}

impl Evidence {
    /// True when no case failed or timed out.
    pub fn ok(&self) -> bool {
        self.summary.failed == 0 && self.summary.timed_out == 0
    }

    /// A plain-text table, one row per case, then the summary line
    /// `N passed, N failed, N skipped` (timed-out cases count as failed in
    /// that line and are named in their rows).
    pub fn table(&self) -> String {
        let mut s = format!("{:<20} {:<10} {:>9}  detail\n", "case", "outcome", "ms");
        for c in &self.cases {
            s.push_str(&format!(
                "{:<20} {:<10} {:>9}  {}\n",
                c.id,
                c.outcome.as_str(),
                c.duration_ms,
                detail(c)
            ));
        }
        s.push_str(&format!(
            "{} passed, {} failed, {} skipped\n",
            self.summary.passed,
            self.summary.failed + self.summary.timed_out,
            self.summary.skipped
        ));
        s
    }
}

/// One-line detail for a case row.
pub fn detail(c: &CaseRecord) -> String {
    match c.outcome {
        Outcome::Passed => String::new(),
        Outcome::Skipped => {
            let missing: Vec<&str> = c.missing_tokens.iter().map(|t| t.as_str()).collect();
            format!("missing {}", missing.join(", "))
        }
        Outcome::Failed | Outcome::TimedOut => match &c.failure {
            Some(f) => match f.errors.first() {
                Some(e) => format!("{}: {}: {}", f.step, e.tag(), e),
                None => format!("{}: {}", f.step, f.message),
            },
            None => c.outcome.as_str().to_owned(),
        },
    }
}
