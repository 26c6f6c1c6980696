//! The suite against the real kernel: eight passes, allowlist-egress
//! recorded as a skip, and nothing of the target's scope left afterwards
//! (no instance, snapshot, cgroup, process, host mount or state
//! directory; namespaces die with the processes that hold them).
//!
//! Gate: without root the test prints a `SKIP` line and returns, except
//! under `CI=true`, where it fails.

// The test checks, by path and from outside, that the state directory
// the target created is gone.
#![allow(clippy::disallowed_methods)]

mod common;

use std::sync::Arc;

use checkfu_sandbox_conformance::*;
use checkfu_sandbox_linux::conformance::LinuxTarget;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linux_passes_eight_skips_allowlist_and_leaves_nothing() {
    if !common::available_or_skip("linux_passes_eight_skips_allowlist_and_leaves_nothing") {
        return;
    }
    let target = Arc::new(
        LinuxTarget::new(&common::busybox(), &mut |line| eprintln!("fixture: {line}"))
            .await
            .expect("linux target"),
    );
    let scope = target.scope().to_owned();
    let state_dir = target.linux_provider().state_dir().to_path_buf();
    let progress = |p: Progress<'_>| {
        if let Progress::Finished { record, .. } = p {
            eprintln!(
                "{:<20} {:?} {} ms {:?}",
                record.id, record.outcome, record.duration_ms, record.failure
            );
        }
    };
    let evidence = run_suite(target.clone(), &SuiteOptions::default(), &progress).await;
    // No mount of an instance reached the host's mount table.
    assert_eq!(common::host_mounts_under(&state_dir), Vec::<String>::new());
    let closed = target.close().await;
    let evidence = evidence.expect("suite starts");
    eprintln!("{}", evidence.table());
    closed.expect("target closes cleanly");

    assert_eq!(evidence.summary.passed, 8, "{}", evidence.table());
    assert_eq!(evidence.summary.skipped, 1, "{}", evidence.table());
    let skipped = evidence
        .cases
        .iter()
        .find(|c| c.outcome == Outcome::Skipped)
        .expect("one skip");
    assert_eq!(skipped.id, "allowlist-egress");
    assert_eq!(skipped.missing_tokens, vec![Token::NetworkAllowlist]);

    assert!(
        !state_dir.exists(),
        "state directory {} left",
        state_dir.display()
    );
    assert_eq!(
        common::scope_cgroups(&scope),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(common::processes_in_scope(&scope), Vec::<i32>::new());
}
