//! `--provider-image NAME@sha256:<id>`: a provider shipped as a local OCI
//! image (here: checkfu's own `sandbox serve` on a scratch image), started
//! by the local daemon with the wire on stdio and never pulled; signed
//! evidence names the image digest and verifies against the same image.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A scratch image holding the checkfu binary and the libraries it links,
/// removed on drop.
struct ProviderImage {
    tag: String,
    id: String,
}

impl Drop for ProviderImage {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["image", "rm", "-f", &self.tag])
            .output();
    }
}

fn copy_into(context: &Path, file: &Path) {
    let dest = context.join(file.strip_prefix("/").unwrap());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(std::fs::canonicalize(file).unwrap(), &dest).unwrap();
}

fn build_image() -> ProviderImage {
    let context = tempfile::tempdir().unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_checkfu"));
    std::fs::copy(&exe, context.path().join("checkfu")).unwrap();
    let ldd = Command::new("ldd").arg(&exe).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
        // "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(PathBuf::from);
        if let Some(p) = path {
            copy_into(context.path(), &p);
        }
    }
    std::fs::write(
        context.path().join("Dockerfile"),
        "FROM scratch\nCOPY . /\nENTRYPOINT [\"/checkfu\", \"sandbox\", \"serve\"]\n",
    )
    .unwrap();
    let tag = format!("checkfu-test-provider-image:{}", std::process::id());
    let o = Command::new("docker")
        .args(["build", "-q", "-t", &tag])
        .arg(context.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", &tag])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    assert!(id.starts_with("sha256:"), "{id}");
    ProviderImage { tag, id }
}

#[test]
fn a_local_provider_image_runs_the_suite_and_its_evidence_names_the_image_digest() {
    let image = build_image();
    let reference = format!("checkfu-test-provider-image@{}", image.id);
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "{}", describe(&o));
    let evidence = tmp.path().join("image.dsse.json");
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--provider-image", &reference, "--sign"])
            .arg(keys.join("checkfu-signing.key.pem"))
            .arg("--evidence")
            .arg(&evidence),
    );
    assert_eq!(code(&o), 0, "{}", describe(&o));
    assert!(
        stdout(&o).contains("9 passed, 0 failed, 0 skipped"),
        "{}",
        describe(&o)
    );
    let verify = |reference: &str| {
        output(
            checkfu()
                .args(["sandbox", "verify", "--key"])
                .arg(keys.join("checkfu-signing.pub.pem"))
                .args(["--provider-image", reference])
                .arg(&evidence),
        )
    };
    let o = verify(&reference);
    assert_eq!(code(&o), 0, "{}", describe(&o));
    // Another digest the daemon does not hold: refused at the lookup,
    // never pulled.
    let other = format!("checkfu-test-provider-image@sha256:{}", "0".repeat(64));
    let o = verify(&other);
    assert_one_line_failure(&o, 125, &["never pulled"]);
    // No container is left behind: each exits when its stdin closes and
    // `--rm` removes it (within a few seconds of checkfu's exit).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ps = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                "label=checkfu.sandbox.provider-image=1",
            ])
            .output()
            .unwrap();
        let left = String::from_utf8_lossy(&ps.stdout).trim().to_owned();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "containers left 30 s after checkfu exited: {left}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn an_unpinned_image_reference_is_a_usage_error() {
    let o = output(checkfu().args(["sandbox", "test", "--provider-image", "busybox:latest"]));
    assert_one_line_failure(&o, 2, &["--provider-image", "NAME@sha256"]);
}
