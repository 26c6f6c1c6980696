//! A descriptor held by the test process without close-on-exec, as a
//! provider's caller might leave one open: tests check that no workload
//! command receives it.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd as _, IntoRawFd as _, OwnedFd, RawFd};
use std::path::Path;

/// The descriptor number [`hold_inheritable`] uses: high, so that no
/// shell or program inside a sandbox takes it for one of its own.
pub const INHERITABLE_FD: RawFd = 211;

/// Opens `file` for reading as descriptor [`INHERITABLE_FD`] of this
/// process, without close-on-exec; returns the number.
///
/// # Panics
///
/// When the file cannot be opened or the descriptor placed (the test's
/// own set-up failing).
pub fn hold_inheritable(file: &Path) -> RawFd {
    let opened =
        std::fs::File::open(file).unwrap_or_else(|e| panic!("opening {}: {e}", file.display()));
    // SAFETY: descriptor INHERITABLE_FD is reserved for this module in test
    // processes; dup2 replaces whatever it was.
    let mut target = unsafe { OwnedFd::from_raw_fd(INHERITABLE_FD) };
    // dup2 leaves the new descriptor without close-on-exec.
    rustix::io::dup2(&opened, &mut target)
        .unwrap_or_else(|e| panic!("placing descriptor {INHERITABLE_FD}: {e}"));
    target.into_raw_fd()
}

/// Closes what [`hold_inheritable`] opened.
pub fn release_inheritable(fd: RawFd) {
    // SAFETY: `fd` is the descriptor `hold_inheritable` placed and returned.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
}
