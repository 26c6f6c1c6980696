//! `checkfu sandbox cleanup` flags and the memory oracle (Docker sweeps are
//! exercised in `cli_run_docker.rs`, where a durable run leaves a snapshot
//! to sweep).

mod common;

use common::*;

#[test]
fn memory_cleanup_has_nothing_to_sweep() {
    for extra in [&[][..], &["--dry-run"][..], &["--older-than", "30m"][..]] {
        let o = output(checkfu().args(["sandbox", "cleanup"]).args(extra));
        assert_eq!(code(&o), 0, "{}", describe(&o));
        assert_eq!(stdout(&o), "");
        assert!(
            stderr(&o).contains("0 instance(s) and 0 snapshot(s)"),
            "{}",
            describe(&o)
        );
    }
}

#[test]
fn a_malformed_duration_is_a_usage_error() {
    let o = output(checkfu().args(["sandbox", "cleanup", "--older-than", "1w"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
    assert!(stderr(&o).contains("--older-than"), "{}", describe(&o));
}

#[test]
fn docker_cleanup_dry_run_on_an_empty_scope() {
    let Some(env) = docker("docker_cleanup_empty") else {
        return;
    };
    let o = output(
        env.checkfu()
            .args(["sandbox", "cleanup", "--provider", "docker", "--dry-run"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "");
    env.finish();
}
