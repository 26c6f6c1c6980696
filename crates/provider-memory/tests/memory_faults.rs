//! Every fault changes the oracle's observable behaviour in exactly the
//! intended way: one table, one scenario per fault, the honest and the
//! faulted observation both pinned.

mod common;

use std::time::Duration;

use checkfu_sandbox_contract::identity::{
    check_clone, check_instance, check_process_evidence, check_snapshot, Mismatch,
};
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{
    faults, ActiveWriteFault, Fault, FsNode, IdentityField, MemoryProvider,
};
use common::*;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio_util::compat::FuturesAsyncWriteCompatExt;

fn fields(m: Vec<Mismatch>) -> Value {
    json!(m.into_iter().map(|m| m.field).collect::<Vec<_>>())
}

fn err_tag(e: &SandboxError) -> Value {
    json!(e.tag())
}

async fn durable(p: &MemoryProvider) -> (SandboxInstance, String) {
    let req = request(RetentionMode::Durable);
    let id = active_with(p, &req, &[("/data/rw/a.txt", b"inside")]).await;
    let inst = SandboxInstance {
        ..p.activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .unwrap()
        .value
    };
    (inst, id)
}

async fn snap(p: &MemoryProvider, id: &str, at: &str) -> SandboxSnapshot {
    p.snapshot(SnapshotRequest {
        instance_id: id.into(),
        expires_at: ts(at),
    })
    .await
    .unwrap()
    .value
}

async fn nc_exit(p: &MemoryProvider, policy: NetworkPolicy) -> Value {
    p.add_listener("listener.test", 8080, b"token\n".to_vec());
    let id = active_with(
        p,
        &request_with("session-1", RetentionMode::EphemeralZdr, policy),
        &[],
    )
    .await;
    let r = run(p, &id, &["nc", "-w", "1", "listener.test", "8080"]).await;
    json!([r.exit, stdout(&r)])
}

/// Runs the scenario that exposes `fault` and returns what a caller sees.
async fn observe(p: &MemoryProvider, fault: Fault) -> Value {
    let caps = p.capabilities();
    match fault {
        Fault::Identity(_) => {
            let req = request(RetentionMode::Durable);
            let v = p.provision(req.clone()).await.unwrap().value;
            let provisioned = check_instance(&req, InstanceState::Provisioning, &caps, &v);
            let a = p
                .activate(ActivateRequest {
                    instance_id: v.instance_id.clone(),
                })
                .await
                .unwrap()
                .value;
            let activated = check_instance(&req, InstanceState::Active, &caps, &a);
            let s = snap(p, &v.instance_id, "2030-02-01T00:00:00.000Z").await;
            let r = p
                .resume(ResumeRequest {
                    request: req.clone(),
                    snapshot: s,
                })
                .await
                .unwrap()
                .value;
            let resumed = check_instance(&req, InstanceState::Active, &caps, &r);
            json!([fields(provisioned), fields(activated), fields(resumed)])
        }
        Fault::SnapshotExpiryReplaced | Fault::SnapshotSourceMismatch => {
            let (inst, id) = durable(p).await;
            let s = snap(p, &id, "2030-02-01T00:00:00.000Z").await;
            fields(check_snapshot(&inst, &ts("2030-02-01T00:00:00.000Z"), &s))
        }
        Fault::CloneReusesSourceId | Fault::CloneMovesExpiry | Fault::ClonePredatesSource => {
            let (_, id) = durable(p).await;
            let s = snap(p, &id, "2030-02-01T00:00:00.000Z").await;
            let c = p
                .clone_snapshot(CloneSnapshotRequest {
                    source: s.clone(),
                    target_session_id: "session-2".into(),
                })
                .await
                .unwrap()
                .value;
            fields(check_clone(&s, "session-2", &c))
        }
        Fault::ExitTwoCauses | Fault::ExitNoCause => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let wire = p
                .execute_wire(ExecuteRequest {
                    instance_id: id,
                    command: command(&["sh", "-c", "exit 3"]),
                })
                .await
                .unwrap();
            match wire::decode_value::<SandboxCommandResult>(WireType::CommandResult, &wire) {
                Ok(r) => json!({"exit": r.exit}),
                Err(SandboxError::SandboxProtocolInvalid { field, .. }) => {
                    json!({"rejected": field})
                }
                Err(e) => json!({"other": e.tag()}),
            }
        }
        Fault::OutputOverLimit => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let mut c = command(&["head", "-c", "200", "/dev/zero"]);
            c.output_limit_bytes = 100;
            match exec_cmd(p, &id, c).await {
                Ok(r) => json!({"stdout_bytes": r.stdout_base64.len()}),
                Err(e) => err_tag(&e),
            }
        }
        Fault::TextualContainment => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            p.plant(&id, "/etc/shadow", FsNode::File(b"outside".to_vec()))
                .unwrap();
            run(p, &id, &["ln", "-s", "../../etc/shadow", "/data/rw/out"]).await;
            match read(p, &id, RW, "/data/rw/out").await {
                Ok(c) => json!(String::from_utf8_lossy(&c.content_base64.0)),
                Err(e) => json!(reason(&e)),
            }
        }
        Fault::ListProjectDirDropsSpecial | Fault::ListProjectDirIncomplete => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            run(p, &id, &["touch", "/data/rw/file"]).await;
            run(p, &id, &["mkfifo", "/data/rw/fifo"]).await;
            let l = SandboxProvider::list_project_dir(p)
                .unwrap()
                .list_project_dir(ListProjectDirRequest {
                    instance_id: id,
                    root: RW.into(),
                    max_entries: 10,
                })
                .await
                .unwrap();
            let paths: Vec<String> = l.entries.into_iter().map(|e| e.path.display()).collect();
            json!({"paths": paths, "complete": l.complete})
        }
        Fault::CleanupIgnoresPin | Fault::CleanupKeepsExpiredPin => {
            let (_, id) = durable(p).await;
            let alive = snap(p, &id, "2030-06-01T00:00:00.000Z").await;
            let expired = snap(p, &id, "2030-01-01T00:30:00.000Z").await;
            p.destroy(DestroyRequest { instance_id: id }).await.unwrap();
            let swept = p
                .cleanup(CleanupRequest {
                    now: ts("2030-01-01T02:00:00.000Z"),
                    orphaned_before: ts("2030-01-01T01:00:00.000Z"),
                    pinned_snapshots: vec![alive.snapshot_id, expired.snapshot_id],
                })
                .await
                .unwrap();
            json!(swept.snapshots)
        }
        Fault::ReleasedOnZdr | Fault::DestroyedOnDurable => {
            let retention = if fault == Fault::ReleasedOnZdr {
                RetentionMode::EphemeralZdr
            } else {
                RetentionMode::Durable
            };
            let id = active(p, retention).await;
            let d = p
                .release(ReleaseRequest {
                    instance_id: id,
                    snapshot_expires_at: (retention == RetentionMode::Durable)
                        .then(|| ts("2030-02-01T00:00:00.000Z")),
                })
                .await
                .unwrap()
                .value;
            let tag = serde_json::to_value(&d).unwrap()["disposition"].clone();
            json!({"disposition": tag, "snapshots_left": p.live_snapshots().len(), "instances_left": p.live_instances().len()})
        }
        Fault::RollbackDerivesFromValue => {
            let req = request(RetentionMode::EphemeralZdr);
            let first = provision(p, &req).await;
            let h = p.provision(req).await.unwrap();
            h.rollback.rollback().await.unwrap();
            json!(p.live_instances().contains(&first))
        }
        Fault::RollbackNotIdempotent => {
            let h = p
                .provision(request(RetentionMode::EphemeralZdr))
                .await
                .unwrap();
            h.rollback.rollback().await.unwrap();
            match h.rollback.rollback().await {
                Ok(()) => json!("ok"),
                Err(e) => json!(e.tag()),
            }
        }
        Fault::RollbackHangs => {
            let h = p
                .provision(request(RetentionMode::EphemeralZdr))
                .await
                .unwrap();
            let settled =
                tokio::time::timeout(Duration::from_secs(31), h.rollback.rollback()).await;
            json!(settled.is_ok())
        }
        Fault::NetworkNoneReachesListener => nc_exit(p, NetworkPolicy::None).await,
        Fault::AllowlistIgnored => {
            nc_exit(
                p,
                NetworkPolicy::Allowlist {
                    destinations: vec![NetworkDestination {
                        host: "elsewhere.test".into(),
                        port: 8080,
                    }],
                },
            )
            .await
        }
        Fault::SecondOpenProcessAllowed => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let member = SandboxProvider::open_process(p).unwrap();
            let req = SandboxProcessRequest {
                instance_id: id,
                executable: "cat".into(),
                arguments: vec![],
                working_directory: "/".into(),
                environment: Default::default(),
            };
            let _first = member.open_process(req.clone()).await.unwrap();
            match member.open_process(req).await {
                Ok(_) => json!("opened"),
                Err(e) => json!(e.tag()),
            }
        }
        Fault::StdinEofNeverDelivered
        | Fault::ProcessEvidenceMismatch
        | Fault::ProcessStartsAtExpiry => {
            let req = request(RetentionMode::EphemeralZdr);
            let v = p.provision(req).await.unwrap().value;
            let inst = p
                .activate(ActivateRequest {
                    instance_id: v.instance_id,
                })
                .await
                .unwrap()
                .value;
            let preq = SandboxProcessRequest {
                instance_id: inst.instance_id.clone(),
                executable: "cat".into(),
                arguments: vec![],
                working_directory: "/".into(),
                environment: Default::default(),
            };
            let proc = SandboxProvider::open_process(p)
                .unwrap()
                .open_process(preq.clone())
                .await
                .unwrap();
            if fault != Fault::StdinEofNeverDelivered {
                return fields(check_process_evidence(&inst, &preq, &caps, &proc.evidence));
            }
            let mut input = proc.input.compat_write();
            input.shutdown().await.unwrap();
            let exit = tokio::time::timeout(Duration::from_secs(5), proc.control.wait()).await;
            json!(exit.ok().map(|e| e.unwrap()))
        }
        Fault::ListDirMemberAbsent => {
            json!([caps.list_dir, SandboxProvider::list_dir(p).is_some()])
        }
        Fault::ReadFilesOutOfOrder | Fault::ReadFilesOverBudget => {
            let id = active_with(
                p,
                &request(RetentionMode::EphemeralZdr),
                &[("/data/rw/a", b"aaaa"), ("/data/rw/b", b"b")],
            )
            .await;
            let r = SandboxProvider::read_files(p)
                .unwrap()
                .read_files(ReadFilesRequest {
                    instance_id: id,
                    allowed_root: RW.into(),
                    files: vec![
                        ReadFilesEntry {
                            path: "/data/rw/a".into(),
                            maximum_bytes: 2,
                        },
                        ReadFilesEntry {
                            path: "/data/rw/b".into(),
                            maximum_bytes: 2,
                        },
                    ],
                    aggregate_maximum_bytes: 4,
                })
                .await
                .unwrap();
            json!(r
                .files
                .iter()
                .map(|o| {
                    let v = serde_json::to_value(o).unwrap();
                    format!(
                        "{}:{}",
                        v["path"].as_str().unwrap(),
                        v["outcome"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>())
        }
        Fault::NonMonotonicInterval => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let r = run(p, &id, &["sleep", "1"]).await;
            json!(r.finished_at >= r.started_at)
        }
        Fault::SealIgnored => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let r = run(p, &id, &["touch", "/data/ro/new"]).await;
            json!(r.exit)
        }
        Fault::EnvelopeDrifts => {
            let before = p.capabilities();
            active(p, RetentionMode::EphemeralZdr).await;
            let after = p.capabilities();
            json!([before == caps, after == caps])
        }
        Fault::ActiveWrite(f) => observe_active_write(p, f).await,
    }
}

/// Counts marker calls; aborts when asked.
struct Marker {
    calls: std::sync::atomic::AtomicUsize,
    abort: bool,
}

#[async_trait::async_trait]
impl DispatchMarker for Marker {
    async fn dispatch(&self, _t: &str) -> Result<(), SandboxError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.abort {
            Err(SandboxError::failed(
                Operation::Member(Member::BeginActiveWrite),
                FailureReason::InvalidRequest,
                "abort",
            ))
        } else {
            Ok(())
        }
    }
}

fn batch(id: &str, files: &[(&str, &[u8])]) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: "tx".into(),
        files: files
            .iter()
            .map(|(p, b)| ActiveWriteFile {
                path: (*p).into(),
                content_base64: Bytes(b.to_vec()),
            })
            .collect(),
    }
}

async fn write_with(
    p: &MemoryProvider,
    req: ActiveWriteRequest,
    abort: bool,
) -> (Result<ActiveWriteOutcome, SandboxError>, usize) {
    let marker = std::sync::Arc::new(Marker {
        calls: Default::default(),
        abort,
    });
    let out = p
        .begin_active_write()
        .unwrap()
        .begin_active_write(ActiveWriteTransaction::new(req, marker.clone()))
        .await;
    (out, marker.calls.load(std::sync::atomic::Ordering::SeqCst))
}

fn kind(r: &Result<ActiveWriteOutcome, SandboxError>) -> Value {
    match r {
        Ok(o) => json!(o.kind()),
        Err(e) => json!(e.tag()),
    }
}

async fn observe_active_write(p: &MemoryProvider, fault: ActiveWriteFault) -> Value {
    use ActiveWriteFault as F;
    let a = "/data/rw/a";
    match fault {
        F::MarkerSkipped | F::IndeterminateUndispatched => {
            let id = active(p, RetentionMode::Durable).await;
            let (r, calls) = write_with(p, batch(&id, &[(a, b"new")]), false).await;
            json!([kind(&r), calls])
        }
        F::AbortIgnored => {
            let id = active(p, RetentionMode::Durable).await;
            let (r, _) = write_with(p, batch(&id, &[(a, b"new")]), true).await;
            json!([kind(&r), p.node(&id, a).is_some()])
        }
        F::RedeliveryDiffers | F::RedeliveryReapplied => {
            let id = active(p, RetentionMode::Durable).await;
            let _ = write_with(p, batch(&id, &[(a, b"new")]), false).await;
            p.plant(&id, a, FsNode::File(b"edited".to_vec())).unwrap();
            let (r, _) = write_with(p, batch(&id, &[(a, b"new")]), false).await;
            let now = match p.node(&id, a) {
                Some(FsNode::File(b)) => String::from_utf8_lossy(&b).into_owned(),
                other => format!("{other:?}"),
            };
            json!([kind(&r), now])
        }
        F::PartialPublish => {
            let id = active(p, RetentionMode::Durable).await;
            p.plant(&id, "/data/rw/f", FsNode::File(b"f".to_vec()))
                .unwrap();
            let (r, _) = write_with(
                p,
                batch(&id, &[("/data/rw/c", b"c"), ("/data/rw/f/x", b"x")]),
                false,
            )
            .await;
            json!([kind(&r), p.node(&id, "/data/rw/c").is_some()])
        }
        F::ShallowMount => {
            let mut req = request(RetentionMode::Durable);
            req.mounts.push(SandboxMount {
                path: "/data/rw/deep".into(),
                access: MountAccess::ReadWrite,
            });
            let id = active_with(p, &req, &[]).await;
            let (r, _) = write_with(p, batch(&id, &[("/data/rw/deep/x", b"x")]), false).await;
            match r {
                Ok(ActiveWriteOutcome::Committed { mount_path, .. }) => json!(mount_path),
                other => json!(format!("{other:?}")),
            }
        }
        F::ForeignPauseResumed => {
            let id = active(p, RetentionMode::Durable).await;
            p.pause_workload(&id);
            let (r, _) = write_with(p, batch(&id, &[(a, b"new")]), false).await;
            json!([kind(&r), p.workload_paused(&id)])
        }
        F::ZdrBodyAccepted => {
            let id = active(p, RetentionMode::EphemeralZdr).await;
            let (r, _) = write_with(p, batch(&id, &[(a, b"new")]), false).await;
            json!([p.journal_on_durable_storage(), kind(&r)])
        }
    }
}

fn intended_active_write(fault: ActiveWriteFault) -> (Value, Value) {
    use ActiveWriteFault as F;
    match fault {
        F::MarkerSkipped => (json!(["committed", 1]), json!(["committed", 0])),
        F::IndeterminateUndispatched => (json!(["committed", 1]), json!(["indeterminate", 0])),
        F::AbortIgnored => (json!(["rolled_back", false]), json!(["committed", true])),
        F::RedeliveryDiffers => (
            json!(["committed", "edited"]),
            json!(["rolled_back", "edited"]),
        ),
        F::RedeliveryReapplied => (json!(["committed", "edited"]), json!(["committed", "new"])),
        F::PartialPublish => (json!(["rolled_back", false]), json!(["rolled_back", true])),
        F::ShallowMount => (json!("/data/rw/deep"), json!("/data/rw")),
        F::ForeignPauseResumed => (json!(["committed", true]), json!(["committed", false])),
        F::ZdrBodyAccepted => (json!([false, "committed"]), json!([true, "committed"])),
    }
}

/// The pinned (honest, faulted) observations of each fault's scenario.
fn intended(fault: Fault) -> (Value, Value) {
    match fault {
        Fault::Identity(field) => {
            let path = field.field_path();
            (json!([[], [], []]), json!([[path], [path], [path]]))
        }
        Fault::SnapshotExpiryReplaced => (json!([]), json!(["expires_at"])),
        Fault::SnapshotSourceMismatch => (json!([]), json!(["source_instance_id"])),
        Fault::CloneReusesSourceId => (json!([]), json!(["snapshot_id"])),
        Fault::CloneMovesExpiry => (json!([]), json!(["expires_at"])),
        Fault::ClonePredatesSource => (json!([]), json!(["created_at"])),
        Fault::ExitTwoCauses | Fault::ExitNoCause => (
            json!({"exit": {"exit_code": 3}}),
            json!({"rejected": "exit"}),
        ),
        Fault::OutputOverLimit => (
            json!("SandboxOutputLimitExceeded"),
            json!({"stdout_bytes": 101}),
        ),
        Fault::TextualContainment => (json!("outside_root"), json!("outside")),
        Fault::ListProjectDirDropsSpecial => (
            json!({"paths": ["/data/rw/fifo", "/data/rw/file"], "complete": true}),
            json!({"paths": ["/data/rw/file"], "complete": true}),
        ),
        Fault::ListProjectDirIncomplete => (
            json!({"paths": ["/data/rw/fifo", "/data/rw/file"], "complete": true}),
            json!({"paths": ["/data/rw/fifo", "/data/rw/file"], "complete": false}),
        ),
        Fault::CleanupIgnoresPin => (
            json!(["mem-snap-000002"]),
            json!(["mem-snap-000001", "mem-snap-000002"]),
        ),
        Fault::CleanupKeepsExpiredPin => (json!(["mem-snap-000002"]), json!([])),
        Fault::ReleasedOnZdr => (
            json!({"disposition": "destroyed", "snapshots_left": 0, "instances_left": 0}),
            json!({"disposition": "released", "snapshots_left": 1, "instances_left": 0}),
        ),
        Fault::DestroyedOnDurable => (
            json!({"disposition": "released", "snapshots_left": 1, "instances_left": 0}),
            json!({"disposition": "destroyed", "snapshots_left": 0, "instances_left": 0}),
        ),
        Fault::RollbackDerivesFromValue => (json!(true), json!(false)),
        Fault::RollbackNotIdempotent => (json!("ok"), json!("SandboxOperationFailed")),
        Fault::RollbackHangs => (json!(true), json!(false)),
        Fault::NetworkNoneReachesListener | Fault::AllowlistIgnored => (
            json!([{"exit_code": 1}, ""]),
            json!([{"exit_code": 0}, "token\n"]),
        ),
        Fault::SecondOpenProcessAllowed => (json!("SandboxLifecycleConflict"), json!("opened")),
        Fault::StdinEofNeverDelivered => (json!({"exit_code": 0}), json!(null)),
        Fault::ProcessEvidenceMismatch => (json!([]), json!(["instance_id"])),
        Fault::ListDirMemberAbsent => (json!([true, true]), json!([true, false])),
        Fault::ReadFilesOutOfOrder => (
            json!(["/data/rw/a:too_large", "/data/rw/b:read"]),
            json!(["/data/rw/b:read", "/data/rw/a:too_large"]),
        ),
        Fault::ReadFilesOverBudget => (
            json!(["/data/rw/a:too_large", "/data/rw/b:read"]),
            json!(["/data/rw/a:read", "/data/rw/b:read"]),
        ),
        Fault::NonMonotonicInterval => (json!(true), json!(false)),
        Fault::SealIgnored => (json!({"exit_code": 1}), json!({"exit_code": 0})),
        Fault::ProcessStartsAtExpiry => (json!([]), json!(["started_at"])),
        Fault::EnvelopeDrifts => (json!([true, true]), json!([true, false])),
        Fault::ActiveWrite(f) => intended_active_write(f),
    }
}

#[tokio::test(start_paused = true)]
async fn every_fault_changes_exactly_the_intended_observation() {
    let all = Fault::all();
    assert!(all.len() >= 40, "{} faults", all.len());
    assert_eq!(
        all.iter()
            .filter(|f| matches!(f, Fault::Identity(_)))
            .count(),
        IdentityField::ALL.len()
    );
    for fault in all {
        let (honest_p, _) = provider();
        let (faulty_p, _) = faulty(fault);
        let honest = observe(&honest_p, fault).await;
        let faulted = observe(&faulty_p, fault).await;
        let (want_honest, want_faulted) = intended(fault);
        assert_eq!(honest, want_honest, "{fault}: honest observation");
        assert_eq!(faulted, want_faulted, "{fault}: faulted observation");
        assert_ne!(honest, faulted, "{fault}");
    }
}

#[test]
fn the_registry_lists_every_fault_with_its_rule() {
    let listed = faults();
    assert_eq!(listed.len(), Fault::all().len());
    for (name, rule) in listed {
        assert_eq!(Fault::from_name(&name).map(|f| f.rule()), Some(rule));
    }
}

#[tokio::test]
async fn with_faults_keeps_state_and_adds_faults() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::EphemeralZdr).await;
    let p = p.with_faults([Fault::SealIgnored]);
    assert_eq!(p.faults_configured(), vec![Fault::SealIgnored]);
    assert_eq!(p.live_instances(), vec![id]);
}
