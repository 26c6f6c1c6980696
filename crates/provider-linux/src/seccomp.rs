//! The default seccomp filters every command runs under, built with
//! `seccompiler` (the filter library of Firecracker).
//!
//! They are a deny list on top of the namespaces, the empty capability
//! sets and `no_new_privs`: the calls that change the kernel or the mount
//! table, cross or make namespaces, trace other processes or load code
//! into the kernel fail with `EPERM`; everything else is allowed. Docker's
//! default profile denies the same families.
//!
//! `clone` is refused when its flags ask for a new user, mount, network,
//! UTS, IPC or cgroup namespace: an unprivileged process may make a user
//! namespace on its own, and inside it every capability, which would put
//! the kernel's namespaced mount and network code in the workload's
//! reach. A new PID namespace is left to `clone`: the instance's init
//! starts each command in one, and no process without `CAP_SYS_ADMIN`
//! can make one. `clone3` passes its flags in memory, where a filter
//! cannot read them; it fails with `ENOSYS`, as on a kernel without it,
//! so the C library falls back to `clone` for its threads (Docker does
//! the same). That needs a second action, so there are two filters.

use std::collections::BTreeMap;

use checkfu_sandbox_hostexec::seccomp::{Instruction, SeccompFilter as Filter};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

/// The system calls the default filter refuses with `EPERM`.
pub const DENIED_SYSCALLS: &[(&str, i64)] = &[
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("syslog", libc::SYS_syslog),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("quotactl", libc::SYS_quotactl),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
];

/// The `clone` flags the default filters refuse (see the module
/// documentation).
pub const DENIED_CLONE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER as u64),
    ("CLONE_NEWNS", libc::CLONE_NEWNS as u64),
    ("CLONE_NEWNET", libc::CLONE_NEWNET as u64),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS as u64),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC as u64),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
];

/// Why the filter could not be built for this host.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct SeccompError(String);

/// The default filters, compiled for the host's architecture, in the
/// order they are installed (no flags): the deny list (`EPERM`, with the
/// `clone` flag rules), then `clone3` (`ENOSYS`).
///
/// # Errors
///
/// [`SeccompError`] on an architecture `seccompiler` does not support.
pub fn default_filters() -> Result<Vec<Filter>, SeccompError> {
    let arch =
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| SeccompError(format!("{e:?}")))?;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let flag_rules = DENIED_CLONE_FLAGS
        .iter()
        .map(|&(_, flag)| {
            // The flags are `clone`'s first argument on every architecture
            // this provider builds for.
            let condition = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?;
            SeccompRule::new(vec![condition])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SeccompError(e.to_string()))?;
    denied.insert(libc::SYS_clone, flag_rules);
    let enosys = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    [
        (denied, SeccompAction::Errno(libc::EPERM as u32)),
        (enosys, SeccompAction::Errno(libc::ENOSYS as u32)),
    ]
    .into_iter()
    .map(|(rules, action)| compile(rules, action, arch))
    .collect()
}

/// [`default_filters`], compiled once per process (they never change):
/// an instance's init installs them after it has reported readiness, when
/// nothing of the provider it was cloned from may be alive any more but
/// the process's memory.
///
/// # Errors
///
/// As [`default_filters`].
pub fn shared_default_filters() -> Result<&'static [Filter], SeccompError> {
    static FILTERS: std::sync::OnceLock<Result<Vec<Filter>, String>> = std::sync::OnceLock::new();
    FILTERS
        .get_or_init(|| default_filters().map_err(|e| e.0))
        .as_deref()
        .map_err(|e| SeccompError(e.clone()))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
    arch: TargetArch,
) -> Result<Filter, SeccompError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
        .map_err(|e| SeccompError(e.to_string()))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError(e.to_string()))?;
    Ok(Filter {
        program: program
            .iter()
            .map(|i| Instruction {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect(),
        flags: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filters_compile_for_this_host() {
        let filters = default_filters().unwrap();
        assert_eq!(filters.len(), 2);
        assert!(filters.iter().all(|f| !f.program.is_empty()));
    }
}
