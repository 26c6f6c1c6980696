//! The in-toto Statement v1 that carries conformance evidence, and signing
//! it into a DSSE envelope.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::conformance::evidence::{Evidence, Outcome};
use checkfu_sandbox_contract::conformance::token::Token;
use ed25519_dalek::SigningKey;
use serde::{Deserialize, Serialize};

use crate::dsse::Envelope;
use crate::subject::Subject;

/// The DSSE payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The in-toto Statement v1 type URI.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our predicate type: checkfu sandbox-provider conformance evidence,
/// version 1 (decision 014).
pub const PREDICATE_TYPE: &str = "https://checkfu.dev/attestations/sandbox-conformance/v1";

/// An in-toto Statement v1 over conformance evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Statement {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The provider: its code and its envelope (see [`crate::subject`]).
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    pub predicate_type: String,
    /// The evidence.
    pub predicate: Predicate,
}

/// The predicate: the suite's evidence document plus who produced it and
/// when, and each skip listed under the token whose absence caused it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    /// The `checkfu` version that ran the suite.
    pub checkfu_version: String,
    /// When the suite finished (canonical UTC).
    pub finished_at: String,
    /// Per missing token, the ids of the cases skipped for it.
    pub skipped_by_token: BTreeMap<Token, Vec<String>>,
    /// The suite's evidence: suite revision, envelope, declared tokens,
    /// each case's outcome and time, summary.
    pub evidence: Evidence,
}

impl Predicate {
    /// The predicate for `evidence`, produced by `checkfu_version`.
    pub fn new(evidence: Evidence, checkfu_version: &str, finished_at: String) -> Predicate {
        let mut skipped_by_token: BTreeMap<Token, Vec<String>> = BTreeMap::new();
        for case in &evidence.cases {
            if case.outcome == Outcome::Skipped {
                for t in &case.missing_tokens {
                    skipped_by_token
                        .entry(*t)
                        .or_default()
                        .push(case.id.clone());
                }
            }
        }
        Predicate {
            checkfu_version: checkfu_version.to_owned(),
            finished_at,
            skipped_by_token,
            evidence,
        }
    }
}

impl Statement {
    /// A statement about `subject` carrying `predicate`.
    pub fn new(subject: Vec<Subject>, predicate: Predicate) -> Statement {
        Statement {
            statement_type: STATEMENT_TYPE.to_owned(),
            subject,
            predicate_type: PREDICATE_TYPE.to_owned(),
            predicate,
        }
    }

    /// The statement signed into a DSSE envelope with [`PAYLOAD_TYPE`].
    pub fn sign(&self, key: &SigningKey) -> Envelope {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        Envelope::sign(PAYLOAD_TYPE, &payload, key)
    }
}
