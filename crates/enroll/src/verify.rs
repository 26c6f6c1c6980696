//! Verifying signed evidence against a live provider: every check
//! `checkfu sandbox verify` and `checkfu sandbox add` make, each failure a
//! [`Reason`]. All checks run; the result lists every reason.

use std::fmt;

use checkfu_sandbox_contract::conformance::evidence::{Outcome, SUITE_REVISION};
use checkfu_sandbox_contract::conformance::token::{Token, CASES};
use checkfu_sandbox_contract::{SandboxError, SandboxProviderCapabilities};
use checkfu_sandbox_runtime::ceiling::{intersect, Ceiling, Cut};
use ed25519_dalek::VerifyingKey;

use crate::dsse::Envelope;
use crate::statement::{Statement, PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE};
use crate::subject::{subjects, Code, Subject};

/// Why signed evidence does not qualify a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The file is not a DSSE envelope, or its payload not our statement.
    Malformed {
        /// What is wrong.
        what: String,
    },
    /// No signature verifies under the given key.
    Signature {
        /// The key id of the key tried.
        key_id: String,
    },
    /// The DSSE payload type is not [`PAYLOAD_TYPE`].
    PayloadType {
        /// The payload type found.
        actual: String,
    },
    /// The statement's `_type` is not [`STATEMENT_TYPE`].
    StatementType {
        /// The type found.
        actual: String,
    },
    /// The predicate type is not [`PREDICATE_TYPE`].
    PredicateType {
        /// The type found.
        actual: String,
    },
    /// A subject of the provider given is absent or has another digest, or
    /// the evidence names a subject the provider given does not have.
    Subject {
        /// Subject name.
        name: String,
        /// The provider's digest (`absent` when it has no such subject).
        expected: String,
        /// The evidence's digest (`absent` when it names none).
        actual: String,
    },
    /// The evidence's suite revision is not this checkfu's.
    SuiteRevision {
        /// The evidence's revision.
        actual: String,
    },
    /// The envelope's claims exceed the enrollment ceiling in a way that
    /// cannot be cut down (the runtime's refusal).
    Ceiling {
        /// `SandboxProtocolInvalid{operation: enrollment_ceiling, ...}` or
        /// the cut envelope's broken cross-field rule.
        error: SandboxError,
    },
    /// A case whose tokens the envelope all claims did not pass.
    ClaimNotPassed {
        /// The claimed token.
        token: Token,
        /// The case.
        case: String,
        /// Its outcome (`skipped`, `failed`, `timed_out`, or `absent`).
        outcome: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Malformed { what } => write!(f, "malformed evidence: {what}"),
            Reason::Signature { key_id } => {
                write!(f, "signature: no signature verifies under key {key_id}")
            }
            Reason::PayloadType { actual } => {
                write!(f, "payloadType: expected {PAYLOAD_TYPE}, actual {actual}")
            }
            Reason::StatementType { actual } => {
                write!(f, "_type: expected {STATEMENT_TYPE}, actual {actual}")
            }
            Reason::PredicateType { actual } => {
                write!(f, "predicateType: expected {PREDICATE_TYPE}, actual {actual}")
            }
            Reason::Subject {
                name,
                expected,
                actual,
            } => write!(
                f,
                "subject {name}: the provider given has sha256 {expected}, the evidence has {actual}"
            ),
            Reason::SuiteRevision { actual } => write!(
                f,
                "suite_revision: expected {SUITE_REVISION}, actual {actual}"
            ),
            Reason::Ceiling { error } => write!(f, "ceiling: {error}"),
            Reason::ClaimNotPassed {
                token,
                case,
                outcome,
            } => write!(
                f,
                "claimed token {token}: case {case} must pass, outcome {outcome}"
            ),
        }
    }
}

/// The tokens `envelope` claims: every token it backs.
pub fn claimed_tokens(envelope: &SandboxProviderCapabilities) -> Vec<Token> {
    Token::ALL
        .into_iter()
        .filter(|t| t.backed_by(envelope).is_ok())
        .collect()
}

/// Verifies the DSSE file `bytes` under `key` against the provider given:
/// its code and its live `envelope`. Returns the statement when every check
/// holds.
///
/// Checks, all of them run: the signature; the payload, statement and
/// predicate types; the subjects equal the provider's exactly (by name and
/// SHA-256); the suite revision is [`SUITE_REVISION`]; every case whose
/// tokens the envelope all claims ([`claimed_tokens`]) passed.
///
/// # Errors
/// Every [`Reason`] found, in the order above.
pub fn verify(
    bytes: &[u8],
    key: &VerifyingKey,
    code: &Code,
    envelope: &SandboxProviderCapabilities,
) -> Result<Statement, Vec<Reason>> {
    let dsse: Envelope = match serde_json::from_slice(bytes) {
        Ok(e) => e,
        Err(e) => {
            return Err(vec![Reason::Malformed {
                what: format!("not a DSSE envelope: {e}"),
            }])
        }
    };
    let mut reasons = Vec::new();
    if !dsse.verified_by(key) {
        reasons.push(Reason::Signature {
            key_id: crate::keys::key_id(key),
        });
    }
    if dsse.payload_type != PAYLOAD_TYPE {
        reasons.push(Reason::PayloadType {
            actual: dsse.payload_type.clone(),
        });
    }
    let statement: Statement = match dsse
        .payload_bytes()
        .and_then(|p| serde_json::from_slice(&p).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(what) => {
            reasons.push(Reason::Malformed {
                what: format!("payload: {what}"),
            });
            return Err(reasons);
        }
    };
    if statement.statement_type != STATEMENT_TYPE {
        reasons.push(Reason::StatementType {
            actual: statement.statement_type.clone(),
        });
    }
    if statement.predicate_type != PREDICATE_TYPE {
        reasons.push(Reason::PredicateType {
            actual: statement.predicate_type.clone(),
        });
    }
    reasons.extend(subject_reasons(
        &subjects(code, envelope),
        &statement.subject,
    ));
    let evidence = &statement.predicate.evidence;
    if evidence.suite_revision != SUITE_REVISION {
        reasons.push(Reason::SuiteRevision {
            actual: evidence.suite_revision.clone(),
        });
    }
    let claimed = claimed_tokens(envelope);
    for info in CASES
        .iter()
        .filter(|c| c.requires.iter().all(|t| claimed.contains(t)))
    {
        let record = evidence.cases.iter().find(|c| c.id == info.id);
        if record.map(|c| c.outcome) != Some(Outcome::Passed) {
            // Name the claimed token the skip was recorded for, else the
            // case's first.
            let token = record
                .and_then(|c| c.missing_tokens.first().copied())
                .unwrap_or(info.requires[0]);
            reasons.push(Reason::ClaimNotPassed {
                token,
                case: info.id.to_owned(),
                outcome: record.map_or("absent", |c| c.outcome.as_str()).to_owned(),
            });
        }
    }
    if reasons.is_empty() {
        Ok(statement)
    } else {
        Err(reasons)
    }
}

fn subject_reasons(expected: &[Subject], actual: &[Subject]) -> Vec<Reason> {
    let digest = |list: &[Subject], name: &str| {
        list.iter()
            .find(|s| s.name == name)
            .map(|s| s.sha256_hex().unwrap_or("absent").to_owned())
    };
    let mut names: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
    for s in actual {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let e = digest(expected, name);
            let a = digest(actual, name);
            (e != a).then(|| Reason::Subject {
                name: name.to_owned(),
                expected: e.unwrap_or_else(|| "absent".into()),
                actual: a.unwrap_or_else(|| "absent".into()),
            })
        })
        .collect()
}

/// What `checkfu sandbox add` checks before it enrolls a provider: the
/// evidence verifies ([`verify`]: it covers every claim) and the envelope
/// fits under `ceiling` once cut down. Returns the statement and every
/// claim the ceiling cuts.
///
/// # Errors
/// Every [`Reason`] found; a ceiling refusal is [`Reason::Ceiling`].
pub fn admit(
    bytes: &[u8],
    key: &VerifyingKey,
    code: &Code,
    envelope: &SandboxProviderCapabilities,
    ceiling: &Ceiling,
) -> Result<(Statement, Vec<Cut>), Vec<Reason>> {
    let verified = verify(bytes, key, code, envelope);
    let cut = intersect(envelope, ceiling);
    match (verified, cut) {
        (Ok(statement), Ok((_, cuts))) => Ok((statement, cuts)),
        (verified, cut) => {
            let mut reasons = verified.err().unwrap_or_default();
            if let Err(error) = cut {
                reasons.push(Reason::Ceiling { error });
            }
            Err(reasons)
        }
    }
}
