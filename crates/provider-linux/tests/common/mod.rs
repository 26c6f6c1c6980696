//! Shared by the Linux provider's tests: the root gate and host checks of
//! what an instance leaves behind.

// Test helpers read host files (cgroups, /proc) by path.
#![allow(clippy::disallowed_methods, dead_code)]

use std::path::PathBuf;

pub mod sandbox;

use checkfu_sandbox_linux::cgroup::{self, CGROUP_PARENT, CGROUP_ROOT};

/// The busybox the fixture is built from: `$CHECKFU_BUSYBOX`, else
/// `/bin/busybox` (fetched from Debian's package when missing).
pub fn busybox() -> PathBuf {
    std::env::var("CHECKFU_BUSYBOX")
        .unwrap_or_else(|_| "/bin/busybox".to_owned())
        .into()
}

/// Whether the provider can run here. Without root (or cgroups) the test
/// prints a `SKIP` line and returns, except under `CI=true`, where it
/// fails: CI runs as root on a host that supports the provider.
pub fn available_or_skip(test: &str) -> bool {
    match checkfu_sandbox_linux::availability() {
        Ok(_) => true,
        Err(why) => checkfu_test_support::gate::skip_or_fail(
            test,
            &format!("the linux provider is unavailable (needs root): {why}"),
        ),
    }
}

/// Cgroup directories of `scope` still present, in any hierarchy.
pub fn scope_cgroups(scope: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(CGROUP_ROOT);
    let bases: Vec<PathBuf> = match cgroup::detect() {
        Some(cgroup::CgroupVersion::V1) => cgroup::V1_CONTROLLERS
            .iter()
            .chain([&cgroup::V1_FREEZER])
            .map(|c| root.join(c))
            .collect(),
        Some(cgroup::CgroupVersion::V2) => vec![root],
        None => Vec::new(),
    };
    bases
        .into_iter()
        .map(|b| b.join(CGROUP_PARENT).join(scope))
        .filter(|p| p.exists())
        .collect()
}

/// Live (non-zombie) processes in a cgroup of `scope`: every instance's
/// init and commands join one before they run anything of the workload.
pub fn processes_in_scope(scope: &str) -> Vec<i32> {
    let needle = format!("/{CGROUP_PARENT}/{scope}/");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
            .unwrap_or(true);
        let member = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|c| c.contains(&needle));
        if member && !zombie {
            out.push(pid);
        }
    }
    out
}

/// Mount points of the host's mount table under `dir` (an instance's
/// mounts live only in its own mount namespace, so this stays empty).
pub fn host_mounts_under(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| std::path::Path::new(m).starts_with(dir))
        .map(str::to_owned)
        .collect()
}

/// Host links whose alias names `scope` (its allowlist bridge and the host
/// ends of its instances' veth pairs), read from `/sys/class/net` from
/// outside the provider.
pub fn scope_links(scope: &str) -> Vec<String> {
    let own = format!("checkfu-linux:{scope}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
    {
        let alias = std::fs::read_to_string(e.path().join("ifalias")).unwrap_or_default();
        let alias = alias.trim();
        if alias == own || alias.starts_with(&format!("{own}:")) {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}
