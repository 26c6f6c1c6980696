//! Lifecycle: envelope, identity echo, determinism, sealing, snapshots,
//! clones, release, resume, cleanup, destroy and rollbacks.

mod common;

use checkfu_sandbox_contract::identity::{check_clone, check_instance, check_snapshot};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{FsNode, MemoryProvider, PROVIDER_ID};
use common::*;

#[tokio::test]
async fn envelope_is_valid_and_declares_everything() {
    let (p, _) = provider();
    let caps = p.capabilities();
    assert!(caps.violations().is_empty(), "{:?}", caps.violations());
    let bytes = wire::encode(&caps);
    assert_eq!(wire::decode_capabilities(&bytes).unwrap(), caps);
    assert_eq!(p.provider_id(), PROVIDER_ID);
    assert!(caps.snapshots && caps.snapshot_clone && caps.list_dir);
    assert!(caps.physically_contained_file_read && caps.active_mount_write);
    assert_eq!(caps.snapshot_custody, SnapshotCustody::Provider);
    assert_eq!(caps.egress_certification, EgressCertification::Enforced);
    assert_eq!(caps.max_mounts, 64);
    assert_eq!(
        caps.network_modes,
        vec![NetworkMode::None, NetworkMode::Allowlist]
    );
    assert!(p.read_files().is_some());
    assert!(p.list_dir().is_some());
    assert!(p.list_project_dir().is_some());
    assert!(p.open_process().is_some());
    assert!(p.begin_active_write().is_some());
}

#[tokio::test]
async fn instances_echo_the_request() {
    let (p, _) = provider();
    let req = request(RetentionMode::Durable);
    let caps = p.capabilities();
    let provisioned = p.provision(req.clone()).await.unwrap().value;
    assert_eq!(provisioned.instance_id, "mem-inst-000001");
    assert!(check_instance(&req, InstanceState::Provisioning, &caps, &provisioned).is_empty());
    let activated = p
        .activate(ActivateRequest {
            instance_id: provisioned.instance_id.clone(),
        })
        .await
        .unwrap()
        .value;
    assert!(check_instance(&req, InstanceState::Active, &caps, &activated).is_empty());
    assert_eq!(
        activated.materialization.image_digest,
        req.root_image.digest()
    );
}

/// Runs a fixed script and returns every result's wire bytes.
async fn script(p: &MemoryProvider) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let req = request(RetentionMode::Durable);
    let h = p.provision(req.clone()).await.unwrap();
    out.push(wire::encode(&h.value));
    let id = h.value.instance_id;
    p.write_file(WriteFileRequest {
        instance_id: id.clone(),
        path: format!("{RO}/input.txt").into(),
        content_base64: Bytes(b"hello".to_vec()),
        mode: None,
        kind: None,
    })
    .await
    .unwrap();
    out.push(wire::encode(
        &p.activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .value,
    ));
    out.push(wire::encode(
        &run(p, &id, &["sh", "-c", "sleep 3; exit 4"]).await,
    ));
    out.push(wire::encode(
        &run(p, &id, &["sha256sum", &format!("{RO}/input.txt")]).await,
    ));
    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap()
        .value;
    out.push(wire::encode(&snap));
    out.push(wire::encode(
        &p.clone_snapshot(CloneSnapshotRequest {
            source: snap,
            target_session_id: "session-2".into(),
        })
        .await
        .unwrap()
        .value,
    ));
    out.push(wire::encode(
        &p.list_project_dir()
            .unwrap()
            .list_project_dir(ListProjectDirRequest {
                instance_id: id.clone(),
                root: "/data".into(),
                max_entries: 100,
            })
            .await
            .unwrap(),
    ));
    out.push(wire::encode(
        &p.release(ReleaseRequest {
            instance_id: id,
            snapshot_expires_at: Some(ts("2030-03-01T00:00:00.000Z")),
        })
        .await
        .unwrap()
        .value,
    ));
    out
}

#[tokio::test]
async fn the_same_inputs_give_the_same_bytes() {
    let (a, _) = provider();
    let (b, _) = provider();
    let first = script(&a).await;
    let second = script(&b).await;
    assert_eq!(first, second);
    let settled = String::from_utf8(first[2].clone()).unwrap();
    assert_eq!(
        settled,
        r#"{"exit":{"exit_code":4},"stdout_base64":"","stderr_base64":"","started_at":"2030-01-01T00:00:00.000Z","finished_at":"2030-01-01T00:00:03.000Z"}"#
    );
    assert!(String::from_utf8(first[4].clone())
        .unwrap()
        .contains(r#""snapshot_id":"mem-snap-000001""#));
}

#[tokio::test]
async fn read_only_mounts_are_sealed_at_activation() {
    let (p, _) = provider();
    let id = provision(&p, &request(RetentionMode::EphemeralZdr)).await;
    // While provisioning, the runtime stages into every mount.
    for path in [
        format!("{RO}/a.txt"),
        format!("{NESTED_RO}/b.txt"),
        format!("{RW}/c.txt"),
    ] {
        p.write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: path.into(),
            content_base64: Bytes(b"staged".to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap();
    }
    // The workload cannot write into a read-only mount once active.
    p.activate(ActivateRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();
    for argv in [
        vec!["touch", "/data/ro/new"],
        vec!["cp", "/data/rw/c.txt", "/data/ro/a.txt"],
        vec!["rm", "/data/ro/a.txt"],
        vec!["mkdir", "/data/ro/dir"],
        vec!["ln", "-s", "/x", "/data/ro/link"],
        vec!["mkfifo", "/data/ro/fifo"],
        vec!["touch", "/data/rw/pinned/new"],
    ] {
        let r = run(&p, &id, &argv).await;
        assert_eq!(r.exit, ExitCause::ExitCode(1), "{argv:?}");
        assert!(
            stderr(&r).contains("Read-only file system"),
            "{argv:?}: {}",
            stderr(&r)
        );
    }
    // A link in a writable mount does not route a write around the seal.
    let r = run(&p, &id, &["ln", "-s", "/data/ro/a.txt", "/data/rw/alias"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    let mut tee = command(&["tee", "/data/rw/alias"]);
    tee.stdin_base64 = Some(Bytes(b"overwrite".to_vec()));
    let r = exec_cmd(&p, &id, tee).await.unwrap();
    assert_eq!(r.exit, ExitCause::ExitCode(1));
    assert_eq!(
        p.node(&id, "/data/ro/a.txt"),
        Some(FsNode::File(b"staged".to_vec()))
    );
    // writeFile into any mount is provisioning-only (the scope narrows at
    // activation); the workload's own writes to the output tree and rw
    // mounts still work.
    for path in [format!("{RO}/a.txt"), format!("{RW}/late.txt")] {
        let e = p
            .write_file(WriteFileRequest {
                instance_id: id.clone(),
                path: path.clone().into(),
                content_base64: Bytes(b"x".to_vec()),
                mode: None,
                kind: None,
            })
            .await
            .unwrap_err();
        assert!(
            matches!(
                &e,
                SandboxError::SandboxLifecycleConflict {
                    operation,
                    expected,
                    actual: ConflictActual::Active,
                } if *operation == op::WRITE_FILE && expected == "provisioning"
            ),
            "{path}: {e:?}"
        );
    }
    assert!(p.node(&id, &format!("{RW}/late.txt")).is_none());
    for argv in [
        vec!["touch", "/data/rw/ok"],
        vec!["touch", "/mnt/session/outputs/ok"],
    ] {
        assert_eq!(run(&p, &id, &argv).await.exit, ExitCause::ExitCode(0));
    }
    // Mount roots, the output tree and the control root cannot be removed.
    for path in ["/data/rw", "/mnt/session/outputs", "/workspace", "/data"] {
        let r = run(&p, &id, &["rm", "-r", path]).await;
        assert!(stderr(&r).contains("busy"), "{path}: {}", stderr(&r));
    }
}

#[tokio::test]
async fn write_file_stays_inside_its_mount() {
    let (p, _) = provider();
    let id = provision(&p, &request(RetentionMode::EphemeralZdr)).await;
    let passwd = p.node(&id, "/etc/passwd");
    assert!(matches!(passwd, Some(FsNode::File(_))), "{passwd:?}");
    p.plant(&id, "/data/rw/out", FsNode::Symlink("/etc".into()))
        .unwrap();
    let e = p
        .write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: "/data/rw/out/passwd".into(),
            content_base64: Bytes(b"x".to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(FailureReason::OutsideRoot));
    assert_eq!(
        p.node(&id, "/etc/passwd"),
        passwd,
        "the image's file is untouched"
    );
    let e = p
        .write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: "/elsewhere/file".into(),
            content_base64: Bytes(b"x".to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(FailureReason::PathNotAdmitted));
    // Parents are created; a final link is replaced, never followed.
    p.plant(
        &id,
        "/mnt/session/outputs/final",
        FsNode::Symlink("/etc/x".into()),
    )
    .unwrap();
    for path in ["/data/rw/a/b/c.txt", "/mnt/session/outputs/final"] {
        p.write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: path.into(),
            content_base64: Bytes(b"ok".to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap();
        assert_eq!(p.node(&id, path), Some(FsNode::File(b"ok".to_vec())));
    }
    assert!(p.node(&id, "/etc/x").is_none());
}

async fn durable_with_file(p: &MemoryProvider) -> String {
    active_with(
        p,
        &request(RetentionMode::Durable),
        &[("/data/rw/state.txt", b"v1")],
    )
    .await
}

#[tokio::test]
async fn snapshots_and_clones_are_independent_copies() {
    let (p, clock) = provider();
    let id = durable_with_file(&p).await;
    let source_instance = p
        .activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .value;
    let expires = ts("2030-02-01T00:00:00.000Z");
    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: expires,
        })
        .await
        .unwrap()
        .value;
    assert!(check_snapshot(&source_instance, &expires, &snap).is_empty());
    // Changing the instance afterwards does not change the snapshot.
    run(&p, &id, &["rm", "/data/rw/state.txt"]).await;
    assert_eq!(
        p.snapshot_node(&snap.snapshot_id, "/data/rw/state.txt"),
        Some(FsNode::File(b"v1".to_vec()))
    );
    clock.advance_seconds(10);
    let clone = p
        .clone_snapshot(CloneSnapshotRequest {
            source: snap.clone(),
            target_session_id: "session-2".into(),
        })
        .await
        .unwrap()
        .value;
    assert!(check_clone(&snap, "session-2", &clone).is_empty());
    assert_ne!(clone.snapshot_id, snap.snapshot_id);
    // Destroying the source leaves the clone whole.
    p.destroy_snapshot(DestroySnapshotRequest {
        snapshot_id: snap.snapshot_id.clone(),
    })
    .await
    .unwrap();
    let mut resume_req = request_with("session-2", RetentionMode::Durable, NetworkPolicy::None);
    resume_req.run_id = "run-2".into();
    let resumed = p
        .resume(ResumeRequest {
            request: resume_req.clone(),
            snapshot: clone.clone(),
        })
        .await
        .unwrap()
        .value;
    assert!(check_instance(
        &resume_req,
        InstanceState::Active,
        &p.capabilities(),
        &resumed
    )
    .is_empty());
    let r = run(&p, &resumed.instance_id, &["cat", "/data/rw/state.txt"]).await;
    assert_eq!(stdout(&r), "v1");
    // Writing in the resumed instance does not reach the clone.
    run(&p, &resumed.instance_id, &["rm", "/data/rw/state.txt"]).await;
    assert!(p
        .snapshot_node(&clone.snapshot_id, "/data/rw/state.txt")
        .is_some());
}

#[tokio::test]
async fn snapshots_of_zdr_instances_are_forbidden() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let e = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::SandboxSnapshotForbidden { .. }));
    assert!(p.live_snapshots().is_empty());
}

#[tokio::test]
async fn release_settles_by_retention() {
    let (p, _) = provider();
    let zdr = active(&p, RetentionMode::EphemeralZdr).await;
    let v = p
        .release(ReleaseRequest {
            instance_id: zdr.clone(),
            snapshot_expires_at: None,
        })
        .await
        .unwrap()
        .value;
    assert_eq!(v, ReleaseDisposition::Destroyed);
    assert!(p.live_instances().is_empty() && p.live_snapshots().is_empty());

    let durable = durable_with_file(&p).await;
    let expires = ts("2030-03-01T00:00:00.000Z");
    let v = p
        .release(ReleaseRequest {
            instance_id: durable.clone(),
            snapshot_expires_at: Some(expires),
        })
        .await
        .unwrap()
        .value;
    let ReleaseDisposition::Released { snapshot } = v else {
        panic!("expected released, got {v:?}");
    };
    assert_eq!(snapshot.expires_at, expires);
    assert_eq!(snapshot.source_instance_id, durable);
    assert!(p.live_instances().is_empty());
    assert_eq!(p.live_snapshots(), vec![snapshot.snapshot_id.clone()]);
    // Durable round trip: the file survives release and resume.
    let resumed = p
        .resume(ResumeRequest {
            request: request(RetentionMode::Durable),
            snapshot,
        })
        .await
        .unwrap()
        .value;
    let r = run(&p, &resumed.instance_id, &["cat", "/data/rw/state.txt"]).await;
    assert_eq!(stdout(&r), "v1");
}

#[tokio::test]
async fn cleanup_honours_the_pin_rule_both_ways() {
    let (p, clock) = provider();
    let id = durable_with_file(&p).await;
    let mk = |at: &'static str| SnapshotRequest {
        instance_id: id.clone(),
        expires_at: ts(at),
    };
    let pinned_alive = p
        .snapshot(mk("2030-06-01T00:00:00.000Z"))
        .await
        .unwrap()
        .value;
    let pinned_expired = p
        .snapshot(mk("2030-01-01T00:30:00.000Z"))
        .await
        .unwrap()
        .value;
    let unpinned_old = p
        .snapshot(mk("2030-06-01T00:00:00.000Z"))
        .await
        .unwrap()
        .value;
    clock.advance_seconds(7200);
    let young = p
        .snapshot(mk("2030-06-01T00:00:00.000Z"))
        .await
        .unwrap()
        .value;
    let swept = p
        .cleanup(CleanupRequest {
            now: ts("2030-01-01T02:00:00.000Z"),
            orphaned_before: ts("2030-01-01T01:00:00.000Z"),
            pinned_snapshots: vec![
                pinned_alive.snapshot_id.clone(),
                pinned_expired.snapshot_id.clone(),
            ],
        })
        .await
        .unwrap();
    // The instance was created before the cutoff: orphaned.
    assert_eq!(swept.instances, vec![id]);
    // Expiry beats the pin; an unpinned orphan goes; a pinned one stays.
    assert_eq!(
        swept.snapshots,
        vec![
            pinned_expired.snapshot_id.clone(),
            unpinned_old.snapshot_id.clone()
        ]
    );
    assert_eq!(
        p.live_snapshots(),
        vec![pinned_alive.snapshot_id, young.snapshot_id]
    );
    assert!(p.live_instances().is_empty());
}

#[tokio::test]
async fn cleanup_sweeps_expired_instances() {
    let (p, _) = provider();
    let mut req = request(RetentionMode::EphemeralZdr);
    req.expires_at = ts("2030-01-01T00:10:00.000Z");
    let short = provision(&p, &req).await;
    let long = provision(&p, &request(RetentionMode::EphemeralZdr)).await;
    let swept = p
        .cleanup(CleanupRequest {
            now: ts("2030-01-01T00:10:00.000Z"),
            orphaned_before: ts(START),
            pinned_snapshots: vec![],
        })
        .await
        .unwrap();
    assert_eq!(swept.instances, vec![short]);
    assert_eq!(p.live_instances(), vec![long]);
}

#[tokio::test]
async fn destroy_is_idempotent_and_unknown_ids_succeed() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    for _ in 0..2 {
        p.destroy(DestroyRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap();
        p.destroy_snapshot(DestroySnapshotRequest {
            snapshot_id: "mem-snap-999999".into(),
        })
        .await
        .unwrap();
    }
    assert!(p.live_instances().is_empty());
    let e = run_err(&p, &id).await;
    assert!(matches!(e, SandboxError::SandboxInstanceNotFound { .. }));
}

async fn run_err(p: &MemoryProvider, id: &str) -> SandboxError {
    exec_cmd(p, id, command(&["true"])).await.unwrap_err()
}

#[tokio::test]
async fn rollbacks_use_the_providers_record_and_are_idempotent() {
    let (p, _) = provider();
    let req = request(RetentionMode::Durable);
    let keep = provision(&p, &req).await;
    let h = p.provision(req.clone()).await.unwrap();
    let rolled = h.value.instance_id.clone();
    h.rollback.rollback().await.unwrap();
    h.rollback.rollback().await.unwrap();
    assert_eq!(p.live_instances(), vec![keep.clone()]);
    assert!(!p.live_instances().contains(&rolled));

    // activate's rollback returns the instance to provisioning.
    let h = p
        .activate(ActivateRequest {
            instance_id: keep.clone(),
        })
        .await
        .unwrap();
    h.rollback.rollback().await.unwrap();
    assert_eq!(p.instance_state(&keep), Some(InstanceState::Provisioning));
    p.activate(ActivateRequest {
        instance_id: keep.clone(),
    })
    .await
    .unwrap();

    // snapshot, clone and release rollbacks remove what they allocated.
    let s = p
        .snapshot(SnapshotRequest {
            instance_id: keep.clone(),
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap();
    let c = p
        .clone_snapshot(CloneSnapshotRequest {
            source: s.value.clone(),
            target_session_id: "session-2".into(),
        })
        .await
        .unwrap();
    c.rollback.rollback().await.unwrap();
    assert_eq!(p.live_snapshots(), vec![s.value.snapshot_id.clone()]);
    s.rollback.rollback().await.unwrap();
    assert!(p.live_snapshots().is_empty());
    let r = p
        .release(ReleaseRequest {
            instance_id: keep,
            snapshot_expires_at: Some(ts("2030-02-01T00:00:00.000Z")),
        })
        .await
        .unwrap();
    assert_eq!(p.live_snapshots().len(), 1);
    r.rollback.rollback().await.unwrap();
    r.rollback.rollback().await.unwrap();
    assert!(p.live_snapshots().is_empty());
}

#[tokio::test]
async fn unknown_snapshots_are_not_found() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id,
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap()
        .value;
    let mut gone = snap.clone();
    gone.snapshot_id = "mem-snap-424242".into();
    let e = p
        .clone_snapshot(CloneSnapshotRequest {
            source: gone.clone(),
            target_session_id: "s".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::SandboxSnapshotNotFound { .. }));
    let e = p
        .resume(ResumeRequest {
            request: request(RetentionMode::Durable),
            snapshot: gone,
        })
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::SandboxSnapshotNotFound { .. }));
}

#[tokio::test]
async fn active_write_publishes_all_or_nothing() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let aw = p.begin_active_write().unwrap();
    let file = |path: &str, body: &[u8]| ActiveWriteFile {
        path: path.into(),
        content_base64: Bytes(body.to_vec()),
    };
    let ok = aw
        .begin_active_write(ActiveWriteTransaction::proceeding(ActiveWriteRequest {
            instance_id: id.clone(),
            transaction_id: "tx-1".into(),
            files: vec![file("/data/rw/mem/a.md", b"a"), file("/data/rw/b.md", b"b")],
        }))
        .await
        .unwrap();
    assert_eq!(
        ok,
        ActiveWriteOutcome::Committed {
            transaction_id: "tx-1".into(),
            mount_path: RW.into(),
            published: vec!["/data/rw/mem/a.md".into(), "/data/rw/b.md".into()],
        }
    );
    assert_eq!(
        p.node(&id, "/data/rw/mem/a.md"),
        Some(FsNode::File(b"a".to_vec()))
    );
    // Redelivery of the same batch returns the first outcome and publishes
    // nothing again; another batch under the same id is refused.
    p.plant(&id, "/data/rw/b.md", FsNode::File(b"edited".to_vec()))
        .unwrap();
    let again = aw
        .begin_active_write(ActiveWriteTransaction::proceeding(ActiveWriteRequest {
            instance_id: id.clone(),
            transaction_id: "tx-1".into(),
            files: vec![file("/data/rw/mem/a.md", b"a"), file("/data/rw/b.md", b"b")],
        }))
        .await
        .unwrap();
    assert_eq!(again, ok);
    assert_eq!(
        p.node(&id, "/data/rw/b.md"),
        Some(FsNode::File(b"edited".to_vec()))
    );
    let e = aw
        .begin_active_write(ActiveWriteTransaction::proceeding(ActiveWriteRequest {
            instance_id: id.clone(),
            transaction_id: "tx-1".into(),
            files: vec![file("/data/rw/b.md", b"other")],
        }))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, SandboxError::SandboxOperationFailed { field: Some(f), .. } if f == "transaction_id"),
        "{e:?}"
    );
    // A staging failure publishes nothing.
    p.plant(&id, "/data/rw/escape", FsNode::Symlink("/etc".into()))
        .unwrap();
    let rolled = aw
        .begin_active_write(ActiveWriteTransaction::proceeding(ActiveWriteRequest {
            instance_id: id.clone(),
            transaction_id: "tx-2".into(),
            files: vec![file("/data/rw/c.md", b"c"), file("/data/rw/escape/x", b"x")],
        }))
        .await
        .unwrap();
    assert!(matches!(rolled, ActiveWriteOutcome::RolledBack { .. }));
    assert!(p.node(&id, "/data/rw/c.md").is_none());
    assert!(p.node(&id, "/etc/x").is_none());
    // The deepest owning mount decides: a nested read-only mount refuses.
    let e = aw
        .begin_active_write(ActiveWriteTransaction::proceeding(ActiveWriteRequest {
            instance_id: id.clone(),
            transaction_id: "tx-3".into(),
            files: vec![file("/data/rw/pinned/x", b"x")],
        }))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(FailureReason::ReadOnly));
}
