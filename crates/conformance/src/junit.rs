//! JUnit XML evidence, written by `quick-junit`: one testsuite, one
//! testcase per case; skips carry their missing tokens, failures their
//! step, message and closed errors.
//!
//! Every string goes through `quick-junit`'s `XmlString`, which removes
//! ANSI escape sequences and the control characters XML 1.0 forbids, so a
//! case detail carrying terminal output still gives a well-formed report.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::evidence::{Evidence, Outcome};

/// The report's `testsuites` name.
pub const REPORT_NAME: &str = "checkfu-sandbox-conformance";

/// The evidence as JUnit XML (UTF-8, XML 1.0).
///
/// # Errors
/// [`quick_junit::SerializeError`] when the XML writer fails (it writes to
/// memory, so only on a writer bug).
pub fn junit_xml(evidence: &Evidence) -> Result<String, quick_junit::SerializeError> {
    let mut suite = TestSuite::new(format!("{} ({})", evidence.target, evidence.provider));
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&evidence.started_at) {
        suite.set_timestamp(at);
    }
    suite.add_properties([
        Property::new("suite_revision", evidence.suite_revision.as_str()),
        Property::new("provider_revision", evidence.provider_revision.as_str()),
        Property::new(
            "declared_tokens",
            evidence
                .declared_tokens
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ]);
    let mut total = Duration::ZERO;
    for c in &evidence.cases {
        let status = match c.outcome {
            Outcome::Passed => TestCaseStatus::success(),
            Outcome::Skipped => {
                let missing: Vec<&str> = c.missing_tokens.iter().map(|t| t.as_str()).collect();
                let mut s = TestCaseStatus::skipped();
                s.set_message(format!("missing tokens: {}", missing.join(", ")));
                s
            }
            Outcome::Failed | Outcome::TimedOut => {
                let kind = if c.outcome == Outcome::Failed {
                    NonSuccessKind::Failure
                } else {
                    NonSuccessKind::Error
                };
                let mut s = TestCaseStatus::non_success(kind);
                s.set_type(c.outcome.as_str());
                match &c.failure {
                    Some(f) => {
                        s.set_message(format!("{}: {}", f.step, f.message));
                        let errors: Vec<String> = f
                            .errors
                            .iter()
                            .map(|e| serde_json::to_string(e).unwrap_or_default())
                            .collect();
                        if !errors.is_empty() {
                            s.set_description(errors.join("\n"));
                        }
                    }
                    None => {
                        s.set_message(c.outcome.as_str());
                    }
                }
                s
            }
        };
        let time = Duration::from_millis(c.duration_ms);
        total += time;
        let mut case = TestCase::new(c.id.as_str(), status);
        case.set_classname(format!("conformance.{}", evidence.target));
        case.set_time(time);
        suite.add_test_case(case);
    }
    suite.set_time(total);
    let mut report = Report::new(REPORT_NAME);
    report.set_time(total);
    report.add_test_suite(suite);
    report.to_string()
}
