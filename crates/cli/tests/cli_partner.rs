//! The partner path end to end through the binary: keygen, test --sign,
//! verify (a changed byte, another binary), add under a ceiling, list,
//! remove (spec "From adapter to qualified provider").

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;

struct Signed {
    dir: tempfile::TempDir,
}

impl Signed {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn key(&self) -> PathBuf {
        self.path("keys/checkfu-signing.key.pem")
    }
    fn public(&self) -> PathBuf {
        self.path("keys/checkfu-signing.pub.pem")
    }
    fn evidence(&self) -> PathBuf {
        self.path("evidence.dsse.json")
    }
}

/// A key pair and signed evidence of the memory oracle (in-process: its
/// code is the checkfu executable, the one `checkfu sandbox serve` runs).
fn signed() -> Signed {
    let s = Signed {
        dir: tempfile::tempdir().unwrap(),
    };
    let o = output(
        checkfu()
            .args(["sandbox", "keygen", "--out"])
            .arg(s.path("keys")),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--sign"])
            .arg(s.key())
            .arg("--evidence")
            .arg(s.evidence()),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    s
}

fn serve_cmd(exe: &Path) -> String {
    format!("{} sandbox serve", exe.display())
}

fn verify(s: &Signed, exe: &Path, file: &Path) -> std::process::Output {
    output(
        checkfu()
            .args(["sandbox", "verify", "--key"])
            .arg(s.public())
            .arg("--provider-cmd")
            .arg(serve_cmd(exe))
            .arg(file),
    )
}

fn checkfu_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_checkfu"))
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let private = keys.join("checkfu-signing.key.pem");
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let before = std::fs::read(&private).unwrap();
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_one_line_failure(
        &o,
        1,
        &[
            "checkfu-signing.key.pem",
            "already exists",
            "refusing to overwrite",
        ],
    );
    assert_eq!(std::fs::read(&private).unwrap(), before);
}

#[test]
fn signed_evidence_verifies_against_the_provider_it_is_about() {
    let s = signed();
    let o = verify(&s, &checkfu_exe(), &s.evidence());
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(stdout(&o).starts_with("verified: "), "{}", describe(&o));
}

#[test]
fn a_changed_byte_fails_verification_naming_the_signature() {
    let s = signed();
    let text = std::fs::read_to_string(s.evidence()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let sig = doc["signatures"][0]["sig"].as_str().unwrap();
    // Flip one base64 character of the signature.
    let first = sig.chars().next().unwrap();
    let flipped = format!("{}{}", if first == 'A' { 'B' } else { 'A' }, &sig[1..]);
    let tampered = s.path("tampered.json");
    std::fs::write(&tampered, text.replace(sig, &flipped)).unwrap();
    let o = verify(&s, &checkfu_exe(), &tampered);
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stderr(&o).contains("signature: no signature verifies"),
        "{}",
        describe(&o)
    );
}

#[test]
fn evidence_for_another_binary_fails_naming_the_executable_subject() {
    let s = signed();
    // The same program with one byte appended: it still runs, but it is
    // another binary.
    let other = s.path("checkfu-other");
    let mut bytes = std::fs::read(checkfu_exe()).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = verify(&s, &other, &s.evidence());
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stderr(&o).contains("subject provider-executable"),
        "{}",
        describe(&o)
    );
}

fn add(s: &Signed, registry: &Path, id: &str, ceiling: Option<&str>) -> std::process::Output {
    let mut c = checkfu();
    c.args(["sandbox", "add", "--id", id, "--provider-cmd"])
        .arg(serve_cmd(&checkfu_exe()))
        .arg("--evidence")
        .arg(s.evidence())
        .arg("--key")
        .arg(s.public())
        .arg("--providers")
        .arg(registry);
    if let Some(text) = ceiling {
        let path = s.path(&format!("{id}-ceiling.toml"));
        std::fs::write(&path, text).unwrap();
        c.arg("--ceiling").arg(path);
    }
    output(c)
}

#[test]
fn add_enrolls_under_a_ceiling_reporting_cuts_then_list_and_remove() {
    let s = signed();
    let registry = s.path("providers.toml");
    let o = add(
        &s,
        &registry,
        "acme",
        Some("egress_certification = \"advisory_filter\"\n"),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains(
            "cut: egress_certification: declared \"enforced\", cut down to \"advisory_filter\""
        ),
        "{}",
        describe(&o)
    );
    let o = output(
        checkfu()
            .args(["sandbox", "list", "--providers"])
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(stdout(&o).starts_with("acme\tcommand "), "{}", describe(&o));
    assert!(stdout(&o).contains("advisory_filter"), "{}", describe(&o));
    // A built-in provider's id cannot be taken.
    for builtin in ["memory", "docker", "linux"] {
        let o = add(&s, &registry, builtin, None);
        assert_one_line_failure(&o, 2, &["names a built-in provider"]);
    }
    // Enrolled twice: refused.
    let o = add(&s, &registry, "acme", None);
    assert_one_line_failure(&o, 1, &["already enrolled"]);
    let o = output(
        checkfu()
            .args(["sandbox", "remove", "acme", "--providers"])
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let o = output(
        checkfu()
            .args(["sandbox", "list", "--providers"])
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains(&format!("no providers enrolled in {}", registry.display())),
        "{}",
        describe(&o)
    );
    // Removed twice: refused, naming the id.
    let o = output(
        checkfu()
            .args(["sandbox", "remove", "acme", "--providers"])
            .arg(&registry),
    );
    assert_one_line_failure(&o, 1, &["remove acme", "no provider with that id"]);
}

/// A registry the user names is never given a directory tree of its own:
/// its missing directory is named, before the provider starts, and
/// nothing is created.
#[test]
fn add_to_a_named_registry_in_a_missing_directory_is_refused_naming_it() {
    let s = signed();
    let dir = s.path("no-such-dir/deeper");
    let registry = dir.join("providers.toml");
    let o = add(&s, &registry, "acme", None);
    assert_one_line_failure(
        &o,
        125,
        &[
            &format!("--providers {}", registry.display()),
            &format!("expected an existing directory {}", dir.display()),
        ],
    );
    assert!(!s.path("no-such-dir").exists());
}

#[test]
fn add_refuses_claims_a_ceiling_cannot_cut_down_and_writes_nothing() {
    let s = signed();
    let registry = s.path("providers.toml");
    let o = add(&s, &registry, "acme", Some("tiers = [\"microvm\"]\n"));
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(
        stderr(&o).contains("ceiling: protocol invalid: enrollment_ceiling: tiers"),
        "{}",
        describe(&o)
    );
    assert!(!registry.exists());
}

#[test]
fn add_refuses_evidence_that_does_not_verify() {
    let s = signed();
    let other = signed();
    let registry = s.path("providers.toml");
    let o = output(
        checkfu()
            .args(["sandbox", "add", "--id", "acme", "--provider-cmd"])
            .arg(serve_cmd(&checkfu_exe()))
            .arg("--evidence")
            .arg(s.evidence())
            .arg("--key")
            .arg(other.public())
            .arg("--providers")
            .arg(&registry),
    );
    assert_eq!(code(&o), 1, "{}", describe(&o));
    assert!(stderr(&o).contains("signature"), "{}", describe(&o));
    assert!(!registry.exists());
}
