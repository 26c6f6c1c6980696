//! The default seccomp filter every command runs under, built with
//! `seccompiler` (the filter library of Firecracker).
//!
//! It is a deny list on top of the namespaces, the empty capability sets
//! and `no_new_privs`: the calls that change the kernel or the mount table,
//! cross namespaces, trace other processes or load code into the kernel
//! fail with `EPERM`; everything else is allowed. Docker's default profile
//! denies the same families.

use std::collections::BTreeMap;

use checkfu_sandbox_hostexec::seccomp::{Instruction, SeccompFilter as Filter};
use seccompiler::{SeccompAction, SeccompFilter, SeccompRule, TargetArch};

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

/// Why the filter could not be built for this host.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct SeccompError(String);

/// The default filter, compiled for the host's architecture, as the
/// command child installs it (no flags).
///
/// # Errors
///
/// [`SeccompError`] on an architecture `seccompiler` does not support.
pub fn default_filter() -> Result<Filter, SeccompError> {
    let arch =
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| SeccompError(format!("{e:?}")))?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
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
    fn the_default_filter_compiles_for_this_host() {
        let bpf = default_filter().unwrap();
        assert!(!bpf.program.is_empty());
    }
}
