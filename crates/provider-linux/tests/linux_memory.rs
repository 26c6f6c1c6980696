//! A workload over its memory limit is killed by the kernel, and only the
//! workload: never the provider.
//!
//! The memory cgroup's OOM killer weighs each member of the group by the
//! resident memory of its address space, and kills every process that
//! shares the address space of the one it picks. An instance's init
//! shares the provider's (decision 043), and a command's host-side
//! supervisor a copy of it: as members they outweighed any workload, and
//! the kernel killed the provider with the init (seen: `checkfu sandbox
//! run --memory 128M` of this test's hog ended with the CLI killed,
//! exit 137, and the instance's cgroups left behind). Decision 049 keeps
//! every supervisor out of the memory group; each command joins it just
//! before its `execve`.
//!
//! Needs root: without it each test prints a `SKIP` line, except under
//! `CI=true`, where it fails.

// The tests read cgroup files and /proc by path.
#![allow(clippy::disallowed_methods)]

mod common;

use checkfu_sandbox_contract::{ExitCause, SandboxProvider as _};
use checkfu_sandbox_linux::cgroup::{self, InstanceCgroups};
use common::sandbox::{c_probe, Sandbox};

/// Host pids of the members of the instance's group that holds the
/// memory limit.
fn memory_group_members(s: &Sandbox) -> Vec<i32> {
    let version = cgroup::detect().expect("cgroups");
    let groups = InstanceCgroups::new(version, s.target.scope(), &s.id);
    let file = match version {
        cgroup::CgroupVersion::V1 => "tasks",
        cgroup::CgroupVersion::V2 => "cgroup.procs",
    };
    std::fs::read_to_string(groups.dirs()[0].join(file))
        .expect("the memory group")
        .lines()
        .map(|l| l.parse().expect("a pid"))
        .collect()
}

/// Whether host process `pid` runs this test's executable: the
/// provider's own processes (an instance's init, which shares this
/// process's address space, a command's supervisors, or a command before
/// its `execve`) do; a workload process, which runs the image's
/// programs, never does.
fn runs_the_provider(pid: i32) -> bool {
    let exe = |p: String| std::fs::read_link(p).ok();
    let own = exe("/proc/self/exe".into());
    own.is_some() && exe(format!("/proc/{pid}/exe")) == own
}

/// The host pid of the instance's init: the process of its groups that
/// runs the provider (between commands, the only one).
fn init_pid(s: &Sandbox) -> Option<i32> {
    common::processes_in_scope(s.target.scope())
        .into_iter()
        .find(|&p| runs_the_provider(p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_over_its_memory_limit_is_killed_and_the_provider_is_not() {
    let Some(s) = Sandbox::start("linux_memory_over_the_limit").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    s.stage(&c_probe(dir.path(), "memory_hog")).await;
    let other = s.other_provider();
    // The sandbox's limit is 128 MiB: 40 children touching 5 MiB each
    // need 200 MiB, so the kernel must kill some of them.
    for (path, provider) in [
        ("started by the init", s.target.linux_provider()),
        ("entering from the host", &other),
    ] {
        // While it runs, the memory group is sampled: the hog's processes
        // are in it, no process of the provider ever is.
        let running = std::sync::atomic::AtomicBool::new(true);
        let run = async {
            let r = s.sh_through(provider, "/tmp/memory_hog 40 5 2").await;
            running.store(false, std::sync::atomic::Ordering::Relaxed);
            r
        };
        let sample = async {
            let (mut seen, mut provider_members) = (0, Vec::new());
            while running.load(std::sync::atomic::Ordering::Relaxed) {
                let members = memory_group_members(&s);
                seen = seen.max(members.len());
                provider_members.extend(members.into_iter().filter(|&p| runs_the_provider(p)));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            (seen, provider_members)
        };
        let ((code, out, err), (seen, provider_members)) = tokio::join!(run, sample);
        assert!(
            seen > 1,
            "{path}: the hog was never seen in the memory group"
        );
        assert_eq!(
            provider_members,
            Vec::<i32>::new(),
            "{path}: processes of the provider in the memory group"
        );
        assert_eq!(code, 0, "{path}: {out} {err}");
        let killed: u32 = out
            .trim()
            .strip_prefix("killed ")
            .and_then(|r| r.strip_suffix(" of 40"))
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{path}: the hog's report: {out:?} {err:?}"));
        assert!(
            killed > 0,
            "{path}: no child was killed: the limit was not enforced"
        );
        // This test's process is the provider: reaching here, it lived.
    }
    // The init stands in the instance's other groups (v1), never in the
    // memory group, and the instance still runs commands.
    let init = init_pid(&s);
    if cgroup::detect() == Some(cgroup::CgroupVersion::V1) {
        assert!(init.is_some(), "the init is in the instance's pids group");
    }
    assert!(!memory_group_members(&s).iter().any(|p| Some(*p) == init));
    assert_eq!(s.sh("echo alive").await.1, "alive\n");
    drop(other);
    s.close().await;
}

/// A command whose own `execve` does not fit in the limit fails as the
/// workload's, with the reason: every step of its start before the
/// `execve` runs outside the limit (decision 049), so nothing of the
/// start fails silently. The provider and the instance go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_too_small_for_a_command_ends_that_command_only() {
    let Some(s) = Sandbox::start("linux_memory_limit_too_small").await else {
        return;
    };
    let version = cgroup::detect().expect("cgroups");
    let groups = InstanceCgroups::new(version, s.target.scope(), &s.id);
    let limit = match version {
        cgroup::CgroupVersion::V1 => "memory.limit_in_bytes",
        cgroup::CgroupVersion::V2 => "memory.max",
    };
    let limit = groups.dirs()[0].join(limit);
    // Lowered to one page once the instance runs: no program's `execve`
    // fits in it.
    std::fs::write(&limit, "4096").expect("lower the limit");
    let r = s
        .target
        .linux_provider()
        .execute(common::sandbox::sh_command(&s.id, "echo never", None))
        .await;
    std::fs::write(&limit, (128u64 << 20).to_string()).expect("restore the limit");
    let r = r.expect("the command's outcome, not the provider's failure");
    let stderr = String::from_utf8_lossy(&r.stderr_base64.0);
    assert_eq!(r.exit, ExitCause::ExitCode(126), "{r:?} {stderr}");
    assert!(stderr.starts_with("exec \"sh\": "), "{stderr}");
    assert!(r.stdout_base64.0.is_empty(), "{r:?}");
    assert_eq!(s.sh("echo alive").await.1, "alive\n");
    s.close().await;
}
