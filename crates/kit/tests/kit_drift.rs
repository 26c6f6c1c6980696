//! The drift test (STYLE 9): the checked-in `author-kit/` must equal
//! `kit::generate()`. Set `CHECKFU_REGENERATE=1` to rewrite it instead.

use std::path::Path;

use checkfu_sandbox_kit as kit;

#[test]
fn checked_in_author_kit_matches_the_generator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../author-kit");
    if std::env::var_os("CHECKFU_REGENERATE").is_some_and(|v| v == "1") {
        kit::write(&dir).unwrap_or_else(|e| panic!("regenerating {}: {e}", dir.display()));
    }
    if let Err(drift) = kit::check(&dir) {
        let lines: Vec<String> = drift.iter().map(|d| format!("  {d}")).collect();
        panic!(
            "author-kit/ drifted from the generator ({} files):\n{}\n\
             regenerate with `CHECKFU_REGENERATE=1 cargo test -p checkfu-sandbox-kit --test kit_drift` \
             (or `checkfu sandbox schema --out author-kit`) and review the diff",
            drift.len(),
            lines.join("\n")
        );
    }
}

#[test]
fn check_names_missing_extra_and_differing_files() {
    let dir = std::env::temp_dir().join(format!("checkfu-kit-drift-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    kit::write(&dir).unwrap();
    assert_eq!(kit::check(&dir), Ok(()));
    std::fs::remove_file(dir.join("schema/SandboxInstance.json")).unwrap();
    std::fs::write(dir.join("vectors/valid/stray.json"), "{}\n").unwrap();
    std::fs::write(dir.join("README.md"), "edited\n").unwrap();
    let drift = kit::check(&dir).unwrap_err();
    let shown: Vec<String> = drift.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "differs: README.md",
            "missing: schema/SandboxInstance.json",
            "extra: vectors/valid/stray.json",
        ]
    );
    kit::write(&dir).unwrap();
    assert_eq!(kit::check(&dir), Ok(()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_refuses_a_non_empty_directory_that_is_not_a_kit_and_keeps_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious").join("thesis.tex");
    std::fs::create_dir_all(precious.parent().unwrap()).unwrap();
    std::fs::write(&precious, "x").unwrap();
    let err = checkfu_sandbox_kit::write(dir.path()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(precious.exists());

    // Into an empty directory it writes; a foreign file added later is kept
    // by a rewrite, and a stale kit file is removed.
    let kit = tempfile::tempdir().unwrap();
    checkfu_sandbox_kit::write(kit.path()).unwrap();
    std::fs::write(kit.path().join("notes.md"), "mine").unwrap();
    std::fs::write(kit.path().join("vectors/valid/stale.json"), "{}").unwrap();
    checkfu_sandbox_kit::write(kit.path()).unwrap();
    assert!(kit.path().join("notes.md").exists());
    assert!(!kit.path().join("vectors/valid/stale.json").exists());
    checkfu_sandbox_kit::check(kit.path()).unwrap();
}
