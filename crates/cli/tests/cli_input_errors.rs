//! Inputs a new user gets wrong: each is refused with one line naming the
//! flag and the value, with the exit status of decision 008 (2 for a flag
//! value that is not well-formed, 125 for a refusal by the provider or the
//! host), and nothing runs.

mod common;

use common::*;

fn run_memory(args: &[&str]) -> std::process::Command {
    let mut c = checkfu();
    c.args([
        "sandbox",
        "run",
        "--provider",
        "memory",
        "--image",
        "demo:1",
    ])
    .args(args);
    c
}

/// One line on stderr, exit `want`, and every `needles` in the line.
fn refused(o: &std::process::Output, want: i32, needles: &[&str]) {
    assert_eq!(code(o), want, "{}", describe(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line: {}", describe(o));
    for n in needles {
        assert!(err.contains(n), "{n:?} missing: {}", describe(o));
    }
    assert_eq!(stdout(o), "", "nothing ran: {}", describe(o));
}

#[test]
fn an_env_key_outside_the_contract_is_a_usage_error_naming_it() {
    for (flag, key) in [("1A=x", "\"1A\""), ("=x", "\"\""), ("A-B=x", "\"A-B\"")] {
        let o = output(run_memory(&["--env", flag, "--", "true"]));
        refused(&o, 2, &[&format!("--env {flag}"), key, "[A-Za-z_]"]);
    }
}

#[test]
fn a_workdir_that_is_relative_or_has_dot_dot_is_a_usage_error() {
    for dir in ["rel/dir", "/a/../b", "/a/./b", "/a//b", "/a/"] {
        let o = output(run_memory(&["--workdir", dir, "--", "true"]));
        refused(&o, 2, &[&format!("--workdir {dir}")]);
    }
}

#[test]
fn a_timeout_of_zero_or_out_of_range_is_a_usage_error_naming_the_range() {
    let o = output(run_memory(&["--timeout", "0", "--", "true"]));
    refused(&o, 2, &["--timeout 0", "from 1 to 4294967295"]);
    for value in ["0", "4294967296", "1.5", "x"] {
        let o = output(run_memory(&["--timeout", value, "--", "true"]));
        assert_eq!(code(&o), 2, "--timeout {value}: {}", describe(&o));
        let err = stderr(&o);
        assert!(err.contains("--timeout"), "{}", describe(&o));
        assert!(err.contains(value), "{}", describe(&o));
        assert!(err.contains("from 1 to 4294967295"), "{}", describe(&o));
        assert!(!err.contains("0..="), "{}", describe(&o));
    }
}

#[test]
fn a_malformed_image_is_a_usage_error_naming_it() {
    for image in [
        "Demo:1",
        "demo:",
        "demo@sha256:abc",
        "demo@sha1:0000000000000000000000000000000000000000",
        "sha256:xyz",
        "with space",
        "",
        "demo:-x",
    ] {
        let mut c = checkfu();
        c.args(["sandbox", "run", "--provider", "memory", "--image", image])
            .args(["--", "true"]);
        let o = output(c);
        refused(&o, 2, &[&format!("--image {image}:"), "name@sha256:"]);
    }
    // Well-formed references are not refused as usage errors.
    let hex = "0".repeat(64);
    for image in [
        "demo:1".to_owned(),
        "registry.example:5000/team/demo:v1.2".to_owned(),
        format!("demo@sha256:{hex}"),
    ] {
        let mut c = checkfu();
        c.args(["sandbox", "run", "--provider", "memory", "--image", &image])
            .args(["--", "true"]);
        let o = output(c);
        assert_ne!(code(&o), 2, "--image {image}: {}", describe(&o));
    }
}

#[test]
fn a_mount_destination_given_twice_is_a_usage_error_naming_both() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let first = format!("{}:/data", a.path().display());
    let second = format!("{}:/data:ro", b.path().display());
    let o = output(run_memory(&[
        "--mount", &first, "--mount", &second, "--", "true",
    ]));
    refused(
        &o,
        2,
        &[
            &format!("--mount {second}"),
            &format!("--mount {first}"),
            "/data",
        ],
    );
}

/// Exit `want` after the pinned image's line, the refusal being the one
/// line after it with every `needles`.
fn refused_after_pin(o: &std::process::Output, want: i32, needles: &[&str]) {
    assert_eq!(code(o), want, "{}", describe(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{}", describe(o));
    assert!(lines[0].starts_with("checkfu: image "), "{}", describe(o));
    for n in needles {
        assert!(lines[1].contains(n), "{n:?} missing: {}", describe(o));
    }
    assert_eq!(stdout(o), "", "nothing ran: {}", describe(o));
}

#[test]
fn an_unenforced_limit_names_the_limit_and_both_values() {
    let o = output(run_memory(&["--memory", "512M", "--", "true"]));
    refused_after_pin(
        &o,
        125,
        &[
            "requirement resources",
            "resources.memory_bytes",
            "536870912",
            "provider memory",
            "not_enforced",
        ],
    );
    let o = output(run_memory(&["--cpus", "1.5", "--", "true"]));
    refused_after_pin(&o, 125, &["resources.cpu_millis", "1500", "not_enforced"]);
}

#[test]
fn fixture_with_a_missing_busybox_is_an_error_naming_the_path() {
    let state = tempfile::tempdir().unwrap();
    for provider in ["docker", "linux"] {
        let o = output(
            checkfu()
                .args(["sandbox", "fixture", "--provider", provider])
                .args(["--busybox", "/nonexistent/busybox"])
                .env("CHECKFU_STATE_DIR", state.path()),
        );
        refused(&o, 125, &["--busybox /nonexistent/busybox", "No such file"]);
    }
}

#[test]
fn image_import_failures_are_one_line_without_a_fixture_label_or_repetition() {
    let state = tempfile::tempdir().unwrap();
    let o = output(
        checkfu()
            .args(["sandbox", "image", "import", "/nonexistent/image.tar"])
            .env("CHECKFU_STATE_DIR", state.path()),
    );
    refused(&o, 125, &["image import", "/nonexistent/image.tar"]);
    let err = stderr(&o);
    assert!(!err.contains("fixture"), "{}", describe(&o));
    assert_eq!(
        err.matches("/nonexistent/image.tar").count(),
        1,
        "the path once: {}",
        describe(&o)
    );
    assert!(
        err.matches("No such file").count() <= 1,
        "the cause once: {}",
        describe(&o)
    );
}

#[test]
fn remove_refuses_an_empty_id_as_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("providers.toml");
    let o = output(
        checkfu()
            .args(["sandbox", "remove", ""])
            .arg("--providers")
            .arg(&registry),
    );
    refused(&o, 2, &["remove", "id \"\""]);
    assert!(!registry.exists(), "no registry written");
}

#[test]
fn registry_and_image_help_show_examples_with_pinned_references() {
    for cmd in [
        &["sandbox", "add", "--help"][..],
        &["sandbox", "list", "--help"],
        &["sandbox", "remove", "--help"],
        &["sandbox", "image", "--help"],
        &["sandbox", "image", "import", "--help"],
    ] {
        let o = output(checkfu().args(cmd));
        assert_eq!(code(&o), 0, "{cmd:?}: {}", describe(&o));
        assert!(
            stdout(&o).contains("Examples:"),
            "{cmd:?}: {}",
            describe(&o)
        );
        for line in stdout(&o).lines().filter(|l| l.contains("--image ")) {
            assert!(line.contains("@sha256:"), "{cmd:?}: a tag in {line:?}");
        }
    }
}
