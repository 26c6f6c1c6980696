//! The conformance suite's side of a host-side target (feature
//! `conformance`): the tokens it declares, its live objects, its state
//! directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

use checkfu_sandbox_conformance::{LiveObjects, TargetError, Token};

use super::remove_state_dir;
use crate::errors::chain;
use crate::sweep_rule::ObjectTimes;

/// The tokens a host-side provider declares: filesystem, process,
/// snapshot, network-none, zdr and cleanup, and network-allowlist when
/// the host lets it enforce an allowlist.
pub fn declared_tokens(allowlist_enforced: bool) -> BTreeSet<Token> {
    [
        Token::Filesystem,
        Token::Process,
        Token::Snapshot,
        Token::NetworkNone,
        Token::Zdr,
        Token::Cleanup,
    ]
    .into_iter()
    .chain(allowlist_enforced.then_some(Token::NetworkAllowlist))
    .collect()
}

/// A provider's inventory as the suite's live objects.
pub fn live_objects(
    instances: BTreeMap<String, ObjectTimes>,
    snapshots: BTreeMap<String, ObjectTimes>,
) -> LiveObjects {
    LiveObjects {
        instances: instances.into_keys().collect(),
        snapshots: snapshots.into_keys().collect(),
    }
}

/// A fresh state directory `<prefix><random>` in the host's temporary
/// directory, removed when the guard drops.
///
/// # Errors
///
/// [`TargetError::Platform`] of `state directory` when it cannot be
/// created.
pub fn fresh_state_dir(prefix: &str) -> Result<tempfile::TempDir, TargetError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| TargetError::platform("state directory", chain(&e)))
}

/// The end of a target's close: its state directory `path` is removed
/// (a failure joins `problems`) and its guard forgotten (nothing is left
/// for it to remove); then `problems`, if any, as the leftovers.
///
/// # Errors
///
/// [`TargetError::Leftovers`] naming everything that could not be removed.
pub fn close_state_dir(
    path: &Path,
    guard: &Mutex<Option<tempfile::TempDir>>,
    mut problems: Vec<String>,
) -> Result<(), TargetError> {
    problems.extend(remove_state_dir(path));
    drop(guard.lock().unwrap_or_else(|e| e.into_inner()).take());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(TargetError::Leftovers(problems))
    }
}
