//! The partner path with served providers: the scaffold `checkfu sandbox
//! init` writes runs under the suite at once (nine recorded skips, none
//! failed), its skips for claimed tokens fail verification, and an
//! enrolled id works as `--provider ID` under its ceiling, refused when
//! its live envelope drifted.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn checkfu_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_checkfu"))
}

fn python_available() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn init_python(dir: &Path) -> PathBuf {
    let o = output(
        checkfu()
            .args(["sandbox", "init", "--lang", "python"])
            .arg(dir),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    dir.join("provider.py")
}

#[test]
fn the_python_scaffold_runs_under_the_suite_with_every_case_a_recorded_skip() {
    assert!(
        python_available(),
        "python3 is needed for the scaffold test"
    );
    let tmp = tempfile::tempdir().unwrap();
    let provider = init_python(&tmp.path().join("acme"));
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--json", "-", "--provider-cmd"])
            .arg(&provider),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["provider"], "acme");
    assert_eq!(doc["summary"]["skipped"], 9, "{doc}");
    assert_eq!(doc["summary"]["failed"], 0, "{doc}");
    assert_eq!(doc["summary"]["timed_out"], 0, "{doc}");
    for case in doc["cases"].as_array().unwrap() {
        assert_eq!(case["outcome"], "skipped", "{case}");
        assert!(!case["missing_tokens"].as_array().unwrap().is_empty());
    }
    // A second init into the same directory overwrites nothing.
    let before = std::fs::read(&provider).unwrap();
    let o = output(
        checkfu()
            .args(["sandbox", "init", "--lang", "python"])
            .arg(tmp.path().join("acme")),
    );
    assert_one_line_failure(&o, 1, &["already exists"]);
    assert_eq!(std::fs::read(&provider).unwrap(), before);
}

#[test]
fn the_scaffolds_skips_for_claimed_tokens_fail_verification() {
    assert!(
        python_available(),
        "python3 is needed for the scaffold test"
    );
    let tmp = tempfile::tempdir().unwrap();
    let provider = init_python(&tmp.path().join("acme"));
    let keys = tmp.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence = tmp.path().join("acme.dsse.json");
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--provider-cmd"])
            .arg(&provider)
            .arg("--sign")
            .arg(keys.join("checkfu-signing.key.pem"))
            .arg("--evidence")
            .arg(&evidence),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let o = output(
        checkfu()
            .args(["sandbox", "verify", "--key"])
            .arg(keys.join("checkfu-signing.pub.pem"))
            .arg("--provider-cmd")
            .arg(&provider)
            .arg(&evidence),
    );
    assert_eq!(code(&o), 1, "{}", describe(&o));
    // The minimal envelope backs process and cleanup (they need no claim),
    // and the scaffold declares neither.
    let err = stderr(&o);
    assert!(
        err.contains("claimed token cleanup: case orphan-reclaim must pass, outcome skipped"),
        "{}",
        describe(&o)
    );
    assert!(!err.contains("subject"), "{}", describe(&o));
}

/// The memory oracle, tested in-process and signed, then enrolled as
/// `acme` over `checkfu sandbox serve` under an advisory egress ceiling.
fn enrolled(tmp: &Path) -> PathBuf {
    let keys = tmp.join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence = tmp.join("memory.dsse.json");
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--sign"])
            .arg(keys.join("checkfu-signing.key.pem"))
            .arg("--evidence")
            .arg(&evidence),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let ceiling = tmp.join("ceiling.toml");
    std::fs::write(&ceiling, "egress_certification = \"advisory_filter\"\n").unwrap();
    let registry = tmp.join("providers.toml");
    let o = output(
        checkfu()
            .args(["sandbox", "add", "--id", "acme", "--provider-cmd"])
            .arg(format!("{} sandbox serve", checkfu_exe().display()))
            .arg("--evidence")
            .arg(&evidence)
            .arg("--key")
            .arg(keys.join("checkfu-signing.pub.pem"))
            .arg("--ceiling")
            .arg(&ceiling)
            .arg("--providers")
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    registry
}

#[test]
fn an_enrolled_id_selects_the_provider_under_its_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = enrolled(tmp.path());
    let o = output(
        checkfu()
            .args(["sandbox", "capabilities", "--json", "--provider", "acme"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["capabilities"]["egress_certification"],
        "advisory_filter"
    );
    assert!(
        stderr(&o).contains("acme: cut: egress_certification"),
        "{}",
        describe(&o)
    );
    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider", "acme", "--image", "demo:1"])
            .args(["--", "sh", "-c", "exit 7"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 7, "{}", describe(&o));
}

/// `test --provider ID` runs the suite against the envelope `run` uses:
/// the live one cut down to the enrollment's ceiling.
#[test]
fn test_of_an_enrolled_id_runs_against_the_envelope_cut_to_its_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = enrolled(tmp.path());
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--json", "-", "--provider", "acme"])
            .args(["--case", "stage-seal-execute"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["envelope"]["egress_certification"], "advisory_filter",
        "{doc}"
    );
    assert!(
        stderr(&o).contains("acme: cut: egress_certification"),
        "{}",
        describe(&o)
    );
}

#[test]
fn an_enrolled_provider_whose_live_envelope_drifted_is_refused_naming_the_field() {
    // The same executable (so the same code subject) now serves the Docker
    // provider: its live envelope is not the one the evidence carries.
    let Some(env) = docker("enrolled_envelope_drift") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let registry = enrolled(tmp.path());
    let text = std::fs::read_to_string(&registry).unwrap();
    let start = text.find("command = [").unwrap();
    let end = start + text[start..].find(']').unwrap() + 1;
    let edited = format!(
        "{}command = [{:?}, \"sandbox\", \"serve\", \"--provider\", \"docker\"]{}",
        &text[..start],
        checkfu_exe().display().to_string(),
        &text[end..]
    );
    std::fs::write(&registry, edited).unwrap();
    let o = output(
        env.checkfu()
            .args(["sandbox", "capabilities", "--provider", "acme"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 125, "{}", describe(&o));
    assert!(
        stderr(&o).contains("enrolled_envelope: "),
        "{}",
        describe(&o)
    );
    // `test` takes the same path: refused naming the field before any case
    // runs, and nothing is signed.
    let signed = tmp.path().join("drifted.dsse.json");
    let o = output(
        env.checkfu()
            .args(["sandbox", "test", "--provider", "acme", "--sign"])
            .arg(tmp.path().join("keys/checkfu-signing.key.pem"))
            .arg("--evidence")
            .arg(&signed)
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 125, "{}", describe(&o));
    assert!(
        stderr(&o).contains("does not match its enrollment: protocol invalid: enrolled_envelope: "),
        "{}",
        describe(&o)
    );
    assert!(!stderr(&o).contains("[1/9]"), "{}", describe(&o));
    assert!(!signed.exists());
    env.finish();
}

/// An enrolled executable changed after enrollment no longer matches the
/// code subject of its signed evidence: `--provider ID` refuses it before
/// starting it, naming the subject.
#[test]
fn an_enrolled_executable_changed_after_enrollment_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence = tmp.path().join("memory.dsse.json");
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--sign"])
            .arg(keys.join("checkfu-signing.key.pem"))
            .arg("--evidence")
            .arg(&evidence),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // The enrolled command is a copy of checkfu: the same bytes, so the
    // same code subject, until it is changed.
    let copy = tmp.path().join("provider-bin");
    std::fs::copy(checkfu_exe(), &copy).unwrap();
    let registry = tmp.path().join("providers.toml");
    let o = output(
        checkfu()
            .args(["sandbox", "add", "--id", "acme", "--provider-cmd"])
            .arg(format!("{} sandbox serve", copy.display()))
            .arg("--evidence")
            .arg(&evidence)
            .arg("--key")
            .arg(keys.join("checkfu-signing.pub.pem"))
            .arg("--providers")
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let capabilities = || {
        output(
            checkfu()
                .args(["sandbox", "capabilities", "--provider", "acme"])
                .env("CHECKFU_PROVIDERS", &registry),
        )
    };
    let o = capabilities();
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.push(0);
    std::fs::write(&copy, bytes).unwrap();
    let o = capabilities();
    assert_eq!(code(&o), 125, "{}", describe(&o));
    assert!(
        stderr(&o).contains("no longer matches its enrolled evidence"),
        "{}",
        describe(&o)
    );
}
