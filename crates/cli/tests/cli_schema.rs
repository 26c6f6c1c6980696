//! `checkfu sandbox schema`: writes the kit, `--check` exits 0 on a match
//! and 1 naming each drifted file, usage errors exit 2.

use std::process::Command;

fn checkfu(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn write_then_check_then_drift() {
    let dir = std::env::temp_dir().join(format!("checkfu-cli-schema-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    assert_eq!(
        checkfu(&["sandbox", "schema", "--out", out]).status.code(),
        Some(0)
    );
    assert_eq!(
        checkfu(&["sandbox", "schema", "--check", "--out", out])
            .status
            .code(),
        Some(0)
    );
    std::fs::remove_file(dir.join("schema/SandboxInstance.json")).unwrap();
    std::fs::write(dir.join("schema/Stray.json"), "{}\n").unwrap();
    std::fs::write(dir.join("README.md"), "edited\n").unwrap();
    let drifted = checkfu(&["sandbox", "schema", "--check", "--out", out]);
    assert_eq!(drifted.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&drifted.stderr);
    for line in [
        "missing: schema/SandboxInstance.json",
        "extra: schema/Stray.json",
        "differs: README.md",
    ] {
        assert!(stderr.contains(line), "{line} not in {stderr}");
    }
    assert_eq!(
        checkfu(&["sandbox", "schema", "--out", out]).status.code(),
        Some(0)
    );
    assert!(!dir.join("schema/Stray.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_error_exits_2_and_help_has_an_example() {
    assert_eq!(
        checkfu(&["sandbox", "schema", "--bogus"]).status.code(),
        Some(2)
    );
    let help = checkfu(&["sandbox", "schema", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("checkfu sandbox schema --check"));
}

#[test]
fn check_without_a_kit_directory_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox", "schema", "--check"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr,
        "checkfu: schema: author-kit not found (run from the repository root or pass --out DIR)\n"
    );
}
