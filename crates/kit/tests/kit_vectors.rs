//! The loop test (STYLE 9): every checked-in vector under
//! `author-kit/vectors` runs through `kit::evaluate` and must produce its
//! recorded outcome; `valid/` vectors must be accepted and `invalid/` ones
//! refused.

use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::wire::WIRE_REVISION;
use checkfu_sandbox_kit as kit;

fn kit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../author-kit")
}

fn vectors_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    out.sort();
    out
}

#[test]
fn every_checked_in_vector_produces_its_recorded_outcome() {
    let mut failures = Vec::new();
    let mut counts = [0usize; 2];
    for (i, sub) in ["valid", "invalid"].into_iter().enumerate() {
        for path in vectors_in(&kit_dir().join("vectors").join(sub)) {
            counts[i] += 1;
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            let vector: serde_json::Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{name}: not JSON: {e}"));
                    continue;
                }
            };
            assert_eq!(vector["revision"], WIRE_REVISION, "{name}");
            let stem = path.file_stem().unwrap().to_string_lossy();
            assert_eq!(vector["name"], *stem, "{name}: name is the file stem");
            let wanted = if sub == "valid" {
                "accepted"
            } else {
                "refused"
            };
            if vector["expect"]["outcome"] != wanted {
                failures.push(format!("{name}: a {sub} vector must expect {wanted}"));
            }
            if let Err(e) = kit::verify(&vector) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(counts[0] >= 20, "{} valid vectors", counts[0]);
    assert!(counts[1] >= 60, "{} invalid vectors", counts[1]);
}

#[test]
fn a_wrong_expectation_is_caught() {
    // The loop must be able to fail: flip one recorded field and verify.
    let path = kit_dir().join("vectors/invalid/instance-identity-expires-at.json");
    let mut vector: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(kit::verify(&vector).is_ok());
    vector["expect"]["field"] = "provider".into();
    vector["expect"]["error"]["field"] = "provider".into();
    match kit::verify(&vector) {
        Err(kit::VerifyError::RefusalMismatch { mismatches, .. }) => {
            let members: Vec<&str> = mismatches.iter().map(|m| m.member.as_str()).collect();
            assert_eq!(members, ["field", "error.field"]);
            assert_eq!(mismatches[0].expected, "\"provider\"");
        }
        other => panic!("expected a refusal mismatch, got {other:?}"),
    }
    vector["expect"] = serde_json::json!({"outcome": "accepted"});
    assert!(matches!(
        kit::verify(&vector),
        Err(kit::VerifyError::UnexpectedRefusal { .. })
    ));
}

#[test]
fn every_instance_identity_check_has_a_vector() {
    let fields = [
        "provider",
        "placement",
        "state",
        "workspace_id",
        "session_id",
        "run_id",
        "attempt_id",
        "lease_id",
        "lease_epoch",
        "target",
        "profile",
        "platform",
        "root_image",
        "mounts",
        "output_path",
        "expires_at",
        "materialization.profile_digest",
        "materialization.image_reference",
        "materialization.image_digest",
        "materialization.provider_revision",
        "materialization.materialization_revision",
    ];
    let mut seen = std::collections::BTreeSet::new();
    for path in vectors_in(&kit_dir().join("vectors/invalid")) {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if v["check"] == "instance_identity" {
            let error = &v["expect"]["error"];
            assert!(error["expected"].is_string() || v["expect"]["field"] == "instance_id");
            assert!(error["actual"].is_string(), "{}", path.display());
            seen.insert(v["expect"]["field"].as_str().unwrap().to_owned());
        }
    }
    for f in fields {
        assert!(seen.contains(f), "no instance_identity vector for {f}");
    }
}
