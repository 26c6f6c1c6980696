//! What the host-side providers' conformance targets share: their scope
//! names (`conf-<pid>-<n>`), the sweep of a scope through the provider's
//! own cleanup, the running of that sweep where no runtime may be
//! awaited (a target's `Drop`), and the removal of the state directories
//! a target leaves in the temporary directory.
//!
//! The parts that speak the conformance suite's types (tokens, live
//! objects, target errors, the state directory guard) are in [`suite`],
//! compiled with this crate's feature `conformance` only, so that a
//! provider without its own `conformance` feature does not pull the suite
//! in.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use checkfu_sandbox_contract::{CleanupRequest, Clock, SandboxProvider, SystemClock, Timestamp};

#[cfg(feature = "conformance")]
pub mod suite;

/// The prefix of every conformance target's scope (`conf-<pid>-<n>`).
pub const CONFORMANCE_SCOPE_PREFIX: &str = "conf-";

static TARGET_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A scope no other target of any process holds now: `conf-<pid>-<n>`,
/// `n` counting the targets this process made.
pub fn fresh_scope() -> String {
    format!(
        "{CONFORMANCE_SCOPE_PREFIX}{}-{}",
        std::process::id(),
        TARGET_COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A cutoff later than every object of a live scope (a century from
/// now): the provider's cleanup with it sweeps everything.
pub fn far_future() -> Timestamp {
    SystemClock.now().add_seconds(100 * 365 * 86_400)
}

/// Runs `provider`'s cleanup with a [`far_future`] cutoff for both
/// `now` and `orphaned_before` and no pinned snapshot: every instance and
/// snapshot of its scope is swept. The failure as a line
/// (`provider cleanup: <error>`).
pub async fn cleanup_everything<P: SandboxProvider + ?Sized>(provider: &P) -> Option<String> {
    let cutoff = far_future();
    provider
        .cleanup(CleanupRequest {
            now: cutoff,
            orphaned_before: cutoff,
            pinned_snapshots: Vec::new(),
        })
        .await
        .err()
        .map(|e| format!("provider cleanup: {e}"))
}

/// Runs `sweep` to its end on a thread of its own with its own runtime and
/// waits for it: a `Drop` cannot await and may run inside a runtime. Best
/// effort (a runtime that cannot be built runs nothing).
pub fn run_to_end<F>(sweep: F)
where
    F: Future + Send + 'static,
{
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| {
                rt.block_on(sweep);
            })
    })
    .join();
}

/// Removes the directory `path` (already gone counts as removed). The
/// failure as a line (`state directory <path>: <error>`).
pub fn remove_state_dir(path: &Path) -> Option<String> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("state directory {}: {e}", path.display())),
    }
}

/// Removes every directory of the host's temporary directory whose name
/// starts with `prefix` (a target's `<prefix><suffix>` state directory).
/// One line per directory that could not be removed.
pub fn remove_state_dirs(prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    // The host's temporary directory, never a workload tree.
    #[allow(clippy::disallowed_methods)]
    let listed = std::fs::read_dir(std::env::temp_dir());
    if let Ok(dir) = listed {
        for e in dir.filter_map(Result::ok) {
            let is_state = e
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
                && e.file_type().is_ok_and(|t| t.is_dir());
            if is_state {
                if let Err(err) = std::fs::remove_dir_all(e.path()) {
                    problems.push(format!("state directory {}: {err}", e.path().display()));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_fresh_and_shaped() {
        let (a, b) = (fresh_scope(), fresh_scope());
        assert_ne!(a, b);
        let pid = std::process::id().to_string();
        for s in [&a, &b] {
            let rest = s.strip_prefix(CONFORMANCE_SCOPE_PREFIX).unwrap();
            let (p, n) = rest.split_once('-').unwrap();
            assert_eq!(p, pid);
            assert!(n.parse::<u64>().is_ok(), "{s}");
        }
    }

    // Test directories of the host's temporary directory, never a
    // workload tree.
    #[allow(clippy::disallowed_methods)]
    #[test]
    fn state_dirs_of_a_prefix_are_removed_and_others_kept() {
        let prefix = format!("checkfu-hostfs-test-{}-", fresh_scope());
        let mine = tempfile::Builder::new().prefix(&prefix).tempdir().unwrap();
        std::fs::write(mine.path().join("f"), b"x").unwrap();
        let other = tempfile::Builder::new()
            .prefix("checkfu-hostfs-other-")
            .tempdir()
            .unwrap();
        assert!(remove_state_dirs(&prefix).is_empty());
        assert!(std::fs::symlink_metadata(mine.path()).is_err());
        assert!(std::fs::symlink_metadata(other.path()).is_ok_and(|m| m.is_dir()));
        assert_eq!(remove_state_dir(mine.path()), None);
    }

    #[test]
    fn a_sweep_runs_to_its_end_on_its_own_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        run_to_end(async move {
            tokio::task::yield_now().await;
            tx.send(7).unwrap();
        });
        assert_eq!(rx.try_recv(), Ok(7));
    }
}
