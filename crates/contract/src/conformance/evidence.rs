//! Conformance evidence: a JSON document (schema in the author kit), JUnit
//! XML, and a human table.

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

/// A whole run's evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// [`SUITE_REVISION`].
    pub suite_revision: String,
    /// The wire revision of the contract.
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

    /// JUnit XML: one testsuite, one testcase per case; skips and failures
    /// carry their reasons.
    pub fn junit_xml(&self) -> String {
        let mut s = String::new();
        let total = self.cases.len();
        let seconds: f64 = self
            .cases
            .iter()
            .map(|c| c.duration_ms as f64 / 1000.0)
            .sum();
        s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        s.push_str(&format!(
            "<testsuites name=\"checkfu-sandbox-conformance\" tests=\"{total}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{seconds:.3}\">\n",
            self.summary.failed, self.summary.timed_out, self.summary.skipped
        ));
        s.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{total}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{seconds:.3}\" timestamp=\"{}\">\n",
            xml(&format!("{} ({})", self.target, self.provider)),
            self.summary.failed,
            self.summary.timed_out,
            self.summary.skipped,
            xml(&self.started_at)
        ));
        s.push_str(&format!(
            "    <properties><property name=\"suite_revision\" value=\"{}\"/><property name=\"provider_revision\" value=\"{}\"/><property name=\"declared_tokens\" value=\"{}\"/></properties>\n",
            xml(&self.suite_revision),
            xml(&self.provider_revision),
            xml(&self.declared_tokens.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(","))
        ));
        for c in &self.cases {
            s.push_str(&format!(
                "    <testcase classname=\"conformance.{}\" name=\"{}\" time=\"{:.3}\"",
                xml(&self.target),
                xml(&c.id),
                c.duration_ms as f64 / 1000.0
            ));
            match c.outcome {
                Outcome::Passed => s.push_str("/>\n"),
                Outcome::Skipped => {
                    let missing: Vec<&str> = c.missing_tokens.iter().map(|t| t.as_str()).collect();
                    s.push_str(&format!(
                        ">\n      <skipped message=\"missing tokens: {}\"/>\n    </testcase>\n",
                        xml(&missing.join(", "))
                    ));
                }
                Outcome::Failed | Outcome::TimedOut => {
                    let tag = if c.outcome == Outcome::Failed {
                        "failure"
                    } else {
                        "error"
                    };
                    let (msg, body) = match &c.failure {
                        Some(f) => (
                            format!("{}: {}", f.step, f.message),
                            f.errors
                                .iter()
                                .map(|e| serde_json::to_string(e).unwrap_or_default())
                                .collect::<Vec<_>>()
                                .join("\n"),
                        ),
                        None => (c.outcome.as_str().to_owned(), String::new()),
                    };
                    s.push_str(&format!(
                        ">\n      <{tag} message=\"{}\" type=\"{}\">{}</{tag}>\n    </testcase>\n",
                        xml(&msg),
                        c.outcome.as_str(),
                        xml(&body)
                    ));
                }
            }
        }
        s.push_str("  </testsuite>\n</testsuites>\n");
        s
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

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {
                out.push_str(&format!("&#x{:x};", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}
