//! The author kit and the runtime agree on every request rule: each
//! `validate:` vector the kit publishes as refused (author-kit/vectors/
//! invalid/validate-*.json) is driven through the runtime's own admission,
//! and the provider never receives it.
//!
//! Where every refused field is one the caller supplies, the runtime must
//! refuse before the call. Where the vector breaks a field the runtime
//! derives itself (readFile's and readFiles' `allowed_root`, readFiles'
//! `aggregate_maximum_bytes`), the caller cannot send it; the runtime then
//! either refuses or sends a request of its own, and that request must pass
//! the same validator.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

mod support;

use std::path::PathBuf;

use checkfu_sandbox_contract::validate;
use checkfu_sandbox_contract::*;
use serde_json::Value;
use support::*;

fn vectors() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../author-kit/vectors/invalid");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the author kit's invalid vectors") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("validate-") {
            continue;
        }
        let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        out.push((name, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v["input"]["request"].clone()).expect("the vector's request decodes")
}

/// A refusal before the call: `SandboxOperationFailed{operation}` (any
/// reason; readFile paths outside every mount are `path_not_admitted`) or,
/// for a mount plan, `SandboxCapabilityUnavailable{mounts}`.
#[track_caller]
fn refused_before_the_call(name: &str, h: &Harness, f: &SandboxFailure, operation: &str) {
    match f.error() {
        SandboxError::SandboxOperationFailed { operation: o, .. } => {
            assert_eq!(o.to_string(), operation, "{name}: {f}")
        }
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::Mounts,
            ..
        } => assert_eq!(operation, "provision", "{name}: {f}"),
        SandboxError::SandboxFileTooLarge { .. } => {}
        other => panic!("{name}: refused with {other}"),
    }
    let calls = h.provider.calls();
    assert!(
        calls.iter().all(|c| c == "provision" || c == "activate"),
        "{name}: the provider was called: {calls:?}"
    );
}

#[tokio::test]
async fn every_invalid_request_vector_is_refused_by_the_runtime_or_never_sent() {
    let all = vectors();
    assert!(all.len() >= 40, "{} validate vectors", all.len());
    let mut refused = 0;
    let mut derived = 0;
    for (name, v) in &all {
        let h = Harness::new();
        let check = v["check"].as_str().unwrap().trim_start_matches("validate:");
        let operation = v["expect"]["error"]["operation"]
            .as_str()
            .unwrap_or("provision")
            .to_owned();
        let (instance_id, result) = match check {
            "SandboxProvisionRequest" => {
                let mut req: SandboxProvisionRequest = typed(v);
                req.provider = PROVIDER.into();
                req.expires_at = t0().add_seconds(3600);
                let max = v["input"]["max_mounts"].as_u64().unwrap_or(64) as u8;
                let mut env = full_envelope();
                env.max_mounts = max;
                env.active_mount_write &= max > 0;
                let h2 = Harness::with_envelope(env);
                let f = h2.adapter.provision(req).await.map(drop).unwrap_err();
                refused_before_the_call(name, &h2, &f, "provision");
                refused += 1;
                continue;
            }
            _ => {
                let i = h.active(RetentionMode::EphemeralZdr).await;
                (i.instance_id.clone(), i)
            }
        };
        let _ = result;
        let id = instance_id.as_str();
        let outcome: Result<(), SandboxFailure> = match check {
            "ListDirRequest" => {
                let r: ListDirRequest = typed(v);
                h.adapter
                    .list_dir(id, &r.root, r.max_entries)
                    .await
                    .map(drop)
            }
            "ListProjectDirRequest" => {
                let r: ListProjectDirRequest = typed(v);
                h.adapter
                    .list_project_dir(id, &r.root, r.max_entries)
                    .await
                    .map(drop)
            }
            "CleanupRequest" => {
                let r: CleanupRequest = typed(v);
                h.adapter
                    .cleanup(r.now, r.orphaned_before, r.pinned_snapshots)
                    .await
                    .map(drop)
            }
            "SandboxCommand" => {
                let c: SandboxCommand = typed(v);
                assert_eq!(v["input"]["max_duration_seconds"], 600, "{name}");
                h.adapter.execute(id, c).await.map(drop)
            }
            "SandboxProcessRequest" => {
                let mut r: SandboxProcessRequest = typed(v);
                r.instance_id = id.into();
                h.adapter.open_process(r).await.map(drop)
            }
            "WriteFileRequest" => {
                let r: WriteFileRequest = typed(v);
                let kind = r.effective_kind();
                h.adapter
                    .write_entry(id, &r.path, kind, r.content_base64.0, r.mode)
                    .await
            }
            "ActiveWriteRequest" => {
                let mut r: ActiveWriteRequest = typed(v);
                r.instance_id = id.into();
                h.adapter.begin_active_write(r).await.map(drop)
            }
            "ReadFileRequest" => {
                let r: ReadFileRequest = typed(v);
                h.adapter
                    .read_file(id, &r.path, r.maximum_bytes)
                    .await
                    .map(drop)
            }
            "ReadFilesRequest" => {
                let r: ReadFilesRequest = typed(v);
                h.adapter.read_files(id, r.files).await.map(drop)
            }
            other => panic!("{name}: no runtime entry for validate:{other}"),
        };
        // What reached the provider must pass the kit's own validator.
        for r in h.provider.read_file_requests() {
            assert!(validate::read_file_request(&r).is_empty(), "{name}: {r:?}");
        }
        for r in h.provider.read_files_requests() {
            assert!(validate::read_files_request(&r).is_empty(), "{name}");
        }
        for r in h.provider.cleanup_requests() {
            assert!(validate::cleanup_request(&r).is_empty(), "{name}: {r:?}");
        }
        let called = h.provider.calls().contains(&operation);
        if called {
            // Only a field the runtime derives itself can be "invalid" in
            // a vector and still lead to a call, and the call it made is
            // valid (checked above).
            let field = v["expect"]["field"].as_str().unwrap();
            assert!(
                matches!(check, "ReadFileRequest" | "ReadFilesRequest")
                    && matches!(field, "allowed_root" | "aggregate_maximum_bytes"),
                "{name}: the runtime sent a request the kit refuses at {field}"
            );
            derived += 1;
        } else {
            let f = outcome.expect_err(name);
            refused_before_the_call(name, &h, &f, &operation);
            refused += 1;
        }
    }
    assert_eq!(refused + derived, all.len());
    assert!(
        refused >= all.len() - 6,
        "{refused} refused, {derived} derived"
    );
}
