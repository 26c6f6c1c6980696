//! Whether the kernel accepts an overlay mount on the state directory's
//! file system (it refuses some backing file systems, and some container
//! hosts refuse overlay altogether): probed once at construction, inside a
//! mount namespace private to one short-lived thread, so the probe mount
//! never reaches the host's mount table. The probe asks for the
//! `volatile` option first (decision 050) and settles for an overlay
//! without it.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// What the kernel accepts for an instance's root overlay on the state
/// directory's file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverlaySupport {
    /// An overlay with `volatile` (Linux 5.10 and later): its upper layer
    /// is never synced, so unmounting it, when an instance's mount
    /// namespace goes, does not sync the state directory's whole file
    /// system (decision 050).
    Volatile,
    /// An overlay without `volatile`: each unmount syncs the file system
    /// that holds the upper layer.
    Plain,
    /// No overlay: every instance gets a private copy of its image.
    None,
}

impl OverlaySupport {
    /// What the kernel accepts under `state_dir`: an overlay with
    /// `volatile`, else one without, else none. Probes by mounting (at
    /// most two mounts, each in a throwaway mount namespace).
    pub fn probe(state_dir: &Path) -> Self {
        if overlay_works(state_dir, ",volatile") {
            OverlaySupport::Volatile
        } else if overlay_works(state_dir, "") {
            OverlaySupport::Plain
        } else {
            OverlaySupport::None
        }
    }

    /// What follows `lowerdir=...,upperdir=...,workdir=...` in an
    /// instance's overlay options: `,volatile` or nothing.
    pub fn extra_options(self) -> &'static str {
        match self {
            OverlaySupport::Volatile => ",volatile",
            OverlaySupport::Plain | OverlaySupport::None => "",
        }
    }
}

/// Whether an overlay of two directories under `state_dir`, with `extra`
/// appended to its options, mounts and shows the lower layer's file.
fn overlay_works(state_dir: &Path, extra: &str) -> bool {
    let probe = state_dir.join(format!(".overlay-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&probe);
    let made = ["lower", "upper", "work", "merged"]
        .iter()
        .all(|d| std::fs::create_dir_all(probe.join(d)).is_ok())
        && std::fs::write(probe.join("lower").join("f"), b"x").is_ok();
    let ok = made && {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        let data = CString::new(format!(
            "lowerdir={},upperdir={},workdir={}{extra}",
            probe.join("lower").display(),
            probe.join("upper").display(),
            probe.join("work").display()
        ))
        .ok();
        let merged = c(&probe.join("merged"));
        let seen = c(&probe.join("merged").join("f"));
        match (data, merged, seen) {
            (Some(data), Some(merged), Some(seen)) => std::thread::spawn(move || {
                // SAFETY: the thread leaves the process's shared file
                // system context and mount namespace first, so the mount
                // is only ever in this thread's namespace, which goes
                // away with the thread.
                unsafe {
                    libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) == 0
                        && libc::mount(
                            std::ptr::null(),
                            c"/".as_ptr(),
                            std::ptr::null(),
                            libc::MS_REC | libc::MS_PRIVATE,
                            std::ptr::null(),
                        ) == 0
                        && libc::mount(
                            c"overlay".as_ptr(),
                            merged.as_ptr(),
                            c"overlay".as_ptr(),
                            0,
                            data.as_ptr().cast(),
                        ) == 0
                        && libc::access(seen.as_ptr(), libc::F_OK) == 0
                }
            })
            .join()
            .unwrap_or(false),
            _ => false,
        }
    };
    let _ = std::fs::remove_dir_all(&probe);
    ok
}
