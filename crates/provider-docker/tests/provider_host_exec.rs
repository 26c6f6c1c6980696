//! The host exec path (decision 045): a command entered
//! from the host runs with exactly the confinement `docker exec` gives the
//! same container (user, groups, capability sets, `no_new_privs`, seccomp
//! mode and filter count, cgroups, namespaces but the PID namespace, which
//! is nested in the container's by design), nothing it starts outlives it
//! (`setsid` included), and `CHECKFU_DOCKER_EXEC=daemon` (here
//! `ExecPath::Daemon`) sends every command through the daemon.

// The shared test helpers open kernel files by path.
#![allow(clippy::disallowed_methods)]

mod common;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::egress::EgressConfig;
use checkfu_sandbox_docker::{daemon, ExecPath, ExecRoute};
use common::provider_env::{command, ProviderEnv};

/// Prints the confinement of the process running it: the status fields
/// `docker exec` decides, its cgroups, and every namespace link but the
/// PID namespace's.
const PROBE: &str = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|Umask):' /proc/self/status; \
cat /proc/self/cgroup; \
for n in cgroup ipc mnt net uts user time; do echo \"$n $(readlink /proc/self/ns/$n)\"; done; \
id";

/// `same` when the command is in the PID namespace of the container's
/// init, `nested` otherwise.
const PID_NS: &str = "if [ \"$(readlink /proc/self/ns/pid)\" = \"$(readlink /proc/1/ns/pid)\" ]; then echo same; else echo nested; fi";

/// A provider on `path` and one active instance of it.
async fn active_with(test: &str, path: ExecPath) -> Option<(ProviderEnv, String)> {
    let docker = common::docker_or_skip(test).await?;
    let env =
        ProviderEnv::with_exec_path(test, docker, EgressConfig::default(), 0, Some(path)).await;
    let inst = env
        .active(env.request("s", RetentionMode::EphemeralZdr, &[], 600), &[])
        .await;
    Some((env, inst.instance_id))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_path_command_has_the_confinement_of_docker_exec() {
    let test = "a_host_path_command_has_the_confinement_of_docker_exec";
    let Some((env, id)) = active_with(test, ExecPath::Host).await else {
        return;
    };
    let id = id.as_str();
    assert_eq!(env.provider.exec_route(id), ExecRoute::Host);

    let host = env.run(id, &["sh", "-c", PROBE]).await;
    assert_eq!(
        host.exit,
        ExitCause::ExitCode(0),
        "{}",
        text(&host.stderr_base64.0)
    );
    let container = env.provider.container_of(id).expect("container");
    let exec = daemon::exec_bounded(
        env.provider.docker(),
        &container,
        &daemon::ExecRequest::new(&["sh", "-c", PROBE]),
    )
    .await
    .expect("docker exec");
    let daemon::ExecOutcome::Exited {
        code: 0, stdout, ..
    } = exec.outcome
    else {
        panic!("docker exec of the probe: {:?}", exec.outcome);
    };
    let (host, daemon) = (text(&host.stdout_base64.0), text(&stdout));
    assert_eq!(host, daemon, "host path (left) and docker exec (right)");
    // What the comparison covers, as this container has it.
    for line in [
        "Uid:\t1000\t1000\t1000\t1000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(host.contains(line), "{line:?} in {host}");
    }
    assert!(
        host.contains(&container[..12]) || host.contains("docker"),
        "cgroups: {host}"
    );

    // The PID namespace is the command's own, nested in the container's
    // (the container's init, pid 1 of its /proc, is in another).
    let r = env.run(id, &["sh", "-c", PID_NS]).await;
    assert_eq!(text(&r.stdout_base64.0).trim(), "nested", "{r:?}");

    env.adapter.destroy(id).await.expect("destroy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_host_path_command_starts_outlives_it() {
    let test = "nothing_a_host_path_command_starts_outlives_it";
    let Some((env, id)) = active_with(test, ExecPath::Host).await else {
        return;
    };
    let id = id.as_str();
    assert_eq!(env.provider.exec_route(id), ExecRoute::Host);
    // A background child in a session of its own, after a normal exit.
    let r = env
        .run(
            id,
            &[
                "sh",
                "-c",
                "setsid sleep 4242 </dev/null >/dev/null 2>&1 & exit 0",
            ],
        )
        .await;
    assert_eq!(r.exit, ExitCause::ExitCode(0));
    // The same past a timeout.
    let mut c = command(&[
        "sh",
        "-c",
        "setsid sleep 4343 </dev/null >/dev/null 2>&1 & sleep 600",
    ]);
    c.timeout_seconds = 1;
    let r = env.adapter.execute(id, c).await.expect("execute");
    assert_eq!(r.exit, ExitCause::TimedOut);
    // Seen from the container's own PID namespace (docker exec).
    let container = env.provider.container_of(id).expect("container");
    let ps = daemon::exec_bounded(
        env.provider.docker(),
        &container,
        &daemon::ExecRequest::new(&["ps", "-o", "args"]),
    )
    .await
    .expect("docker exec ps");
    let daemon::ExecOutcome::Exited { stdout, .. } = ps.outcome else {
        panic!("ps: {:?}", ps.outcome);
    };
    let ps = text(&stdout);
    assert!(
        !ps.contains("sleep 4242") && !ps.contains("sleep 4343"),
        "a setsid child survived its command: {ps}"
    );
    env.adapter.destroy(id).await.expect("destroy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_path_is_taken_when_chosen() {
    let test = "the_daemon_path_is_taken_when_chosen";
    let Some((env, id)) = active_with(test, ExecPath::Daemon).await else {
        return;
    };
    let id = id.as_str();
    match env.provider.exec_route(id) {
        ExecRoute::Daemon { reason } => {
            assert!(reason.contains("CHECKFU_DOCKER_EXEC=daemon"), "{reason}")
        }
        ExecRoute::Host => panic!("ExecPath::Daemon took the host path"),
    }
    // A daemon exec runs in the container's own PID namespace.
    let r = env.run(id, &["sh", "-c", PID_NS]).await;
    assert_eq!(text(&r.stdout_base64.0).trim(), "same", "{r:?}");
    env.adapter.destroy(id).await.expect("destroy");
}

/// A descriptor the provider's process holds without close-on-exec (one
/// its own caller left open, say) does not reach a host-path command, as
/// it does not reach a `docker exec` one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_of_the_provider_process_do_not_reach_a_host_path_command() {
    let test = "descriptors_of_the_provider_process_do_not_reach_a_host_path_command";
    let Some((env, id)) = active_with(test, ExecPath::Host).await else {
        return;
    };
    let id = id.as_str();
    assert_eq!(env.provider.exec_route(id), ExecRoute::Host);
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("inherited-secret");
    std::fs::write(&secret, "inherited secret").expect("secret");
    let held = checkfu_test_support::fds::hold_inheritable(&secret);
    let probe = format!("cat /proc/self/fd/{held} 2>/dev/null; ls /proc/self/fd");
    let r = env.run(id, &["sh", "-c", &probe]).await;
    checkfu_test_support::fds::release_inheritable(held);
    let out = text(&r.stdout_base64.0);
    assert!(!out.contains("inherited secret"), "{out}");
    assert!(
        !out.split_whitespace().any(|f| f == held.to_string()),
        "descriptor {held} reached the command: {out}"
    );
    env.adapter.destroy(id).await.expect("destroy");
}
