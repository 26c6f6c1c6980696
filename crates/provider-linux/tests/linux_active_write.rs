//! beginActiveWrite on the Linux provider against the real kernel: a batch
//! is published while the instance's cgroup is frozen, so a process of the
//! workload sees every file old or every file new, never a mix and never
//! a partial file; a caller that aborts at the dispatch marker leaves every
//! file old and the workload never frozen; a provider that stops at any
//! step (staged, marked, dispatched, committed) is recovered by the next
//! provider constructed on the same state directory: all old or all new,
//! the workload thawed and running, no evidence and no pause token left,
//! and a redelivery answers the settled outcome. Every test ends with
//! nothing of its scope left (instances, cgroups, processes, state
//! directory).
//!
//! Needs root (namespaces, mounts, cgroups) and a cgroup freezer: without
//! them each test prints a `SKIP` line, except under `CI=true`, where it
//! fails.

// The tests read, by path and from outside, the host files and cgroup
// files the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_linux::cgroup::{FreezerSupport, InstanceCgroups};
use checkfu_sandbox_linux::conformance::LinuxTarget;
use checkfu_sandbox_linux::{ActiveWriteStep, Layout, LinuxConfig, LinuxProvider};

const DEEP: &str = "/work/deep";
/// `request.mounts` index of [`DEEP`].
const DEEP_INDEX: usize = 1;

struct Lab {
    target: LinuxTarget,
}

impl Lab {
    async fn new(test: &str) -> Option<Lab> {
        if !common::available_or_skip(test) {
            return None;
        }
        if let FreezerSupport::Unavailable(why) = FreezerSupport::probe_cached() {
            checkfu_test_support::gate::skip_or_fail(test, &format!("no cgroup freezer: {why}"));
            return None;
        }
        let target = LinuxTarget::new(&common::busybox(), &mut |l| eprintln!("{l}"))
            .await
            .expect("target");
        Some(Lab { target })
    }

    fn provider(&self) -> &LinuxProvider {
        self.target.linux_provider()
    }

    fn layout(&self) -> Layout {
        Layout::new(self.target.state_dir().to_path_buf())
    }

    /// The host directory of [`DEEP`].
    fn deep_dir(&self, id: &str) -> PathBuf {
        self.layout().mount_dir(id, DEEP_INDEX)
    }

    fn journal_root(&self, id: &str) -> PathBuf {
        self.layout().instance_dir(id).join("active-write")
    }

    fn cgroups(&self, id: &str) -> InstanceCgroups {
        let FreezerSupport::Available(version) = FreezerSupport::probe_cached() else {
            unreachable!("checked by Lab::new")
        };
        InstanceCgroups::new(version, self.target.scope(), id)
    }

    fn request(&self) -> SandboxProvisionRequest {
        let mut r = common::sandbox::request(self.target.root_image());
        r.profile.profile_digest = Digest::parse(&format!("sha256:{}", "d".repeat(64))).unwrap();
        r.profile.retention = RetentionMode::Durable;
        r.mounts = vec![
            SandboxMount {
                path: "/work".into(),
                access: MountAccess::ReadWrite,
            },
            SandboxMount {
                path: DEEP.into(),
                access: MountAccess::ReadWrite,
            },
        ];
        r
    }

    /// An active instance with `files` staged below [`DEEP`].
    async fn active(&self, files: &[(&str, &[u8])]) -> String {
        let p = self.provider();
        let id = p
            .provision(self.request())
            .await
            .expect("provision")
            .value
            .instance_id;
        for (name, body) in files {
            p.write_file(WriteFileRequest {
                instance_id: id.clone(),
                path: format!("{DEEP}/{name}").into(),
                content_base64: Bytes(body.to_vec()),
                mode: None,
                kind: None,
            })
            .await
            .expect("stage");
        }
        p.activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .expect("activate");
        id
    }

    async fn close(self) {
        let scope = self.target.scope().to_owned();
        self.target.close().await.expect("nothing left");
        assert_eq!(common::processes_in_scope(&scope), Vec::<i32>::new());
        assert!(common::scope_cgroups(&scope).is_empty());
    }
}

fn command(script: &str, env: &[(&str, String)], timeout_seconds: u32) -> SandboxCommand {
    SandboxCommand {
        executable: "sh".into(),
        arguments: vec!["-c".into(), script.into()],
        working_directory: "/".into(),
        environment: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        stdin_base64: None,
        timeout_seconds,
        output_limit_bytes: 1 << 20,
    }
}

async fn sh(p: &LinuxProvider, id: &str, script: &str) -> String {
    let r = p
        .execute(ExecuteRequest {
            instance_id: id.into(),
            command: command(script, &[], 30),
        })
        .await
        .expect("execute");
    assert_eq!(r.exit, ExitCause::ExitCode(0), "{script}: {r:?}");
    String::from_utf8_lossy(&r.stdout_base64.0).into_owned()
}

fn batch(id: &str, tx: &str, files: &[(&str, &[u8])]) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: tx.into(),
        files: files
            .iter()
            .map(|(name, body)| ActiveWriteFile {
                path: format!("{DEEP}/{name}"),
                content_base64: body.to_vec().into(),
            })
            .collect(),
    }
}

fn read(dir: &Path, name: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(name)).ok()
}

/// Every entry below `dir`, relative, sorted (directories end in `/`).
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(format!("{rel}/"));
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn md5_hex(bytes: &[u8]) -> String {
    // busybox md5sum is what the workload has; the host computes the same.
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .expect("md5sum on the host");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

fn beat(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("beat"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_for_beat_above(dir: &Path, above: u64) -> u64 {
    for _ in 0..3000 {
        let b = beat(dir);
        if b > above {
            return b;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the workload's heartbeat did not pass {above} within 30 s");
}

/// What the step hook saw at [`ActiveWriteStep::Dispatched`].
#[derive(Debug, Default, Clone)]
struct AtDispatch {
    frozen: Option<bool>,
    a_new: bool,
    b_old: bool,
    beat_before: u64,
    beat_after: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_published_whole_while_the_workload_is_frozen() {
    let Some(lab) = Lab::new("linux_active_write_frozen").await else {
        return;
    };
    // 64 KiB bodies: a reader that could see a file half written would see
    // neither digest.
    let old = b"old-".repeat(16 * 1024);
    let new = b"new-".repeat(16 * 1024);
    let id = lab
        .active(&[("a.txt", old.as_slice()), ("b.txt", old.as_slice())])
        .await;
    let outputs = lab.layout().outputs_dir(&id);
    let deep = lab.deep_dir(&id);

    // The hook runs on the provider's task, between the first move and the
    // rest: the host sees the batch half published; the workload must not
    // run at all meanwhile.
    let seen = Arc::new(Mutex::new(None::<AtDispatch>));
    {
        let (seen, cg, deep, outputs, new, old) = (
            seen.clone(),
            lab.cgroups(&id),
            deep.clone(),
            outputs.clone(),
            new.clone(),
            old.clone(),
        );
        lab.provider()
            .set_active_write_step_hook(Arc::new(move |step| {
                if step != ActiveWriteStep::Dispatched {
                    return;
                }
                let beat_before = beat(&outputs);
                std::thread::sleep(Duration::from_millis(300));
                *seen.lock().unwrap() = Some(AtDispatch {
                    frozen: cg.frozen().unwrap(),
                    a_new: read(&deep, "a.txt").as_deref() == Some(new.as_slice()),
                    b_old: read(&deep, "b.txt").as_deref() == Some(old.as_slice()),
                    beat_before,
                    beat_after: beat(&outputs),
                });
            }));
    }

    // The workload: read a, b, a again; count samples by generation, a
    // partial body, and a window in which a stayed the same while b was of
    // the other generation (a batch not published whole).
    let script = r#"
n=0; olds=0; news=0; bad=0
while [ ! -e /mnt/session/outputs/stop ]; do
  a1=$(md5sum < /work/deep/a.txt); b=$(md5sum < /work/deep/b.txt); a2=$(md5sum < /work/deep/a.txt)
  for h in "$a1" "$b" "$a2"; do
    case "${h%% *}" in "$OLD"|"$NEW") ;; *) bad=$((bad+1)); echo "partial $h" >> /mnt/session/outputs/bad ;; esac
  done
  if [ "$a1" = "$a2" ] && [ "$a1" != "$b" ]; then bad=$((bad+1)); echo "mixed" >> /mnt/session/outputs/bad; fi
  case "${a1%% *}" in "$OLD") olds=$((olds+1)) ;; "$NEW") news=$((news+1)) ;; esac
  n=$((n+1)); echo $n > /mnt/session/outputs/beat.tmp && mv /mnt/session/outputs/beat.tmp /mnt/session/outputs/beat
done
echo "$n $olds $news $bad"
"#;
    let env = [("OLD", md5_hex(&old)), ("NEW", md5_hex(&new))];
    let workload = {
        let p = lab.provider().clone();
        let cmd = command(script, &env, 120);
        let id = id.clone();
        tokio::spawn(async move {
            p.execute(ExecuteRequest {
                instance_id: id,
                command: cmd,
            })
            .await
        })
    };
    let before = wait_for_beat_above(&outputs, 2).await;

    let member = SandboxProvider::begin_active_write(lab.provider()).expect("member");
    let outcome = member
        .begin_active_write(ActiveWriteTransaction::proceeding(batch(
            &id,
            "tx-frozen",
            &[("a.txt", new.as_slice()), ("b.txt", new.as_slice())],
        )))
        .await
        .expect("begin_active_write");
    assert_eq!(
        outcome,
        ActiveWriteOutcome::Committed {
            transaction_id: "tx-frozen".into(),
            mount_path: DEEP.into(),
            published: vec![format!("{DEEP}/a.txt"), format!("{DEEP}/b.txt")],
        }
    );
    let at = seen.lock().unwrap().clone().expect("the hook ran");
    assert_eq!(at.frozen, Some(true), "frozen during publication: {at:?}");
    assert!(at.a_new && at.b_old, "half published on the host: {at:?}");
    assert_eq!(
        at.beat_before, at.beat_after,
        "the workload ran while frozen: {at:?}"
    );
    assert!(at.beat_before >= before, "{at:?}");
    assert_eq!(lab.cgroups(&id).frozen().unwrap(), Some(false), "thawed");

    // The workload runs again and sees the new files, then stops.
    let after = beat(&outputs);
    wait_for_beat_above(&outputs, after + 2).await;
    lab.provider()
        .write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: "/mnt/session/outputs/stop".into(),
            content_base64: Bytes(Vec::new()),
            mode: None,
            kind: None,
        })
        .await
        .expect("stop the workload");
    let r = workload.await.unwrap().expect("workload");
    assert_eq!(r.exit, ExitCause::ExitCode(0), "{r:?}");
    let stdout = String::from_utf8_lossy(&r.stdout_base64.0).into_owned();
    let counts: Vec<u64> = stdout
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [n, olds, news, bad] = counts[..] else {
        panic!("{stdout:?}")
    };
    assert_eq!(
        bad,
        0,
        "samples: {n}; {:?}",
        std::fs::read_to_string(outputs.join("bad"))
    );
    assert!(olds > 0 && news > 0, "both generations sampled: {stdout}");

    // Nothing of the transaction but its settled journal.
    assert_eq!(read(&deep, "a.txt"), Some(new.clone()));
    let left = tree(&lab.journal_root(&id));
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left[1].ends_with("/journal.json"), "{left:?}");
    lab.close().await;
}

/// A caller that aborts at the dispatch marker, after checking that the
/// workload is not frozen while the journal is still open.
struct AbortingCaller {
    cgroups: InstanceCgroups,
    frozen_at_marker: Mutex<Option<Option<bool>>>,
}

#[async_trait]
impl DispatchMarker for AbortingCaller {
    async fn dispatch(&self, _transaction_id: &str) -> Result<(), SandboxError> {
        *self.frozen_at_marker.lock().unwrap() = Some(self.cgroups.frozen().unwrap());
        Err(SandboxError::failed(
            checkfu_sandbox_contract::provider::op::BEGIN_ACTIVE_WRITE,
            FailureReason::InvalidRequest,
            "the caller aborts",
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_at_the_marker_rolls_back_without_freezing() {
    let Some(lab) = Lab::new("linux_active_write_abort").await else {
        return;
    };
    let id = lab.active(&[("a.txt", b"old a\n")]).await;
    let caller = Arc::new(AbortingCaller {
        cgroups: lab.cgroups(&id),
        frozen_at_marker: Mutex::new(None),
    });
    let member = SandboxProvider::begin_active_write(lab.provider()).expect("member");
    let outcome = member
        .begin_active_write(ActiveWriteTransaction::new(
            batch(
                &id,
                "tx-abort",
                &[("a.txt", b"new a\n"), ("n.txt", b"new n\n")],
            ),
            caller.clone(),
        ))
        .await
        .expect("begin_active_write");
    assert_eq!(outcome.kind(), "rolled_back", "{outcome:?}");
    assert_eq!(
        *caller.frozen_at_marker.lock().unwrap(),
        Some(Some(false)),
        "the open journal is the caller's: nothing is paused yet"
    );
    let deep = lab.deep_dir(&id);
    assert_eq!(read(&deep, "a.txt").as_deref(), Some(&b"old a\n"[..]));
    assert_eq!(read(&deep, "n.txt"), None);
    assert_eq!(lab.cgroups(&id).frozen().unwrap(), Some(false));
    let left = tree(&lab.journal_root(&id));
    assert_eq!(left.len(), 2, "only the settled journal: {left:?}");
    // The workload runs and sees the old file.
    assert_eq!(
        sh(lab.provider(), &id, &format!("cat {DEEP}/a.txt")).await,
        "old a\n"
    );
    // A redelivery answers the recorded outcome and publishes nothing.
    let again = member
        .begin_active_write(ActiveWriteTransaction::proceeding(batch(
            &id,
            "tx-abort",
            &[("a.txt", b"new a\n"), ("n.txt", b"new n\n")],
        )))
        .await
        .expect("redelivery");
    assert_eq!(again, outcome);
    assert_eq!(read(&deep, "a.txt").as_deref(), Some(&b"old a\n"[..]));
    lab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_stopped_at_any_step_is_recovered_by_the_next() {
    let Some(lab) = Lab::new("linux_active_write_crash").await else {
        return;
    };
    let old: [(&str, &[u8]); 2] = [("a.txt", b"old a\n"), ("sub/b.txt", b"old b\n")];
    let new: [(&str, &[u8]); 3] = [
        ("a.txt", b"new a\n"),
        ("sub/b.txt", b"new b\n"),
        ("n.txt", b"new n\n"),
    ];
    let contents = |deep: &Path| {
        ["a.txt", "sub/b.txt", "n.txt"]
            .iter()
            .map(|n| read(deep, n))
            .collect::<Vec<_>>()
    };
    let all_old = vec![Some(b"old a\n".to_vec()), Some(b"old b\n".to_vec()), None];
    let all_new: Vec<Option<Vec<u8>>> = new.iter().map(|(_, b)| Some(b.to_vec())).collect();

    for step in ActiveWriteStep::ALL {
        let name = step.name();
        let id = lab.active(&old).await;
        let deep = lab.deep_dir(&id);
        let root = lab.journal_root(&id);
        let tx = format!("tx-crash-{name}");

        // A provider object that stops at `step`, as a crash there would:
        // its task unwinds and nothing after the step runs.
        let doomed = lab.provider().reopen();
        doomed.set_active_write_step_hook(Arc::new(move |s| {
            if s == step {
                panic!("the provider stops at {}", s.name());
            }
        }));
        let request = batch(&id, &tx, &new);
        let stopped = tokio::spawn(async move {
            let member = SandboxProvider::begin_active_write(&doomed).expect("member");
            member
                .begin_active_write(ActiveWriteTransaction::proceeding(request))
                .await
        })
        .await;
        assert!(
            stopped.as_ref().is_err_and(|e| e.is_panic()),
            "{name}: {stopped:?}"
        );
        let token = root.join("pause-token.json");
        if step == ActiveWriteStep::Dispatched {
            // Stopped mid-publication: frozen, under its token.
            assert_eq!(lab.cgroups(&id).frozen().unwrap(), Some(true), "{name}");
            assert!(token.exists(), "{name}: the pause token is recorded");
        }

        // The next provider on the same state directory recovers.
        let fresh = LinuxProvider::new(LinuxConfig {
            state_dir: lab.target.state_dir().to_path_buf(),
            scope: lab.target.scope().to_owned(),
            clock: Arc::new(SystemClock),
            workload_user: Default::default(),
        })
        .expect("the next provider");
        let committed = step == ActiveWriteStep::Committed;
        let want = if committed { &all_new } else { &all_old };
        assert_eq!(
            &contents(&deep),
            want,
            "{name}: after recovery (never mixed)"
        );
        assert_eq!(
            lab.cgroups(&id).frozen().unwrap(),
            Some(false),
            "{name}: thawed"
        );
        assert!(!token.exists(), "{name}: token left");
        assert_eq!(
            sh(&fresh, &id, &format!("cat {DEEP}/a.txt"))
                .await
                .as_bytes(),
            want[0].as_deref().unwrap(),
            "{name}: the workload runs"
        );
        let left = tree(&root);
        match step {
            // Open journals are their callers', never rolled back.
            ActiveWriteStep::Staged | ActiveWriteStep::Marked => assert!(
                left.iter().any(|p| p.ends_with("staged/0")),
                "{name}: the open journal was touched: {left:?}"
            ),
            _ => assert!(
                !left
                    .iter()
                    .any(|p| p.contains("staged") || p.contains("rollback")),
                "{name}: evidence left after recovery: {left:?}"
            ),
        }

        // A redelivery settles it; a second one answers the same.
        let member = SandboxProvider::begin_active_write(&fresh).expect("member");
        let out = member
            .begin_active_write(ActiveWriteTransaction::proceeding(batch(&id, &tx, &new)))
            .await
            .expect("redelivery");
        let (kind, want) = match step {
            ActiveWriteStep::Dispatched => ("rolled_back", &all_old),
            _ => ("committed", &all_new),
        };
        assert_eq!(out.kind(), kind, "{name}: {out:?}");
        assert_eq!(&contents(&deep), want, "{name}: after redelivery");
        let left = tree(&root);
        assert_eq!(left.len(), 2, "{name}: one settled journal: {left:?}");
        assert!(left[1].ends_with("/journal.json"), "{name}: {left:?}");
        let again = member
            .begin_active_write(ActiveWriteTransaction::proceeding(batch(&id, &tx, &new)))
            .await
            .expect("second redelivery");
        assert_eq!(again, out, "{name}");

        fresh
            .destroy(DestroyRequest {
                instance_id: id.clone(),
            })
            .await
            .expect("destroy");
        assert!(
            !lab.layout().instance_dir(&id).exists(),
            "{name}: instance dir left"
        );
    }
    lab.close().await;
}
