//! The Docker provider's whole lifecycle through the runtime's adapter,
//! against the real daemon: provision, stage, seal, execute, read, list,
//! snapshot, clone, release, resume, destroy, cleanup, and what a fresh
//! provider object finds.

// Tests inspect, by path and from outside, the host files they set up
// or that the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::Duration;

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::daemon;
use checkfu_sandbox_docker::labels::{LABEL_INSTANCE_ID, LABEL_SCOPE};
use common::provider_env::{command, ProviderEnv};
use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use MountAccess::{ReadOnly, ReadWrite};

fn out(name: &str) -> String {
    format!("{OUTPUT_PATH}/{name}")
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("<binary>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_through_the_runtime() {
    let Some(env) = ProviderEnv::new("lifecycle_through_the_runtime").await else {
        return;
    };
    let a = &env.adapter;
    let mounts = [
        ("/data", ReadOnly),
        ("/work", ReadWrite),
        ("/work/ref", ReadOnly),
    ];
    let request = env.request("session-a", RetentionMode::Durable, &mounts, 3600);
    let inst = a.provision(request.clone()).await.expect("provision");
    let id = inst.instance_id.clone();
    assert_eq!(inst.state, InstanceState::Provisioning);
    assert_eq!(inst.output_path, OUTPUT_PATH);
    assert_eq!(inst.expires_at, request.expires_at);
    assert_eq!(
        inst.materialization.image_digest,
        request.root_image.digest()
    );

    // A provisioning instance has no container but is found from the
    // state directory by a fresh provider object.
    let docker = env.provider.docker();
    let by_id = [(LABEL_SCOPE, env.scope.as_str()), (LABEL_INSTANCE_ID, &id)];
    assert!(daemon::list_containers_by_labels(docker, &by_id)
        .await
        .unwrap()
        .is_empty());
    let inv = env.provider.reopen().inventory().await.unwrap();
    assert!(inv.instances.contains_key(&id), "{inv:?}");

    for (path, content) in [
        ("/data/in.txt", &b"input\n"[..]),
        ("/data/deep/er/x.txt", b"deep"),
        ("/work/seed.txt", b"seed\n"),
        ("/work/ref/pinned.txt", b"pinned"),
    ] {
        a.write_file(&id, path, content.to_vec())
            .await
            .unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    a.write_file(&id, &out("early.txt"), b"early".to_vec())
        .await
        .unwrap();
    let active = a.activate(&id).await.expect("activate");
    assert_eq!(active.state, InstanceState::Active);
    let labelled = daemon::list_containers_by_labels(docker, &by_id)
        .await
        .unwrap();
    assert_eq!(labelled.len(), 1);

    // The workload: unprivileged, sealed read-only mounts, writable rest.
    let r = env.run(&id, &["id", "-u"]).await;
    assert_eq!(text(&r.stdout_base64.0), "1000\n");
    let r = env
        .run(&id, &["cat", "/data/in.txt", "/data/deep/er/x.txt"])
        .await;
    assert_eq!(text(&r.stdout_base64.0), "input\ndeep");
    for sealed in ["/data/new", "/work/ref/new"] {
        let r = env.run(&id, &["touch", sealed]).await;
        assert_ne!(r.exit, ExitCause::ExitCode(0), "{sealed} writable");
    }
    let r = env
        .run(
            &id,
            &["sh", "-c", "cp /work/seed.txt /work/copy.txt && echo hi > /mnt/session/outputs/hi.txt && cat /work/ref/pinned.txt"],
        )
        .await;
    assert_eq!(
        r.exit,
        ExitCause::ExitCode(0),
        "{}",
        text(&r.stderr_base64.0)
    );
    assert_eq!(text(&r.stdout_base64.0), "pinned");
    // Staged files in a read-write mount belong to the workload; links the
    // workload makes (escaping ones included) are part of its state.
    let r = env
        .run(
            &id,
            &["sh", "-c", "echo more >> /work/seed.txt && ln -s /etc/passwd /work/abs && ln -s ../../up /work/up && ln -s copy.txt /work/in"],
        )
        .await;
    assert_eq!(
        r.exit,
        ExitCause::ExitCode(0),
        "{}",
        text(&r.stderr_base64.0)
    );

    // Reads and listings.
    assert_eq!(
        a.read_file(&id, "/work/copy.txt", 64).await.unwrap(),
        b"seed\n"
    );
    assert_eq!(a.read_file(&id, &out("hi.txt"), 64).await.unwrap(), b"hi\n");
    let too = a.read_file(&id, "/work/seed.txt", 4).await.unwrap_err();
    assert!(
        matches!(too.error(), SandboxError::SandboxFileTooLarge { limit_bytes: 4, actual_bytes, .. } if *actual_bytes == 10),
        "{too}"
    );
    let listing = a.list_dir(&id, "/work", 100).await.unwrap();
    let paths: Vec<String> = listing.entries.iter().map(|e| e.path.display()).collect();
    assert_eq!(paths, ["/work/copy.txt", "/work/seed.txt"], "{listing:?}");
    let before = a.list_project_dir(&id, "/work", 100).await.unwrap();
    let project = a.list_project_dir(&id, "/data", 100).await.unwrap();
    assert!(project.complete);
    assert_eq!(project.entries.len(), 2, "{project:?}");
    // After activation only the output tree is writable.
    assert!(a
        .write_file(&id, "/work/late.txt", b"x".to_vec())
        .await
        .is_err());
    a.write_file(&id, &out("late.txt"), b"late".to_vec())
        .await
        .unwrap();

    // openProcess: one live process per instance.
    let req = SandboxProcessRequest {
        instance_id: id.clone(),
        executable: "cat".into(),
        arguments: Vec::new(),
        working_directory: "/work".into(),
        environment: Default::default(),
    };
    let mut p = a.open_process(req.clone()).await.expect("open_process");
    let second = a.open_process(req.clone()).await.unwrap_err();
    assert_eq!(
        *second.error(),
        SandboxError::conflict(
            op::OPEN_PROCESS,
            "no live process",
            ConflictActual::ProcessAlreadyOpen
        )
    );
    p.input.write_all(b"ping").await.unwrap();
    p.input.close().await.unwrap();
    let mut echoed = Vec::new();
    p.output.read_to_end(&mut echoed).await.unwrap();
    assert_eq!(echoed, b"ping");
    assert_eq!(p.handle.wait().await.unwrap(), ProcessExit::ExitCode(0));
    p.handle.destroy().await.unwrap();
    p.handle.destroy().await.unwrap();
    // Once exited, the instance accepts a new process.
    let mut again = None;
    for _ in 0..50 {
        match a.open_process(req.clone()).await {
            Ok(p) => {
                again = Some(p);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let again = again.expect("a second process after the first exited");
    again.handle.destroy().await.unwrap();

    // Snapshot, clone, durable release, resume.
    let deadline = Timestamp::now().add_seconds(1800);
    let s1 = a.snapshot(&id, deadline).await.expect("snapshot");
    assert_eq!(s1.expires_at, deadline);
    let c1 = a.clone_snapshot(&s1, "session-fork").await.expect("clone");
    assert_eq!(c1.session_id, "session-fork");
    assert_ne!(c1.snapshot_id, s1.snapshot_id);
    let released = a.release(&id, Some(deadline)).await.expect("release");
    let ReleaseDisposition::Released { snapshot: s2 } = released else {
        panic!("durable release destroyed");
    };
    assert!(!env
        .provider
        .inventory()
        .await
        .unwrap()
        .instances
        .contains_key(&id));
    a.destroy_snapshot(&s1.snapshot_id).await.unwrap();

    let resumed = a
        .resume(
            env.request("session-a", RetentionMode::Durable, &mounts, 3600),
            s2.clone(),
        )
        .await
        .expect("resume");
    let rid = resumed.instance_id.clone();
    assert_eq!(resumed.state, InstanceState::Active);
    assert_eq!(
        a.read_file(&rid, "/work/copy.txt", 64).await.unwrap(),
        b"seed\n"
    );
    assert_eq!(
        a.read_file(&rid, "/work/seed.txt", 64).await.unwrap(),
        b"seed\nmore\n"
    );
    assert_eq!(
        a.read_file(&rid, "/data/in.txt", 64).await.unwrap(),
        b"input\n"
    );
    assert_eq!(
        a.read_file(&rid, &out("late.txt"), 64).await.unwrap(),
        b"late"
    );
    // Links come back verbatim; escaping ones stay unreadable from the host.
    let after = a.list_project_dir(&rid, "/work", 100).await.unwrap();
    assert_eq!(after.entries, before.entries);
    assert_eq!(a.read_file(&rid, "/work/in", 64).await.unwrap(), b"seed\n");
    let e = a.read_file(&rid, "/work/abs", 64).await.unwrap_err();
    assert!(
        matches!(
            e.error(),
            SandboxError::SandboxOperationFailed {
                operation,
                reason: FailureReason::OutsideRoot,
                ..
            } if operation == "read_file"
        ),
        "{e}"
    );
    let r = env
        .run(
            &rid,
            &[
                "sh",
                "-c",
                "cat /work/copy.txt && touch /work/after && id -u",
            ],
        )
        .await;
    assert_eq!(
        text(&r.stdout_base64.0),
        "seed\n1000\n",
        "{}",
        text(&r.stderr_base64.0)
    );
    // The snapshot can go while its resumed instance lives.
    a.destroy_snapshot(&s2.snapshot_id).await.unwrap();
    let r = env.run(&rid, &["true"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));

    // The clone outlives its source and resumes into its own Session.
    let fork = a
        .resume(
            env.request("session-fork", RetentionMode::Durable, &mounts, 3600),
            c1.clone(),
        )
        .await
        .expect("resume the clone");
    assert_eq!(
        a.read_file(&fork.instance_id, "/work/copy.txt", 64)
            .await
            .unwrap(),
        b"seed\n"
    );

    // Idempotent teardown, unknown and malformed ids included.
    for iid in [&rid, &rid, &fork.instance_id] {
        a.destroy(iid).await.unwrap();
    }
    for sid in [&c1.snapshot_id, &c1.snapshot_id] {
        a.destroy_snapshot(sid).await.unwrap();
    }
    a.destroy("i-000000000000000000000000").await.unwrap();
    a.destroy("../../etc").await.unwrap();
    a.destroy_snapshot("../snapshots").await.unwrap();
    let inv = env.provider.inventory().await.unwrap();
    assert!(
        inv.instances.is_empty() && inv.snapshots.is_empty(),
        "{inv:?}"
    );
    assert_eq!(env.leftovers().await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zdr_release_and_rollbacks_leave_nothing() {
    let Some(env) = ProviderEnv::new("zdr_release_and_rollbacks_leave_nothing").await else {
        return;
    };
    let p = &env.provider;
    // A provision rollback, run twice, removes the allocation.
    let h = p
        .provision(env.request("s", RetentionMode::EphemeralZdr, &[("/w", ReadWrite)], 600))
        .await
        .unwrap();
    let dir = p.state_dir().join("instances").join(&h.value.instance_id);
    assert!(dir.is_dir());
    h.rollback.rollback().await.unwrap();
    h.rollback.rollback().await.unwrap();
    assert!(!dir.exists());

    // An activation rollback removes the container and leaves the instance
    // provisioning; activation can then run again.
    let h = p
        .provision(env.request("s", RetentionMode::EphemeralZdr, &[("/w", ReadWrite)], 600))
        .await
        .unwrap();
    let id = h.value.instance_id.clone();
    let act = p
        .activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(env.leftovers().await.0, 1);
    act.rollback.rollback().await.unwrap();
    act.rollback.rollback().await.unwrap();
    assert_eq!(env.leftovers().await.0, 0);
    p.activate(ActivateRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();

    // Snapshots are forbidden for ZDR; release destroys every trace.
    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: Timestamp::now().add_seconds(60),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(snap, SandboxError::SandboxSnapshotForbidden { .. }),
        "{snap}"
    );
    let rel = p
        .release(ReleaseRequest {
            instance_id: id.clone(),
            snapshot_expires_at: None,
        })
        .await
        .unwrap();
    assert_eq!(rel.value, ReleaseDisposition::Destroyed);
    rel.rollback.rollback().await.unwrap();
    assert!(!p.state_dir().join("instances").join(&id).exists());
    assert_eq!(env.leftovers().await, (0, 0));
    let inv = p.inventory().await.unwrap();
    assert!(inv.instances.is_empty(), "{inv:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_root_image_is_base_image_unavailable() {
    let Some(env) = ProviderEnv::new("missing_root_image_is_base_image_unavailable").await else {
        return;
    };
    let mut request = env.request("s", RetentionMode::EphemeralZdr, &[], 600);
    let missing = format!("checkfu-fixture@sha256:{}", "ab".repeat(32));
    request.root_image = ImageReference::parse(&missing).unwrap();
    let err = env.adapter.provision(request).await.unwrap_err();
    match err.error() {
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::BaseImage,
            detail,
        } => assert!(detail.contains(&missing), "{detail}"),
        other => panic!("expected base_image unavailable, actual {other}"),
    }
    // Nothing was allocated.
    assert!(env.provider.inventory().await.unwrap().instances.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_from_a_fresh_provider_keeps_to_its_scope() {
    let Some(env) = ProviderEnv::new("cleanup_from_a_fresh_provider").await else {
        return;
    };
    let Some(other) = ProviderEnv::new("cleanup_other_scope").await else {
        return;
    };
    let a = &env.adapter;
    // Expiring soon, never activated: found from the state directory alone.
    let short = a
        .provision(env.request("s", RetentionMode::EphemeralZdr, &[], 60))
        .await
        .unwrap();
    let long = env
        .active(env.request("s", RetentionMode::Durable, &[], 3600), &[])
        .await;
    let neighbour = other
        .active(
            other.request("s", RetentionMode::EphemeralZdr, &[], 60),
            &[],
        )
        .await;
    let now = Timestamp::now();
    let pinned = a
        .snapshot(&long.instance_id, now.add_seconds(600))
        .await
        .unwrap();
    let loose = a
        .snapshot(&long.instance_id, now.add_seconds(600))
        .await
        .unwrap();

    let fresh = env.provider.reopen();
    let swept = fresh
        .cleanup(CleanupRequest {
            now: now.add_seconds(120),
            orphaned_before: now.add_seconds(-60),
            pinned_snapshots: vec![],
        })
        .await
        .unwrap();
    assert_eq!(swept.instances, vec![short.instance_id.clone()]);
    assert!(swept.snapshots.is_empty(), "{swept:?}");

    let swept = fresh
        .cleanup(CleanupRequest {
            now: now.add_seconds(300),
            orphaned_before: now.add_seconds(300),
            pinned_snapshots: vec![pinned.snapshot_id.clone()],
        })
        .await
        .unwrap();
    assert_eq!(swept.instances, vec![long.instance_id.clone()]);
    assert_eq!(swept.snapshots, vec![loose.snapshot_id.clone()]);
    let swept = fresh
        .cleanup(CleanupRequest {
            now: now.add_seconds(700),
            orphaned_before: now.add_seconds(300),
            pinned_snapshots: vec![pinned.snapshot_id.clone()],
        })
        .await
        .unwrap();
    assert_eq!(swept.snapshots, vec![pinned.snapshot_id.clone()]);
    assert_eq!(env.leftovers().await, (0, 0));

    // The other scope's instance, expired by this sweep's clock, is untouched.
    let inv = other.provider.inventory().await.unwrap();
    assert!(
        inv.instances.contains_key(&neighbour.instance_id),
        "{inv:?}"
    );
    let r = other.run(&neighbour.instance_id, &["true"]).await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    let _ = command(&["true"]);
}
