//! Whether the kernel accepts an overlay mount on the state directory's
//! file system (it refuses some backing file systems, and some container
//! hosts refuse overlay altogether): probed once at construction, inside a
//! mount namespace private to one short-lived thread, so the probe mount
//! never reaches the host's mount table.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// Whether an overlay of two directories under `state_dir` mounts and
/// shows the lower layer's file.
pub fn overlay_works(state_dir: &Path) -> bool {
    let probe = state_dir.join(format!(".overlay-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&probe);
    let made = ["lower", "upper", "work", "merged"]
        .iter()
        .all(|d| std::fs::create_dir_all(probe.join(d)).is_ok())
        && std::fs::write(probe.join("lower").join("f"), b"x").is_ok();
    let ok = made && {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        let data = CString::new(format!(
            "lowerdir={},upperdir={},workdir={}",
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
