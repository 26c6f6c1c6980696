//! Every command has `--help` with an example; completions for three shells.

mod common;

use common::*;

#[test]
fn every_command_has_help_with_an_example() {
    let commands: [&[&str]; 10] = [
        &[],
        &["sandbox"],
        &["sandbox", "test"],
        &["sandbox", "run"],
        &["sandbox", "capabilities"],
        &["sandbox", "cleanup"],
        &["sandbox", "fixture"],
        &["sandbox", "faults"],
        &["sandbox", "schema"],
        &["completions"],
    ];
    for cmd in commands {
        let o = output(checkfu().args(cmd).arg("--help"));
        assert_eq!(code(&o), 0, "{cmd:?}: {}", describe(&o));
        let text = stdout(&o);
        assert!(
            text.contains("Example"),
            "{cmd:?} help has no example:\n{text}"
        );
    }
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let o = output(checkfu().args(["completions", shell]));
        assert_eq!(code(&o), 0, "{shell}: {}", describe(&o));
        let text = stdout(&o);
        assert!(text.contains("checkfu"), "{shell}");
        assert!(text.contains("capabilities"), "{shell}");
    }
    let o = output(checkfu().args(["completions", "tcsh"]));
    assert_eq!(code(&o), 2, "{}", describe(&o));
}

#[test]
fn rust_log_turns_tracing_on() {
    let o = output(
        checkfu()
            .env("RUST_LOG", "checkfu=info")
            .args(["sandbox", "run", "--image", "demo:1", "--", "true"]),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(stderr(&o).contains("provisioned"), "{}", describe(&o));
    let o = output(checkfu().args(["sandbox", "run", "--image", "demo:1", "--", "true"]));
    assert!(
        !stderr(&o).contains("provisioned"),
        "tracing is off by default"
    );
}
