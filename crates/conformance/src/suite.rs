//! Running the suite: token checks, recorded skips, per-case deadlines,
//! teardown, evidence.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::wire::WIRE_REVISION;
use checkfu_sandbox_runtime::{Enrollment, SandboxRuntime};

use crate::cases::run_case;
use crate::context::{fail, Ctx};
use crate::evidence::{CaseFailure, CaseRecord, Evidence, Outcome, Summary, SUITE_REVISION};
use crate::target::ConformanceTarget;
use crate::token::{missing, CaseInfo, Token, CASES};

/// Suite options.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Run only these case ids (all when empty).
    pub cases: Vec<String>,
    /// Each case's own deadline.
    pub case_deadline: Duration,
    /// Faults injected into the provider, recorded in the evidence.
    pub injected_faults: Vec<String>,
    /// An enrolled provider's enrollment: the suite refuses a live
    /// envelope that drifted from the enrolled one and runs against the
    /// live envelope cut down to the ceiling, the envelope `run` and
    /// `capabilities` use (`SandboxRuntime::register_enrolled`). `None`
    /// tests the envelope the provider declares.
    pub enrollment: Option<Enrollment>,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            cases: Vec::new(),
            case_deadline: Duration::from_secs(180),
            injected_faults: Vec::new(),
            enrollment: None,
        }
    }
}

/// Live progress: a case started, or finished with its record.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// The case is starting (`index` of `total`, from 1).
    Started {
        /// Position, from 1.
        index: usize,
        /// Cases in this run.
        total: usize,
        /// The case.
        case: &'a CaseInfo,
    },
    /// The case finished.
    Finished {
        /// Position, from 1.
        index: usize,
        /// Cases in this run.
        total: usize,
        /// Its record.
        record: &'a CaseRecord,
    },
}

/// Why a suite could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuiteError {
    /// A `--case` id that is not one of the nine.
    #[error("unknown case {0:?}; the cases are: {1}")]
    UnknownCase(String, String),
    /// The provider's envelope failed its own rules.
    #[error("the provider's envelope is invalid: {0}")]
    InvalidEnvelope(String),
    /// An enrolled provider's live envelope differs from its enrolled one,
    /// or a claim cannot be cut down to its ceiling (the runtime's error,
    /// naming the field and both values).
    #[error("the provider does not match its enrollment: {0}")]
    Enrollment(String),
}

/// Runs the selected cases against `target`, in the spec's order.
///
/// A declared token the envelope cannot back does not stop the suite: every
/// case requiring it fails (step `declared tokens`, naming the token and
/// what the envelope lacks) without running, and the other cases run
/// ("declare and fail", spec "Conformance").
///
/// # Errors
/// [`SuiteError`] before any case runs: an unknown case id, an invalid
/// envelope, or an enrolled provider whose envelope drifted
/// ([`SuiteOptions::enrollment`]).
pub async fn run_suite(
    target: Arc<dyn ConformanceTarget>,
    options: &SuiteOptions,
    progress: &(dyn Fn(Progress<'_>) + Send + Sync),
) -> Result<Evidence, SuiteError> {
    for id in &options.cases {
        if !CASES.iter().any(|c| c.id == id) {
            let all: Vec<&str> = CASES.iter().map(|c| c.id).collect();
            return Err(SuiteError::UnknownCase(id.clone(), all.join(", ")));
        }
    }
    let provider = target.provider();
    let mut runtime = SandboxRuntime::new(target.clock());
    runtime
        .register_as(provider.clone(), options.enrollment.as_ref())
        .map_err(|e| SuiteError::Enrollment(e.to_string()))?;
    let adapter = runtime
        .adapter(provider.provider_id())
        .map_err(|f| SuiteError::InvalidEnvelope(f.to_string()))?;
    // The envelope the cases run against: the declared one, or for an
    // enrolled provider the live one cut down to its ceiling.
    let envelope = adapter.envelope().clone();
    let declared: BTreeSet<Token> = target.declared_tokens();
    let unbacked: BTreeMap<Token, &'static str> = declared
        .iter()
        .filter_map(|t| t.backed_by(&envelope).err())
        .map(|e| (e.token, e.needs))
        .collect();
    let started_at = target.clock().now().to_string();
    let selected: Vec<&CaseInfo> = CASES
        .iter()
        .filter(|c| options.cases.is_empty() || options.cases.iter().any(|id| id == c.id))
        .collect();
    let total = selected.len();
    let mut records = Vec::with_capacity(total);
    let mut summary = Summary::default();
    for (i, case) in selected.into_iter().enumerate() {
        progress(Progress::Started {
            index: i + 1,
            total,
            case,
        });
        let record = match unbacked_failure(case, &unbacked) {
            Some(failure) => CaseRecord {
                id: case.id.into(),
                requires: case.requires.to_vec(),
                outcome: Outcome::Failed,
                missing_tokens: Vec::new(),
                duration_ms: 0,
                failure: Some(failure),
            },
            None => run_one(case, &declared, &adapter, &target, options.case_deadline).await,
        };
        match record.outcome {
            Outcome::Passed => summary.passed += 1,
            Outcome::Failed => summary.failed += 1,
            Outcome::Skipped => summary.skipped += 1,
            Outcome::TimedOut => summary.timed_out += 1,
        }
        progress(Progress::Finished {
            index: i + 1,
            total,
            record: &record,
        });
        records.push(record);
    }
    Ok(Evidence {
        suite_revision: SUITE_REVISION.into(),
        wire_revision: WIRE_REVISION.into(),
        target: target.name().to_owned(),
        provider: provider.provider_id().to_owned(),
        provider_revision: envelope.provider_revision.clone(),
        materialization_revision: envelope.materialization_revision.clone(),
        envelope_sha256: envelope_sha256(&envelope),
        envelope,
        provider_command: None,
        declared_tokens: declared.into_iter().collect(),
        injected_faults: options.injected_faults.clone(),
        started_at,
        cases: records,
        summary,
    })
}

/// `sha256:<hex>` of the canonical JSON of `envelope`'s wire form
/// ([`crate::evidence::canonical_json`]).
pub fn envelope_sha256(envelope: &checkfu_sandbox_contract::SandboxProviderCapabilities) -> String {
    use sha2::Digest;
    let value = serde_json::to_value(envelope).unwrap_or_default();
    let digest = sha2::Sha256::digest(crate::evidence::canonical_json(&value).as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

/// The failure of a case that requires a declared token the envelope
/// cannot back, if it does.
fn unbacked_failure(
    case: &CaseInfo,
    unbacked: &BTreeMap<Token, &'static str>,
) -> Option<CaseFailure> {
    let lacking: Vec<String> = case
        .requires
        .iter()
        .filter_map(|t| {
            unbacked.get(t).map(|needs| {
                format!("declared token {t} is not backed by the envelope: it needs {needs}")
            })
        })
        .collect();
    (!lacking.is_empty()).then(|| fail("declared tokens", lacking.join("; ")))
}

async fn run_one(
    case: &'static CaseInfo,
    declared: &BTreeSet<Token>,
    adapter: &checkfu_sandbox_runtime::Adapter,
    target: &Arc<dyn ConformanceTarget>,
    deadline: Duration,
) -> CaseRecord {
    let start = Instant::now();
    let lacking = missing(case.requires, declared);
    if !lacking.is_empty() {
        return CaseRecord {
            id: case.id.into(),
            requires: case.requires.to_vec(),
            outcome: Outcome::Skipped,
            missing_tokens: lacking,
            duration_ms: 0,
            failure: None,
        };
    }
    let ctx = Ctx::new(adapter.clone(), target.clone(), case.id);
    let body = tokio::time::timeout(deadline, run_case(case.id, &ctx)).await;
    let teardown = ctx.teardown().await;
    let (outcome, failure): (Outcome, Option<CaseFailure>) = match (body, teardown) {
        (Ok(Ok(())), Ok(())) => (Outcome::Passed, None),
        (Ok(Ok(())), Err(leak)) => (Outcome::Failed, Some(leak)),
        (Ok(Err(f)), _) => (Outcome::Failed, Some(f)),
        (Err(_), _) => (
            Outcome::TimedOut,
            Some(fail(
                "case deadline",
                format!("did not finish within {} s", deadline.as_secs()),
            )),
        ),
    };
    CaseRecord {
        id: case.id.into(),
        requires: case.requires.to_vec(),
        outcome,
        missing_tokens: Vec::new(),
        duration_ms: start.elapsed().as_millis() as u64,
        failure,
    }
}
