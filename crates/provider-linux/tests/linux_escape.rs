//! A workload that is root inside (uid 0, every capability dropped,
//! `no_new_privs`, the seccomp filter) cannot see host processes, read
//! host files outside its mounts, reach any network in `none` mode,
//! remount, ptrace, or use /proc or /sys to reach the host. Each probe is
//! also run on the host (the positive control) where it must detect what
//! it looks for, so a probe that can never fire does not pass for a wall.
//!
//! Needs root (namespaces, mounts, cgroups): without it each test prints
//! a `SKIP` line, except under `CI=true`, where it fails.

// The tests write and check host files by path.
#![allow(clippy::disallowed_methods)]

mod common;

use checkfu_sandbox_conformance::ConformanceTarget as _;
use checkfu_sandbox_contract::*;
use common::sandbox::{sh_command, Sandbox};

/// Runs `sh -c script` on the host with the same busybox (the positive
/// control); its stdout.
fn host_sh(script: &str) -> String {
    let bb = std::fs::canonicalize(common::busybox())
        .unwrap_or_else(|_| dirs_cache_busybox().expect("a busybox for the positive control"));
    let out = std::process::Command::new(bb)
        .args(["sh", "-c", script])
        .output()
        .expect("host busybox runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn dirs_cache_busybox() -> Option<std::path::PathBuf> {
    let home = std::env::var_os("CHECKFU_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/checkfu"))
        })?;
    let p = home.join("busybox-static/root/bin/busybox");
    p.exists().then_some(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_workload_runs_without_capabilities_under_seccomp() {
    let Some(s) = Sandbox::start("linux_escape_privileges").await else {
        return;
    };
    let (code, out, _) = s
        .sh("id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("0\n"), "root inside: {out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_processes_are_invisible() {
    let Some(s) = Sandbox::start("linux_escape_processes").await else {
        return;
    };
    // A host process with a marker only it carries.
    let mut marker = std::process::Command::new("sleep")
        .arg("314159")
        .spawn()
        .expect("sleep");
    let probe =
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'";
    let control = host_sh(probe);
    assert!(
        control.contains("314159"),
        "the probe sees host processes on the host: {control}"
    );
    let (_, out, _) = s.sh(probe).await;
    marker.kill().ok();
    marker.wait().ok();
    assert!(!out.contains("314159"), "a host process is visible: {out}");
    let visible: usize = out.lines().last().unwrap().trim().parse().unwrap();
    assert!(
        visible <= 8,
        "more processes than the instance's own: {out}"
    );
    // Nothing to signal outside either: pid 1 is the instance's init.
    let (code, _, _) = s.sh("kill -0 1 && kill -9 1; kill -0 1").await;
    assert_eq!(code, 0, "the init ignores signals from inside and stays");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_files_outside_the_mounts_are_unreachable() {
    let Some(s) = Sandbox::start("linux_escape_files").await else {
        return;
    };
    // A secret on the host, beside the provider's own state.
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("host-secret-2718");
    std::fs::write(&secret, "host secret").unwrap();
    let path = secret.to_str().unwrap();
    let probe = format!(
        "cat {path} 2>/dev/null; cat /proc/1/root{path} 2>/dev/null; \
find / -name host-secret-2718 2>/dev/null; \
cd /proc/self/root && cd ../../../.. && cat .{path} 2>/dev/null; true"
    );
    assert!(
        host_sh(&probe).contains("host secret"),
        "the probe reads it on the host"
    );
    let (_, out, _) = s.sh(&probe).await;
    assert!(
        !out.contains("host secret") && !out.contains("host-secret"),
        "{out}"
    );
    // The state directory (and its records) is not there either.
    let state = s.target.state_dir().to_str().unwrap().to_owned();
    let (code, _, _) = s.sh(&format!("ls {state}")).await;
    assert_ne!(code, 0);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_reaches_nothing() {
    let Some(s) = Sandbox::start("linux_escape_network").await else {
        return;
    };
    let listener = s.target.start_listener().await.unwrap();
    let probe = format!(
        "nc -w 2 {} {} </dev/null; cat /proc/net/dev",
        listener.host, listener.port
    );
    assert!(
        host_sh(&probe).contains(&listener.token),
        "the probe reaches it from the host"
    );
    let (_, out, _) = s.sh(&probe).await;
    s.target.stop_listener(&listener).await;
    assert!(!out.contains(&listener.token), "{out}");
    let interfaces: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(':').map(|(i, _)| i.trim()))
        .filter(|i| !i.contains('|'))
        .collect();
    assert_eq!(interfaces, vec!["lo"], "{out}");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_remount_ptrace_proc_or_sys_way_out() {
    let Some(s) = Sandbox::start("linux_escape_kernel").await else {
        return;
    };
    for (what, script) in [
        ("remount a read-only mount", "mount -o remount,rw /src"),
        ("write a read-only mount", "echo x > /src/data.txt"),
        (
            "mount a new proc",
            "mkdir -p /tmp/p && mount -t proc proc /tmp/p",
        ),
        (
            "mount the host's disk",
            "mount /dev/vda /tmp/p || mount -t tmpfs t /tmp/p",
        ),
        ("unmount /proc", "umount /proc"),
        ("chroot", "chroot / true"),
        ("unshare a namespace", "unshare -m true"),
        ("write a sysctl", "echo 1 > /proc/sys/kernel/sysrq"),
        (
            "write the core pattern",
            "echo '|/tmp/x' > /proc/sys/kernel/core_pattern",
        ),
        ("sysrq", "echo h > /proc/sysrq-trigger"),
        (
            "read kernel memory",
            "test -s /proc/kcore && head -c 1 /proc/kcore | grep -q .",
        ),
        (
            "read the init's memory (ptrace access)",
            "head -c 1 /proc/1/mem",
        ),
        (
            "a device node",
            "mknod /tmp/sda b 8 0 && head -c 1 /tmp/sda",
        ),
        ("the host name", "hostname evil"),
        ("anything in /sys", "test -n \"$(ls -A /sys)\""),
    ] {
        let (code, out, err) = s.sh(script).await;
        assert_ne!(code, 0, "{what}: `{script}` succeeded: {out} {err}");
    }
    let (_, out, _) = s.sh("cat /src/data.txt; hostname").await;
    assert_eq!(out, "read-only datacheckfu\n");
    s.close().await;
}

/// `tests/probes/user_namespace.c`, built static with the C compiler
/// Rust itself links with (`cc`): the busybox fixture has no way to call
/// `clone` with namespace flags.
fn user_namespace_probe(dir: &std::path::Path) -> std::path::PathBuf {
    common::sandbox::c_probe(dir, "user_namespace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_user_namespace_through_clone_or_clone3() {
    let Some(s) = Sandbox::start("linux_escape_user_namespace").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let probe = user_namespace_probe(dir.path());
    // The positive control: on the host (root) the probe makes both.
    let host = std::process::Command::new(&probe).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&host.stdout),
        "clone: made\nclone3: made\nthread: ran\n"
    );
    s.stage(&probe).await;
    let (code, out, err) = s.sh("/tmp/user_namespace").await;
    assert_eq!(code, 0, "{err}");
    // clone refused outright; clone3 as a kernel without it, so the C
    // library falls back to clone for its threads, which still start.
    assert_eq!(out, "clone: EPERM\nclone3: ENOSYS\nthread: ran\n");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_limits_hold_the_workload() {
    let Some(s) = Sandbox::start("linux_escape_limits").await else {
        return;
    };
    // pids: 64 at most; a fork bomb (in a subshell, which dies at the
    // first refused fork) stops there and the instance lives on.
    let (code, out, err) = s
        .sh("(i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo $#")
        .await;
    let n: usize = out
        .trim()
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("exit {code}: {out} / {}", &err[..err.len().min(2000)]));
    assert!(n > 8, "the bomb started processes: {out}");
    // The instance's init and the command's supervisor are visible too;
    // the limit does not count them (decision 049).
    assert!(n <= 64 + 2, "{n} processes visible under a limit of 64");
    // memory: 128 MiB; holding 256 MiB (sort keeps its input) is killed
    // (the host has no swap to spill into; with swap the limit would
    // still hold, more slowly).
    let (code, _, _) = s.sh("head -c 268435456 /dev/zero | sort >/dev/null").await;
    assert_ne!(code, 0, "256 MiB held in memory under a 128 MiB limit");
    let (code, out, _) = s.sh("echo alive").await;
    assert_eq!((code, out.as_str()), (0, "alive\n"));
    s.close().await;
}

/// A descriptor the provider's process holds without close-on-exec (one
/// its own caller left open, say) does not reach the workload: it would
/// be a handle on host files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_of_the_provider_process_do_not_reach_the_workload() {
    let Some(s) = Sandbox::start("linux_escape_fds").await else {
        return;
    };
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("inherited-secret");
    std::fs::write(&secret, "inherited secret").unwrap();
    let held = checkfu_test_support::fds::hold_inheritable(&secret);
    let probe = format!("cat /proc/self/fd/{held} 2>/dev/null; ls /proc/self/fd");
    assert!(
        host_sh(&probe).contains("inherited secret"),
        "the probe reads it on the host"
    );
    let (_, out, _) = s.sh(&probe).await;
    assert!(!out.contains("inherited secret"), "{out}");
    let fds: Vec<&str> = out.split_whitespace().collect();
    assert!(!fds.contains(&held.to_string().as_str()), "{out}");
    checkfu_test_support::fds::release_inheritable(held);
    s.close().await;
}

/// The modification times of the host's device nodes an instance shows.
fn host_node_times() -> Vec<(String, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    ["null", "zero", "full", "random", "urandom"]
        .iter()
        .map(|n| {
            let m = std::fs::metadata(format!("/dev/{n}")).expect("a host node");
            ((*n).to_owned(), m.mtime())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_device_nodes_cannot_be_changed_from_inside() {
    let Some(s) = Sandbox::start("linux_escape_nodes").await else {
        return;
    };
    // The workload is uid 0, the owner of every node: with write access
    // to a host node's inode it could touch, chown or chmod it. (Only
    // touch and chown are tried: a chmod that got through would break the
    // host.) /dev/null also masks files of /proc.
    let script = "touch -d 2001-01-01 /dev/null /dev/zero /dev/full /dev/random /dev/urandom \
/proc/keys /proc/kmsg /proc/timer_list 2>/dev/null; chown 0:0 /dev/null /proc/keys 2>/dev/null; \
stat -c %y /dev/null | cut -c1-4";
    let before = host_node_times();
    // /dev from the image's shared tree: a touch changes the instance's own
    // copy of the node (the overlay copies it up), never the host's.
    let (_, out, _) = s.sh(script).await;
    assert_eq!(host_node_times(), before, "inside: {out}");
    if s.target.linux_provider().uses_overlay() {
        assert_eq!(out, "2001\n", "the probe reached the instance's node");
    }
    // /dev on a tmpfs with the host's nodes bound in (a tree unpacked
    // before the store added /dev): the binds are read-only.
    let p = s.target.linux_provider();
    let tree = p
        .images()
        .rootfs_dir(s.target.root_image().digest().hex())
        .join("dev");
    for e in std::fs::read_dir(&tree).expect("the tree's /dev") {
        std::fs::remove_file(e.expect("entry").path()).expect("remove a /dev entry");
    }
    let second = Sandbox::activate_one(&s.target).await;
    let (_, out, _) = s.sh_in(&second, script).await;
    assert_eq!(host_node_times(), before, "inside: {out}");
    assert_ne!(out, "2001\n");
    s.close().await;
}

/// Until its `execve` a command's last step shares the address space of
/// its supervisors: the provider's own, when the instance's init starts
/// it. A uid 0 workload's ids do not change when that step drops its
/// capabilities, so without more the kernel let another workload process
/// read and write that address space through `/proc/<pid>/mem`
/// (`environ`, `maps`): no system call the filter could refuse. Shown
/// before the fix: a probe running beside a few hundred commands found the
/// provider's environment and wrote into its stack. The probe looks for an
/// entry of the provider's environment, which no workload process has,
/// while 1000 commands start, on both paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_being_started_does_not_open_the_providers_memory() {
    let Some(s) = Sandbox::start("linux_escape_provider_memory").await else {
        return;
    };
    let environ = std::fs::read("/proc/self/environ").unwrap();
    let marker = environ
        .split(|&b| b == 0)
        .filter_map(|e| std::str::from_utf8(e).ok())
        .find(|e| e.starts_with("CARGO_MANIFEST_DIR="))
        .or_else(|| {
            environ
                .split(|&b| b == 0)
                .filter_map(|e| std::str::from_utf8(e).ok())
                .filter(|e| {
                    !["PATH=", "HOME=", "HOSTNAME="]
                        .iter()
                        .any(|k| e.starts_with(k))
                })
                .max_by_key(|e| e.len())
        })
        .expect("an entry in the provider's environment")
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    s.stage(&common::sandbox::c_probe(dir.path(), "provider_memory"))
        .await;
    let p = s.target.linux_provider();
    // The positive control: the probe finds a process of the same command
    // that holds its marker, and could open its memory.
    let r = p
        .execute(sh_command(
            &s.id,
            "CHECKFU_SIBLING=1 sleep 30 & /tmp/provider_memory CHECKFU_SIBLING=1 /nothing; kill $!",
            None,
        ))
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout_base64.0).into_owned();
    assert!(
        out.starts_with("found: pid ") && out.ends_with("mem O_RDWR: yes\n"),
        "{r:?}"
    );

    let probe = {
        let p = p.clone();
        let request = sh_command(
            &s.id,
            &format!("exec /tmp/provider_memory '{marker}' /tmp/stop"),
            None,
        );
        tokio::spawn(async move { p.execute(request).await })
    };
    // Half started by the instance's init, half entering from the host
    // (a provider that did not start the init; there the window showed
    // C''s copy of the provider, which runs as root with every capability).
    let other = checkfu_sandbox_linux::LinuxProvider::new(checkfu_sandbox_linux::LinuxConfig {
        state_dir: s.target.state_dir().to_path_buf(),
        scope: s.target.scope().to_owned(),
        clock: std::sync::Arc::new(SystemClock),
        workload_user: checkfu_sandbox_linux::WorkloadUser::Root,
    })
    .expect("a second provider");
    for i in 0..1000 {
        if probe.is_finished() {
            break;
        }
        let through = if i % 2 == 0 { p } else { &other };
        let r = through
            .execute(sh_command(&s.id, "true", None))
            .await
            .unwrap();
        assert_eq!(r.exit, ExitCause::ExitCode(0));
    }
    let (code, _, _) = s.sh("touch /tmp/stop").await;
    assert_eq!(code, 0);
    let r = probe.await.unwrap().unwrap();
    let out = String::from_utf8_lossy(&r.stdout_base64.0).into_owned();
    assert_eq!(
        (r.exit, out.as_str()),
        (ExitCause::ExitCode(1), "not found\n"),
        "{r:?}"
    );
    // The address space the provider shares with its inits is not
    // dumpable (the flag is the address space's: this process's).
    assert_eq!(
        rustix::process::dumpable_behavior().unwrap(),
        rustix::process::DumpableBehavior::NotDumpable
    );
    s.close().await;
}
