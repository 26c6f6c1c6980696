//! Async-signal-safe helpers for code that runs between `fork` and
//! `exec` (this crate's command chain and the Linux provider's instance
//! init): no allocation, no locks, only system calls on caller buffers.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

/// The calling thread's `errno` (0 when none is set).
pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Writes all of `buf` to `fd`, retrying on `EINTR`; stops silently at
/// the first other failure.
pub fn write_all(fd: RawFd, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid slice for its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
        buf = &buf[n.unsigned_abs()..];
    }
}

/// Reads exactly `buf.len()` bytes unless end of file comes first;
/// returns how many were read. Through rustix's raw system calls, so it
/// neither reads nor writes `errno`: safe in a thread whose `errno` a
/// `CLONE_VM` child shares.
pub fn read_full(fd: RawFd, buf: &mut [u8]) -> usize {
    // SAFETY: the caller passes a descriptor open for the whole call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        }
    }
    got
}

/// Closes every descriptor from `from` on, except `keep`.
pub fn close_from(from: u32, keep: Option<RawFd>) {
    match keep.and_then(|k| u32::try_from(k).ok()) {
        Some(k) if k >= from => {
            // SAFETY: close_range only closes descriptors.
            unsafe {
                if k > from {
                    libc::syscall(libc::SYS_close_range, from, k - 1, 0);
                }
                libc::syscall(libc::SYS_close_range, k + 1, u32::MAX, 0);
            }
        }
        _ => {
            // SAFETY: as above.
            unsafe {
                libc::syscall(libc::SYS_close_range, from, u32::MAX, 0);
            }
        }
    }
}

/// Maps `bytes` of private anonymous memory for the stacks of `CLONE_VM`
/// children; `None` when `mmap` fails (its `errno` is left set).
/// Async-signal-safe.
pub fn map_stacks(bytes: usize) -> Option<*mut libc::c_void> {
    // SAFETY: a fresh private anonymous mapping; nothing else is touched.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base)
}

/// Unmaps what [`map_stacks`] mapped.
///
/// # Safety
///
/// `base` and `bytes` are one mapping of [`map_stacks`], and no process
/// runs on it any more.
pub unsafe fn unmap_stacks(base: *mut libc::c_void, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        libc::munmap(base, bytes);
    }
}
