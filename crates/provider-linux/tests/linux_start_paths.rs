//! The two ways a command starts in a Linux instance (decision 046)
//! give it the same confinement: started by the instance's own init (the
//! provider that started the init) and entering from the host (any other
//! provider over the same state directory and scope). Each path is told
//! apart by who started the command's supervisor, so a test cannot pass
//! on the wrong path. A command whose execute is abandoned is killed and
//! leaves nothing behind.
//!
//! Needs root: without it each test prints a `SKIP` line, except under
//! `CI=true`, where it fails.

// The tests read host files (/proc) by path.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::unix::fs::MetadataExt as _;
use std::time::Duration;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_contract::*;

use common::sandbox::Sandbox;

/// What a command sees of its confinement, printed one fact per line
/// (its own pid namespace and /proc entries, which differ per command,
/// left out).
const PROBE: &str = r#"
id
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|Umask):' /proc/self/status
cat /proc/self/cgroup
for ns in mnt net uts ipc; do echo "$ns $(readlink /proc/self/ns/$ns)"; done
pwd; hostname; echo "pid in its namespace: $$ parent: $PPID"
ls /proc/self/fd
env | sort
"#;

/// The pid, in the instance's namespace, of the parent of the command's
/// supervisor (the pid 1 of the command's own namespace): 1 when the
/// instance's init started it; on the path from the host, the
/// supervisor that entered the instance, never the init.
/// (The shell reads both files itself: `/proc/self` is the shell.)
const GRANDPARENT: &str = r#"
while read k v; do [ "$k" = PPid: ] && sup=$v; done < /proc/self/status
while read k v; do [ "$k" = PPid: ] && echo "$v"; done < /proc/$sup/status
exit 0
"#;

#[tokio::test]
async fn both_start_paths_give_a_command_the_same_confinement() {
    let Some(s) = Sandbox::start("both_start_paths_give_a_command_the_same_confinement").await
    else {
        return;
    };
    let other = s.other_provider();
    // The first command after activation: the init installs the filters
    // after it reports readiness, and before it starts any command.
    let (code, inside, err) = s.sh(PROBE).await;
    assert_eq!(code, 0, "{err}");
    let (code, by_init, _) = s.sh(GRANDPARENT).await;
    assert_eq!((code, by_init.trim()), (0, "1"), "started by the init");
    let (code, entered, _) = s.sh_through(&other, GRANDPARENT).await;
    assert_eq!(code, 0);
    assert!(
        !["", "1"].contains(&entered.trim()),
        "entered from the host: {entered:?}"
    );

    let (code, outside, err) = s.sh_through(&other, PROBE).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(inside, outside);
    for line in [
        "uid=0(root) gid=0(root)",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "pid in its namespace: 2 parent: 1",
    ] {
        assert!(inside.contains(line), "{line:?} in\n{inside}");
    }
    // stdio only: nothing of the provider or the init reaches it.
    assert!(inside.contains("\n0\n1\n2\n3\n"), "{inside}");
    drop(other);
    s.close().await;
}

#[tokio::test]
async fn an_abandoned_execute_leaves_no_process() {
    let Some(s) = Sandbox::start("an_abandoned_execute_leaves_no_process").await else {
        return;
    };
    let scope = s.target.scope().to_owned();
    let alone = common::processes_in_scope(&scope);
    assert_eq!(alone.len(), 1, "only the init: {alone:?}");
    let run = s.sh("sleep 60 & sleep 60");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), run)
            .await
            .is_err(),
        "the command should still run"
    );
    let mut left = common::processes_in_scope(&scope);
    for _ in 0..100 {
        if left == alone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = common::processes_in_scope(&scope);
    }
    assert_eq!(left, alone, "only the init is left");
    // The instance still serves commands.
    let (code, out, _) = s.sh("echo again").await;
    assert_eq!((code, out.as_str()), (0, "again\n"));
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commands_in_one_instance_each_get_their_own_pipes() {
    let Some(s) =
        Sandbox::start("concurrent_commands_in_one_instance_each_get_their_own_pipes").await
    else {
        return;
    };
    let runs = (0..24).map(|i| {
        let s = &s;
        async move {
            let (code, out, err) = s
                .sh(&format!("echo out{i}; echo err{i} >&2; exit {}", i % 7))
                .await;
            (i, code, out, err)
        }
    });
    for (i, code, out, err) in futures_util::future::join_all(runs).await {
        assert_eq!(code, (i % 7) as u8);
        assert_eq!(out, format!("out{i}\n"));
        assert_eq!(err, format!("err{i}\n"));
    }
    let scope = s.target.scope().to_owned();
    assert_eq!(common::processes_in_scope(&scope).len(), 1, "only the init");
    s.close().await;
}

/// Opens `sh -c script` as a live process of the instance.
async fn open(s: &Sandbox, script: &str) -> SandboxProcess {
    let member =
        SandboxProvider::open_process(s.target.linux_provider()).expect("openProcess is offered");
    member
        .open_process(SandboxProcessRequest {
            instance_id: s.id.clone(),
            executable: "sh".into(),
            arguments: vec!["-c".into(), script.into()],
            working_directory: "/".into(),
            environment: Default::default(),
        })
        .await
        .expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_reach_a_process_the_init_started() {
    let Some(s) = Sandbox::start("signals_reach_a_process_the_init_started").await else {
        return;
    };
    let wait = |p: SandboxProcess| async move {
        tokio::time::timeout(Duration::from_secs(10), p.control.wait())
            .await
            .expect("settles")
            .expect("an exit")
    };
    for (signal, script, exit) in [
        (
            ControlSignal::Sigterm,
            "exec sleep 60",
            ProcessExit::Signal(SignalName::from_number(libc::SIGTERM)),
        ),
        (
            ControlSignal::Sigint,
            "exec sleep 60",
            ProcessExit::Signal(SignalName::from_number(libc::SIGINT)),
        ),
        // A process that ignores TERM still ends on KILL, with its
        // namespace.
        (
            ControlSignal::Sigkill,
            "trap '' TERM INT; sleep 60 & sleep 60",
            ProcessExit::Signal(SignalName::from_number(libc::SIGKILL)),
        ),
        // A trapped TERM is the program's to handle.
        (
            ControlSignal::Sigterm,
            "trap 'exit 7' TERM; while :; do sleep 0.05; done",
            ProcessExit::ExitCode(7),
        ),
    ] {
        let p = open(&s, script).await;
        // Let the shell install its traps before the signal.
        tokio::time::sleep(Duration::from_millis(200)).await;
        p.control.signal(signal).await.expect("signal");
        assert_eq!(wait(p).await, exit, "{signal:?} to `{script}`");
        assert_eq!(
            common::processes_in_scope(s.target.scope()).len(),
            1,
            "nothing of `{script}` is left"
        );
    }
    s.close().await;
}

/// execute's timeout counts from the request, the start included: an
/// instance that cannot start the command (frozen here through its
/// cgroup freezer, as an operator could; its init then never answers)
/// gives `TimedOut` after the bound instead of holding the caller. Thawed,
/// the instance runs commands again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_held_up_by_a_frozen_instance_times_out() {
    use checkfu_sandbox_linux::cgroup::{self, FreezerSupport, InstanceCgroups};
    const TEST: &str = "a_start_held_up_by_a_frozen_instance_times_out";
    let Some(s) = Sandbox::start(TEST).await else {
        return;
    };
    if let FreezerSupport::Unavailable(why) = FreezerSupport::probe_cached() {
        checkfu_test_support::gate::skip_or_fail(TEST, &format!("no cgroup freezer: {why}"));
        s.close().await;
        return;
    }
    let version = cgroup::detect().expect("cgroups");
    let groups = InstanceCgroups::new(version, s.target.scope(), &s.id);
    let other = s.other_provider();
    for (path, provider) in [
        ("started by the init", s.target.linux_provider()),
        ("entering from the host", &other),
    ] {
        groups.freeze().expect("freeze");
        let mut request = common::sandbox::sh_command(&s.id, "echo never", None);
        request.command.timeout_seconds = 1;
        // A guard against the hang this test is about, not a timing check.
        let r = tokio::time::timeout(Duration::from_secs(30), provider.execute(request)).await;
        groups.thaw().expect("thaw");
        let r = r
            .unwrap_or_else(|_| panic!("{path}: execute returned"))
            .expect("a result");
        assert_eq!(r.exit, ExitCause::TimedOut, "{path}: {r:?}");
        assert!(r.stdout_base64.0.is_empty(), "{path}: {r:?}");
    }
    drop(other);
    assert_eq!(s.sh("echo alive").await.1, "alive\n");
    s.close().await;
}

/// When the instance's cgroups cannot be made, activation fails with the
/// cgroup's own error, no process and no group of the instance is left,
/// and the instance is still `provisioning`: it activates once they can
/// be. Made to fail on cgroup v1 through the CPU controller's rule that a
/// group's quota may not exceed its parent's: the scope's group gets 1 ms
/// per period, the request asks for a whole CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroups_that_cannot_be_made_fail_activation_by_name_and_leave_no_init() {
    use checkfu_sandbox_linux::cgroup::{
        self, CgroupVersion, InstanceCgroups, CGROUP_PARENT, CGROUP_ROOT,
    };
    const TEST: &str = "cgroups_that_cannot_be_made_fail_activation_by_name_and_leave_no_init";
    if !common::available_or_skip(TEST) {
        return;
    }
    if cgroup::detect() != Some(CgroupVersion::V1) {
        // cgroup v2 lets a child's cpu.max exceed its parent's: this way
        // of refusing a group does not exist there.
        eprintln!("{TEST}: cgroup v2 host, the v1 refusal this test uses is not exercised");
        return;
    }
    let Some(target) = common::sandbox::fresh_target(TEST).await else {
        return;
    };
    let p = target.linux_provider();
    let scope_cpu = std::path::Path::new(CGROUP_ROOT)
        .join("cpu")
        .join(CGROUP_PARENT)
        .join(target.scope());
    std::fs::create_dir_all(&scope_cpu).expect("the scope's cpu group");
    std::fs::write(scope_cpu.join("cpu.cfs_quota_us"), "1000").expect("the scope's quota");
    let mut request = common::sandbox::request(target.root_image());
    request.profile.resources.cpu_millis = Some(1000);
    let id = common::sandbox::provision(p, request).await;
    let e = common::sandbox::activate(p, &id)
        .await
        .expect_err("a quota over the parent's is refused");
    let message = e.to_string();
    assert!(
        message.contains("creating the cgroups") && message.contains("cpu.cfs_quota_us"),
        "{message}"
    );
    assert!(common::processes_in_scope(target.scope()).is_empty());
    let instance = InstanceCgroups::new(CgroupVersion::V1, target.scope(), &id);
    assert!(
        instance.dirs().iter().all(|d| !d.exists()),
        "{:?}",
        instance.dirs()
    );
    // Still provisioning: with the quota lifted, the same instance
    // activates and runs.
    std::fs::write(scope_cpu.join("cpu.cfs_quota_us"), "-1").expect("no quota");
    common::sandbox::activate(p, &id)
        .await
        .expect("activate once the groups can be made");
    common::sandbox::assert_prints_ok(p, &id, "echo ok", "the groups made").await;
    target.close().await.expect("nothing left");
}

/// An activation that fails after the init mounted the instance's root
/// (here: the output tree's host directory is gone, so its bind fails)
/// leaves nothing running, and the instance can be activated again once
/// the cause is gone. The root overlay is mounted `volatile`, whose work
/// directory refuses a second mount until overlayfs's own work tree is
/// removed (decision 051): without that, the second activation failed
/// with `EINVAL` on the root's mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activation_that_failed_after_the_root_was_mounted_can_be_retried() {
    let Some(target) = common::sandbox::fresh_target(
        "an_activation_that_failed_after_the_root_was_mounted_can_be_retried",
    )
    .await
    else {
        return;
    };
    let p = target.linux_provider();
    let id = common::sandbox::provision(p, common::sandbox::request(target.root_image())).await;
    let outputs = target
        .state_dir()
        .join("instances")
        .join(&id)
        .join("outputs");
    let meta = std::fs::metadata(&outputs).expect("the output tree's host directory");
    std::fs::remove_dir(&outputs).expect("remove the output tree");
    let e = common::sandbox::activate(p, &id)
        .await
        .expect_err("no output tree to bind");
    assert!(e.to_string().contains("bind-mounting"), "{e}");
    assert!(common::processes_in_scope(target.scope()).is_empty());
    std::fs::create_dir(&outputs).expect("the output tree again");
    std::os::unix::fs::chown(&outputs, Some(meta.uid()), Some(meta.gid())).expect("its owner");
    common::sandbox::activate(p, &id)
        .await
        .expect("activate again");
    let script = "echo ok > /mnt/session/outputs/f && cat /mnt/session/outputs/f";
    common::sandbox::assert_prints_ok(p, &id, script, "the retry").await;
    target.close().await.expect("nothing left");
}

/// An activation rolled back through its handoff (the caller could not
/// take the instance) puts it back to `provisioning`; activating it again
/// mounts the same `volatile` layer, which needs overlayfs's work tree
/// cleared once the first init is gone (decision 051).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activation_rolled_back_can_be_activated_again() {
    let Some(target) =
        common::sandbox::fresh_target("an_activation_rolled_back_can_be_activated_again").await
    else {
        return;
    };
    let p = target.linux_provider();
    let id = common::sandbox::provision(p, common::sandbox::request(target.root_image())).await;
    let first = common::sandbox::activate(p, &id).await.expect("activate");
    first
        .rollback
        .rollback()
        .await
        .expect("roll the activation back");
    assert!(common::processes_in_scope(target.scope()).is_empty());
    common::sandbox::activate(p, &id)
        .await
        .expect("activate again");
    common::sandbox::assert_prints_ok(p, &id, "echo ok", "after the rollback").await;
    target.close().await.expect("nothing left");
}

/// Two activations of one instance at once (a caller past the runtime,
/// which runs one lifecycle call per instance): one starts the instance,
/// the other is refused as a lifecycle conflict without touching what the
/// first started (its layer, its cgroups), and the instance runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_activation_at_once_is_refused_and_leaves_the_first_running() {
    let Some(target) = common::sandbox::fresh_target(
        "a_second_activation_at_once_is_refused_and_leaves_the_first_running",
    )
    .await
    else {
        return;
    };
    let p = target.linux_provider();
    for round in 0..5 {
        let id = common::sandbox::provision(p, common::sandbox::request(target.root_image())).await;
        let (a, b) = tokio::join!(
            common::sandbox::activate(p, &id),
            common::sandbox::activate(p, &id)
        );
        let lost = match (a, b) {
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
            (a, b) => panic!("round {round}: exactly one activation succeeds: {a:?} {b:?}"),
        };
        assert!(
            matches!(lost, SandboxError::SandboxLifecycleConflict { .. }),
            "round {round}: {lost:?}"
        );
        let round = format!("round {round}");
        common::sandbox::assert_prints_ok(p, &id, "echo ok", &round).await;
    }
    target.close().await.expect("nothing left");
}
