//! Shared helpers for the tests that need the real Docker daemon, from
//! `checkfu-test-support`.
//!
//! Gate: when no daemon answers, a test prints a `SKIP` line and returns,
//! except under `CI=true`, where it fails. Every test labels what it
//! creates with a label unique to the test, and [`Cleanup`] removes and then
//! checks that nothing with that label remains (also when the test panics).

#![allow(dead_code, unused_imports)] // each test file uses a different subset

use bollard::Docker;

pub use checkfu_test_support::docker::{fixture_ref, start_container, unique, Cleanup, TEST_LABEL};
pub use checkfu_test_support::gate::docker_or_skip;

/// Prints why `test` is skipped and returns `None`; under `CI=true` it
/// panics instead.
pub fn skip_or_fail(test: &str, why: &str) -> Option<Docker> {
    checkfu_test_support::gate::skip_or_fail(test, why);
    None
}

pub mod egress_lab;
pub mod provider_env;
