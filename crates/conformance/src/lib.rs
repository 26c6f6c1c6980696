//! The nine conformance cases as a library (spec "Conformance"; DESIGN
//! D14, D15).
//!
//! A [`ConformanceTarget`] supplies a provider, the tokens it declares, a
//! root image and network hooks. [`run_suite`] checks every declared token
//! against the envelope (claiming what the envelope cannot back is an
//! error, not a pass), records a skip by name for every case whose tokens
//! are missing, runs the rest through the runtime under their own
//! deadlines, tears down what each case created (last first) and checks
//! that nothing of its own is left. The result is [`Evidence`]: JSON, JUnit
//! XML, and a table.

pub mod cases;
pub use checkfu_sandbox_contract::conformance::{evidence, token};
pub mod context;
pub mod faults;
pub mod git;
pub mod junit;
pub mod scratch;
pub mod suite;
pub mod target;

pub use evidence::{
    CaseFailure, CaseRecord, Evidence, Outcome, ProviderCommand, Summary, SUITE_REVISION,
};
pub use junit::junit_xml;
pub use suite::{envelope_sha256, run_suite, Progress, SuiteError, SuiteOptions};
pub use target::{ConformanceTarget, Listener, LiveObjects, TargetError};
pub use token::{case, missing, CaseInfo, Token, UnbackedToken, CASES};
