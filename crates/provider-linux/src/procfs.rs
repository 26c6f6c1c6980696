//! Which of the `/proc` entries an instance protects (made read-only or
//! masked) this kernel has: asked once per process, of a fresh `proc`
//! mounted in a mount namespace private to one short-lived thread (what
//! every instance's own `/proc` shows, whatever options the provider's
//! own `/proc` was mounted with), so that an instance's init only mounts.
#![allow(unsafe_code)]

use std::sync::OnceLock;

/// The entries of `/proc` an instance protects that this kernel has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcEntries {
    /// Entries of the read-only list, in its order.
    pub(crate) read_only: Vec<&'static str>,
    /// Entries of the masked list, in its order.
    pub(crate) masked: Vec<&'static str>,
    /// Whether the lists were probed; when not, they are the whole lists and
    /// the init checks each entry before it mounts over it.
    pub(crate) probed: bool,
}

/// Files under `/proc` made read-only inside an instance.
pub(crate) const READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];
/// Files under `/proc` hidden behind `/dev/null` inside an instance.
pub(crate) const MASKED: &[&str] = &[
    "kcore",
    "keys",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "kmsg",
];

/// The entries of [`READ_ONLY`] and [`MASKED`] a fresh `proc` holds,
/// probed on the first call; the whole lists, unprobed, when the probe
/// cannot mount `proc`.
pub(crate) fn present() -> &'static ProcEntries {
    static ENTRIES: OnceLock<ProcEntries> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        let all: Vec<&'static str> = READ_ONLY.iter().chain(MASKED).copied().collect();
        let keep = |list: &[&'static str], found: &[&str]| -> Vec<&'static str> {
            list.iter().copied().filter(|e| found.contains(e)).collect()
        };
        match probe(all) {
            Some(found) => ProcEntries {
                read_only: keep(READ_ONLY, &found),
                masked: keep(MASKED, &found),
                probed: true,
            },
            None => ProcEntries {
                read_only: READ_ONLY.to_vec(),
                masked: MASKED.to_vec(),
                probed: false,
            },
        }
    })
}

/// The names of `entries` present in a fresh `proc`, or `None` when one
/// cannot be mounted here.
fn probe(entries: Vec<&'static str>) -> Option<Vec<&'static str>> {
    std::thread::spawn(move || {
        use rustix::mount::{MountFlags, MountPropagationFlags};
        // SAFETY: the thread leaves the process's shared file system
        // context and mount namespace (no descriptor table is unshared), so
        // the mount below is only ever in this thread's namespace, which
        // goes away with the thread.
        unsafe {
            rustix::thread::unshare_unsafe(
                rustix::thread::UnshareFlags::FS | rustix::thread::UnshareFlags::NEWNS,
            )
        }
        .ok()?;
        rustix::mount::mount_change(
            "/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )
        .ok()?;
        rustix::mount::mount(
            "proc",
            "/proc",
            "proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            None,
        )
        .ok()?;
        Some(
            entries
                .into_iter()
                .filter(|e| {
                    rustix::fs::access(format!("/proc/{e}").as_str(), rustix::fs::Access::EXISTS)
                        .is_ok()
                })
                .collect(),
        )
    })
    .join()
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fresh_proc_has_sys_and_lacks_what_no_kernel_has() {
        let Some(found) = super::probe(vec!["sys", "no-such-entry"]) else {
            // Only root may mount proc: the init then checks each entry.
            assert!(!rustix::process::geteuid().is_root());
            return;
        };
        assert_eq!(found, vec!["sys"]);
    }
}
