//! Classic-BPF seccomp filters as the kernel holds them: installing one
//! in a command child, and reading the filters a running process is under
//! (`PTRACE_SECCOMP_GET_FILTER`), so that a command entering a workload
//! from the host runs under exactly the workload's own filters.
#![allow(unsafe_code)]

use std::io;

/// One classic-BPF instruction, laid out as the kernel's `struct
/// sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instruction {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Generic field (constant, offset).
    pub k: u32,
}

/// One seccomp filter: its program and the `SECCOMP_FILTER_FLAG_*` flags
/// it was installed with (as `PTRACE_SECCOMP_GET_METADATA` reports them:
/// only `SECCOMP_FILTER_FLAG_LOG` is kept by the kernel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompFilter {
    /// The program, at most `BPF_MAXINSNS` (4,096) instructions.
    pub program: Vec<Instruction>,
    /// `SECCOMP_FILTER_FLAG_*` bits to install it with.
    pub flags: u32,
}

const SECCOMP_SET_MODE_FILTER: libc::c_long = 1;
const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;
const PTRACE_SECCOMP_GET_METADATA: libc::c_uint = 0x420d;
/// The flag bits a filter's metadata may carry and [`install`] passes on.
const KEPT_FLAGS: u64 = 2; // SECCOMP_FILTER_FLAG_LOG

/// Installs `filter` on the calling thread (`no_new_privs` or
/// `CAP_SYS_ADMIN` required); async-signal-safe (for code between fork
/// and exec, or a `CLONE_VM` child). Returns the system call's result (0
/// on success).
pub fn install(filter: &SeccompFilter) -> libc::c_long {
    let Ok(len) = u16::try_from(filter.program.len()) else {
        return -1;
    };
    let prog = libc::sock_fprog {
        len,
        // The kernel only reads the program; `Instruction` has the layout
        // of `sock_filter`.
        filter: filter.program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: `prog` points at `len` instructions the filter owns.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            libc::c_long::from(filter.flags),
            &prog as *const libc::sock_fprog,
        )
    }
}

/// Bound on the filters read from one process (the kernel allows a chain
/// of 32 K instructions in all; no workload has more than a few).
const MAX_FILTERS: usize = 64;

/// The seccomp filters process `pid` runs under, oldest first (the order
/// to install them in), with their flags.
///
/// The process is stopped for the duration: attached with `PTRACE_SEIZE`,
/// brought into a ptrace-stop with `PTRACE_INTERRUPT`, read, and detached
/// (a signal that arrived meanwhile is handed back on detach). Needs
/// `CAP_SYS_ADMIN` and `CAP_SYS_PTRACE`, a caller under no seccomp filter
/// of its own and a kernel with `CONFIG_CHECKPOINT_RESTORE`. Blocking:
/// every call is made on the calling thread, which must stay the same
/// (ptrace attaches to a thread), so run it with
/// `tokio::task::spawn_blocking`.
///
/// # Errors
///
/// The first failing `ptrace` or `waitpid` (`EPERM`, `EACCES`, `ESRCH`,
/// `EMEDIUMTYPE` when the process is not under filter mode, ...), or
/// `E2BIG` past `MAX_FILTERS`.
pub fn filters_of(pid: i32) -> io::Result<Vec<SeccompFilter>> {
    let last = || io::Error::last_os_error();
    // SAFETY (whole function): ptrace and waitpid on `pid` with buffers of
    // this frame, each sized as the kernel is told.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) != 0 {
            return Err(last());
        }
        let detach = |sig: libc::c_int| {
            libc::ptrace(libc::PTRACE_DETACH, pid, 0, libc::c_long::from(sig));
        };
        if libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0) != 0 {
            let e = last();
            detach(0);
            return Err(e);
        }
        let mut status = 0;
        let r = loop {
            let r = libc::waitpid(pid, &mut status, libc::__WALL);
            if r < 0 && last().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break r;
        };
        if r != pid || !libc::WIFSTOPPED(status) {
            let e = if r < 0 {
                last()
            } else {
                io::Error::from_raw_os_error(libc::ESRCH)
            };
            detach(0);
            return Err(e);
        }
        // A signal-delivery stop (not our interrupt's event stop) holds a
        // signal for the process: hand it back on detach.
        let event_stop = (status >> 16) == libc::PTRACE_EVENT_STOP;
        let pending = if event_stop {
            0
        } else {
            libc::WSTOPSIG(status)
        };
        let read = || -> io::Result<Vec<SeccompFilter>> {
            let mut filters = Vec::new();
            for index in 0..=MAX_FILTERS {
                let n = libc::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, 0);
                if n < 0 {
                    let e = last();
                    if e.raw_os_error() == Some(libc::ENOENT) && index > 0 {
                        break;
                    }
                    return Err(e);
                }
                if index == MAX_FILTERS {
                    return Err(io::Error::from_raw_os_error(libc::E2BIG));
                }
                let len = usize::try_from(n).unwrap_or(0);
                let mut program = vec![
                    Instruction {
                        code: 0,
                        jt: 0,
                        jf: 0,
                        k: 0
                    };
                    len
                ];
                let got = libc::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, index, program.as_mut_ptr());
                if got != n {
                    return Err(if got < 0 {
                        last()
                    } else {
                        io::Error::from_raw_os_error(libc::EAGAIN)
                    });
                }
                #[repr(C)]
                struct Metadata {
                    filter_off: u64,
                    flags: u64,
                }
                let mut meta = Metadata {
                    filter_off: index as u64,
                    flags: 0,
                };
                let m = libc::ptrace(
                    PTRACE_SECCOMP_GET_METADATA,
                    pid,
                    std::mem::size_of::<Metadata>(),
                    &mut meta as *mut Metadata,
                );
                if m < 0 {
                    return Err(last());
                }
                filters.push(SeccompFilter {
                    program,
                    flags: u32::try_from(meta.flags & KEPT_FLAGS).unwrap_or(0),
                });
            }
            // Index 0 is the oldest filter (the kernel counts from the
            // first installed), so this is already the install order.
            Ok(filters)
        };
        let filters = read();
        detach(pending);
        filters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child under two filters (the second with the log flag) is read
    /// back oldest first, instruction for instruction.
    #[test]
    fn the_filters_of_a_process_are_read_back_oldest_first() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: reading seccomp filters needs root");
            return;
        }
        let allow = Instruction {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        };
        let load = Instruction {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        };
        let first = SeccompFilter {
            program: vec![allow],
            flags: 0,
        };
        let second = SeccompFilter {
            program: vec![load, allow],
            flags: 2,
        };
        let (mut r, w) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: the child makes system calls only and ends in _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: system calls on prepared data in the child.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let ok = install(&first) == 0 && install(&second) == 0;
                libc::write(
                    std::os::fd::AsRawFd::as_raw_fd(&w),
                    [u8::from(ok)].as_ptr().cast(),
                    1,
                );
                loop {
                    libc::pause();
                }
            }
        }
        drop(w);
        let mut ok = [0u8];
        std::io::Read::read_exact(&mut r, &mut ok).unwrap();
        let got = filters_of(pid);
        // SAFETY: kills and reaps our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        assert_eq!(ok, [1], "the child installed both filters");
        assert_eq!(got.unwrap(), vec![first, second]);
    }
}
