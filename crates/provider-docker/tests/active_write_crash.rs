//! beginActiveWrite crash recovery against the real daemon: for each step
//! (before the marker, after the marker before dispatch, after dispatch
//! before commit, after commit before cleanup) a child process — this test
//! binary re-executed — runs the transaction and is killed with SIGKILL at
//! that step. A fresh provider (`DockerProvider::connect`, which recovers)
//! must leave the files all old or all new, never mixed, the workload
//! running and unpaused, and after the transaction's redelivery no
//! evidence: no staged bodies, no rollback copies, no pause token.
//!
//! A custom main (`harness = false`): with `CHECKFU_CRASH_CHILD` set it is
//! the child; otherwise it runs the four cases (gated like every Docker
//! test: a `SKIP` line without a daemon, a failure under `CI=true`).

// Tests inspect, by path and from outside, the host files the provider wrote.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::{daemon, ActiveWriteStep, DockerConfig, DockerProvider};
use common::provider_env::{command, ProviderEnv};
use MountAccess::ReadWrite;

const CHILD: &str = "CHECKFU_CRASH_CHILD";
const DEEP: &str = "/work/deep";
/// `request.mounts` index of [`DEEP`] (its host directory `mounts/1`).
const DEEP_INDEX: usize = 1;
const TX: &str = "tx-crash";

fn batch(instance_id: &str) -> ActiveWriteRequest {
    let file = |name: &str, body: &str| ActiveWriteFile {
        path: format!("{DEEP}/{name}"),
        content_base64: body.as_bytes().to_vec().into(),
    };
    ActiveWriteRequest {
        instance_id: instance_id.into(),
        transaction_id: TX.into(),
        files: vec![
            file("a.txt", "new a\n"),
            file("sub/b.txt", "new b\n"),
            file("n.txt", "new n\n"),
        ],
    }
}

fn main() -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(spec) = std::env::var(CHILD) {
        return rt.block_on(child(&spec));
    }
    rt.block_on(async {
        let mut ran = 0;
        for step in ActiveWriteStep::ALL {
            if !crash_and_recover(step).await {
                return ExitCode::SUCCESS; // skipped (printed why)
            }
            ran += 1;
            println!("test active_write_crash::{} ... ok", step.name());
        }
        println!("test result: ok. {ran} passed");
        ExitCode::SUCCESS
    })
}

/// The child: `<state_dir>\t<scope>\t<instance_id>\t<step>`.
async fn child(spec: &str) -> ExitCode {
    let parts: Vec<&str> = spec.split('\t').collect();
    let [state_dir, scope, instance_id, step] = parts[..] else {
        eprintln!("bad {CHILD}: {spec:?}");
        return ExitCode::from(2);
    };
    let provider = DockerProvider::connect(DockerConfig {
        state_dir: PathBuf::from(state_dir),
        scope: scope.into(),
        clock: Arc::new(SystemClock),
        pool_size: 0,
        exec_path: None,
    })
    .await
    .expect("connect");
    let at = ActiveWriteStep::ALL
        .into_iter()
        .find(|s| s.name() == step)
        .expect("step");
    provider.set_active_write_step_hook(Arc::new(move |s| {
        if s == at {
            // The provider's process dies here, mid-transaction.
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }));
    let member = SandboxProvider::begin_active_write(&provider).expect("member");
    let out = member
        .begin_active_write(ActiveWriteTransaction::proceeding(batch(instance_id)))
        .await;
    eprintln!("child was not killed at {step}: {out:?}");
    ExitCode::from(3)
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read(dir.join(name))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Every file below `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
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
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Runs one step's crash and recovery; false when the test is skipped.
async fn crash_and_recover(step: ActiveWriteStep) -> bool {
    let name = format!("active_write_crash_{}", step.name());
    let Some(env) = ProviderEnv::new(&name).await else {
        return false;
    };
    let request = env.request(
        "session-crash",
        RetentionMode::Durable,
        &[("/work", ReadWrite), (DEEP, ReadWrite)],
        3600,
    );
    let inst = env
        .active(
            request,
            &[
                (&format!("{DEEP}/a.txt"), b"old a\n"),
                (&format!("{DEEP}/sub/b.txt"), b"old b\n"),
            ],
        )
        .await;
    let id = inst.instance_id.clone();
    let mount = env
        .state_dir
        .join("instances")
        .join(&id)
        .join("mounts")
        .join(DEEP_INDEX.to_string());
    let journal_root = env
        .state_dir
        .join("instances")
        .join(&id)
        .join("active-write");

    // The child runs the transaction and dies at `step`.
    let exe = std::env::current_exe().expect("current exe");
    let spec = format!(
        "{}\t{}\t{}\t{}",
        env.state_dir.display(),
        env.scope,
        id,
        step.name()
    );
    let status = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(exe).env(CHILD, spec).status(),
    )
    .await
    .expect("the child settles within 120 s")
    .expect("child ran");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "{name}: child was not killed: {status:?}"
    );

    // A fresh provider: connect runs recovery.
    let fresh = DockerProvider::connect(DockerConfig {
        state_dir: env.state_dir.clone(),
        scope: env.scope.clone(),
        clock: Arc::new(SystemClock),
        pool_size: 0,
        exec_path: None,
    })
    .await
    .expect("fresh provider");

    let committed = step == ActiveWriteStep::Committed;
    let files = [
        read(&mount, "a.txt"),
        read(&mount, "sub/b.txt"),
        read(&mount, "n.txt"),
    ];
    let all_old = [
        Some("old a\n".to_string()),
        Some("old b\n".to_string()),
        None,
    ];
    let all_new = [
        Some("new a\n".to_string()),
        Some("new b\n".to_string()),
        Some("new n\n".to_string()),
    ];
    let want = if committed { &all_new } else { &all_old };
    assert_eq!(&files, want, "{name}: after recovery (never mixed)");

    // The workload is running, unpaused, and runs a command.
    let c = daemon::inspect_container(fresh.docker(), &format!("checkfu-{id}"))
        .await
        .unwrap()
        .expect("container");
    let state = c.state.expect("state");
    assert_eq!(state.paused, Some(false), "{name}: workload left paused");
    assert_eq!(state.running, Some(true), "{name}: workload not running");
    let r = fresh
        .execute(ExecuteRequest {
            instance_id: id.clone(),
            command: command(&["cat", &format!("{DEEP}/a.txt")]),
        })
        .await
        .expect("execute after recovery");
    assert_eq!(
        r.stdout_base64.as_slice(),
        want[0].as_ref().unwrap().as_bytes(),
        "{name}"
    );
    assert!(
        !journal_root.join("pause-token.json").exists(),
        "{name}: token left"
    );

    // What recovery left: an open journal (caller-owned, never rolled back)
    // before dispatch; settled evidence-free journals after.
    let left = tree(&journal_root);
    match step {
        ActiveWriteStep::Staged | ActiveWriteStep::Marked => assert!(
            left.iter().any(|p| p.ends_with("staged/0")),
            "{name}: the open journal was rolled back: {left:?}"
        ),
        _ => assert!(
            !left
                .iter()
                .any(|p| p.contains("staged") || p.contains("rollback")),
            "{name}: evidence left after recovery: {left:?}"
        ),
    }

    // The redelivery settles the transaction; nothing but the settled
    // journal remains.
    let member = SandboxProvider::begin_active_write(&fresh).expect("member");
    let out = member
        .begin_active_write(ActiveWriteTransaction::proceeding(batch(&id)))
        .await
        .expect("redelivery");
    let (kind, want) = match step {
        ActiveWriteStep::Dispatched => ("rolled_back", &all_old),
        _ => ("committed", &all_new),
    };
    assert_eq!(out.kind(), kind, "{name}: redelivery outcome {out:?}");
    let files = [
        read(&mount, "a.txt"),
        read(&mount, "sub/b.txt"),
        read(&mount, "n.txt"),
    ];
    assert_eq!(&files, want, "{name}: after redelivery");
    let left = tree(&journal_root);
    assert_eq!(
        left.len(),
        2,
        "{name}: expected one settled journal, left {left:?}"
    );
    assert!(left[1].ends_with("/journal.json"), "{name}: {left:?}");
    let again = member
        .begin_active_write(ActiveWriteTransaction::proceeding(batch(&id)))
        .await
        .expect("second redelivery");
    assert_eq!(again, out, "{name}: redelivery gets the same outcome");

    // Destroy: nothing of the instance is left (ProviderEnv's drop checks
    // the scope and the state directory as well).
    fresh
        .destroy(DestroyRequest {
            instance_id: id.clone(),
        })
        .await
        .expect("destroy");
    assert!(
        !env.state_dir.join("instances").join(&id).exists(),
        "{name}: instance dir left"
    );
    assert_eq!(env.leftovers().await, (0, 0), "{name}: daemon objects left");
    let _ = Path::new(DEEP);
    true
}
