//! The partner path end to end against the Python example provider
//! (`examples/python-provider`): keygen, `test --sign`, `verify`, `add`
//! under a registry file, `run --provider ID`, then `remove`; a changed
//! byte of the signed evidence fails verification.
//!
//! Gate: the provider runs containers through the Docker CLI, so without a
//! daemon the test prints a `SKIP` line, except under `CI=true`, where it
//! fails.

// The test reads and edits its own temporary files by path.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;

use common::*;

#[test]
fn partner_path_runs_end_to_end_against_the_python_example_provider() {
    let Some(env) = docker("partner_python") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("scratch dir");
    let provider = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/python-provider/provider.py")
        .canonicalize()
        .expect("examples/python-provider/provider.py");
    let line = format!(
        "python3 {} --root-image {} --state-dir {} --scope {}",
        provider.display(),
        env.fixture,
        tmp.path().join("state").display(),
        env.scope
    );
    let keys = tmp.path().join("keys");
    let o = output(checkfu().args(["sandbox", "keygen", "--out"]).arg(&keys));
    assert_eq!(code(&o), 0, "keygen: {}", describe(&o));
    let (key, public) = (
        keys.join("checkfu-signing.key.pem"),
        keys.join("checkfu-signing.pub.pem"),
    );

    let evidence = tmp.path().join("python.dsse.json");
    let o = output(
        checkfu()
            .args(["sandbox", "test", "--provider-cmd", &line, "--sign"])
            .arg(&key)
            .arg("--evidence")
            .arg(&evidence),
    );
    assert_eq!(code(&o), 0, "test --sign: {}", describe(&o));

    let verify = |file: &Path| {
        output(
            checkfu()
                .args(["sandbox", "verify", "--key"])
                .arg(&public)
                .args(["--provider-cmd", &line])
                .arg(file),
        )
    };
    let o = verify(&evidence);
    assert_eq!(code(&o), 0, "verify: {}", describe(&o));

    // One changed byte anywhere in the signed payload fails verification.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&evidence).expect("evidence")).expect("DSSE JSON");
    let payload = doc["payload"].as_str().expect("payload").to_owned();
    let flipped = if payload.starts_with('e') { 'f' } else { 'e' };
    doc["payload"] = serde_json::Value::String(format!("{flipped}{}", &payload[1..]));
    let tampered = tmp.path().join("tampered.dsse.json");
    std::fs::write(&tampered, serde_json::to_vec(&doc).expect("JSON")).expect("write");
    let o = verify(&tampered);
    assert_eq!(code(&o), 1, "tampered evidence verified: {}", describe(&o));

    let registry = tmp.path().join("providers.toml");
    let o = output(
        checkfu()
            .args([
                "sandbox",
                "add",
                "--id",
                "acme-python",
                "--provider-cmd",
                &line,
            ])
            .arg("--evidence")
            .arg(&evidence)
            .arg("--key")
            .arg(&public)
            .arg("--providers")
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "add: {}", describe(&o));
    let o = output(
        checkfu()
            .args(["sandbox", "list", "--providers"])
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "list: {}", describe(&o));
    assert!(stdout(&o).contains("acme-python"), "list: {}", describe(&o));

    let o = output(
        checkfu()
            .args(["sandbox", "run", "--provider", "acme-python", "--image"])
            .arg(&env.fixture)
            .args(["--", "sh", "-c", "echo from-python; exit 3"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_eq!(code(&o), 3, "run --provider ID: {}", describe(&o));
    assert!(stdout(&o).contains("from-python"), "{}", describe(&o));

    let o = output(
        checkfu()
            .args(["sandbox", "remove", "acme-python", "--providers"])
            .arg(&registry),
    );
    assert_eq!(code(&o), 0, "remove: {}", describe(&o));
    let o = output(
        checkfu()
            .args(["sandbox", "capabilities", "--provider", "acme-python"])
            .env("CHECKFU_PROVIDERS", &registry),
    );
    assert_ne!(code(&o), 0, "a removed id still resolves: {}", describe(&o));
    env.finish();
}
