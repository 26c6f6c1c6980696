//! `checkfu sandbox test` on the memory oracle and on Docker (gated).

mod common;

use common::*;

#[test]
fn memory_suite_passes_and_an_injected_fault_fails_it() {
    let o = output(checkfu().args(["sandbox", "test"]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("9 passed, 0 failed"),
        "{}",
        describe(&o)
    );
    let o = output(checkfu().args(["sandbox", "test", "--inject", "clone-reuses-source-id"]));
    assert_eq!(code(&o), 1, "{}", describe(&o));
    let o = output(checkfu().args(["sandbox", "test", "--inject", "no-such-fault"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
}

#[test]
fn docker_suite_passes_with_one_recorded_skip() {
    let Some(env) = docker("docker_suite") else {
        return;
    };
    let o = output(env.checkfu().args([
        "sandbox",
        "test",
        "--provider",
        "docker",
        "--case",
        "stage-seal-execute",
        "--case",
        "allowlist-egress",
        "--case",
        "zdr-release",
    ]));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("2 passed, 0 failed, 1 skipped"),
        "{}",
        describe(&o)
    );
    assert!(
        !stderr(&o).contains("closing the docker target"),
        "{}",
        describe(&o)
    );
    env.finish();
}
