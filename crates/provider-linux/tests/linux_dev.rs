//! An instance's `/dev`: the null, zero, full, random and urandom nodes
//! (usable), the fd, stdin, stdout and stderr links, nothing else, and not
//! writable by the workload user. Shown through the root overlay when the
//! image's shared tree holds them, else on a tmpfs with the host's nodes
//! bound in (a tree unpacked before the store added them): the workload
//! sees the same `/dev` either way. The nodes work through the overlay
//! even when the state directory's file system is mounted `nodev`. The
//! root overlay itself is mounted `volatile` where the kernel has it, so
//! an instance's teardown does not sync the host's file system (decision
//! 050).
//!
//! Needs root (namespaces, mounts, cgroups): without it each test prints
//! a `SKIP` line, except under `CI=true`, where it fails.

// The tests read and change the provider's state directory by path.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::sync::Arc;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_linux::conformance::LinuxTarget;
use checkfu_sandbox_linux::{LinuxConfig, LinuxProvider, WorkloadUser};
use common::sandbox::{request, sh_command};

/// Provisions and activates an instance of `root_image`, runs
/// `sh -c script` in it and releases it; (exit code, stdout).
async fn run_once(p: &LinuxProvider, root_image: ImageReference, script: &str) -> (u8, String) {
    let id = p
        .provision(request(root_image))
        .await
        .expect("provision")
        .value
        .instance_id;
    p.activate(ActivateRequest {
        instance_id: id.clone(),
    })
    .await
    .expect("activate");
    let r = p
        .execute(sh_command(&id, script, None))
        .await
        .expect("execute");
    p.release(ReleaseRequest {
        instance_id: id,
        snapshot_expires_at: None,
    })
    .await
    .expect("release");
    let ExitCause::ExitCode(code) = r.exit else {
        panic!("{script}: {:?}", r.exit)
    };
    (
        code,
        String::from_utf8_lossy(&r.stdout_base64.0).into_owned(),
    )
}

/// What the workload user sees of `/dev`, one line per probe; the last
/// line counts mounts on `/dev` itself.
const PROBE: &str = "\
ls -A /dev | tr '\\n' ' '; echo
echo x > /dev/null && echo null writes
for n in zero random urandom; do printf '%s %s\\n' $n $(head -c 3 /dev/$n | wc -c); done
echo x 2>/dev/null > /dev/full || echo full refuses
for l in fd stdin stdout stderr; do printf '%s ' $(readlink /dev/$l); done; echo
touch /dev/x 2>/dev/null || echo not writable
mkdir /dev/d 2>/dev/null || echo no directories
echo mounts on /dev: $(cut -d' ' -f5 /proc/self/mountinfo | grep -cx /dev)
";

/// [`PROBE`]'s answer, with `mounts` mounts on `/dev`.
fn expected(mounts: usize) -> String {
    format!(
        "fd full null random stderr stdin stdout urandom zero \n\
null writes\nzero 3\nrandom 3\nurandom 3\nfull refuses\n\
/proc/self/fd /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 \n\
not writable\nno directories\nmounts on /dev: {mounts}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_is_the_same_from_the_image_tree_and_from_a_tmpfs() {
    if !common::available_or_skip("linux_dev_same") {
        return;
    }
    let target = LinuxTarget::new(&common::busybox(), &mut |l| eprintln!("{l}"))
        .await
        .expect("target");
    let p = target.linux_provider();
    let image = target.root_image();
    let (code, out) = run_once(p, image.clone(), PROBE).await;
    assert_eq!(code, 0, "{out}");
    // The image's shared tree holds /dev: nothing is mounted on it (an
    // overlay root), or the tmpfs (a copy).
    let on_dev = usize::from(!p.uses_overlay());
    assert_eq!(out, expected(on_dev));

    // A tree unpacked before the store added /dev: the tmpfs, same view.
    let tree = p.images().rootfs_dir(image.digest().hex()).join("dev");
    for e in std::fs::read_dir(&tree).expect("the tree's /dev") {
        std::fs::remove_file(e.expect("entry").path()).expect("remove a /dev entry");
    }
    let (code, out) = run_once(p, image, PROBE).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(out, expected(1));
    target.close().await.expect("nothing left");
}

/// The kernel's release as (major, minor), from `uname`.
fn kernel_version() -> (u32, u32) {
    let uname = rustix::system::uname();
    let release = uname.release().to_string_lossy().into_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_overlay_is_volatile_where_the_kernel_has_it() {
    if !common::available_or_skip("linux_root_volatile") {
        return;
    }
    let target = LinuxTarget::new(&common::busybox(), &mut |l| eprintln!("{l}"))
        .await
        .expect("target");
    let p = target.linux_provider();
    let support = p.overlay_support();
    // Linux 5.10 added the option: a kernel that has it and mounts an
    // overlay here must be asked for it.
    if p.uses_overlay() && kernel_version() >= (5, 10) {
        assert_eq!(support, checkfu_sandbox_linux::OverlaySupport::Volatile);
    }
    // The workload's own mount table: the options of the mount on `/`
    // (newer kernels show `volatile` as `fsync=volatile`).
    let (code, out) = run_once(
        p,
        target.root_image(),
        "awk '$5 == \"/\" { print $NF }' /proc/self/mountinfo",
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let options: Vec<&str> = out.trim().split(',').collect();
    assert_eq!(
        options.contains(&"volatile") || options.contains(&"fsync=volatile"),
        support == checkfu_sandbox_linux::OverlaySupport::Volatile,
        "the root's super options: {out:?} (support {support:?})"
    );
    target.close().await.expect("nothing left");
}

/// A tmpfs mounted `nodev` on a temporary directory, unmounted on drop.
struct NodevDir {
    dir: tempfile::TempDir,
}

impl NodevDir {
    fn new() -> NodevDir {
        let dir = tempfile::tempdir().expect("temp dir");
        rustix::mount::mount(
            "checkfu-nodev",
            dir.path(),
            "tmpfs",
            rustix::mount::MountFlags::NODEV,
            None,
        )
        .expect("mount a nodev tmpfs");
        NodevDir { dir }
    }
}

impl Drop for NodevDir {
    fn drop(&mut self) {
        let _ = rustix::mount::unmount(self.dir.path(), rustix::mount::UnmountFlags::DETACH);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_work_through_the_overlay_on_a_nodev_state_directory() {
    if !common::available_or_skip("linux_dev_nodev") {
        return;
    }
    let nodev = NodevDir::new();
    let state_dir = nodev.dir.path().join("state");
    let scope = format!("dev-nodev-{}", std::process::id());
    let p = LinuxProvider::new(LinuxConfig {
        state_dir: state_dir.clone(),
        scope: scope.clone(),
        clock: Arc::new(SystemClock),
        workload_user: WorkloadUser::Checkfu,
    })
    .expect("provider");
    assert!(p.uses_overlay(), "an overlay mounts on tmpfs");
    let path = checkfu_sandbox_hostfs::busybox::locate_busybox(&common::busybox(), &mut |l| {
        eprintln!("{l}")
    })
    .await
    .expect("busybox");
    let bb = checkfu_sandbox_hostfs::rootfs::load_busybox(&path)
        .await
        .expect("busybox");
    let pinned = p.images().write_fixture(&bb).expect("fixture");
    let image = ImageReference::parse(&pinned).expect("reference");
    // The node itself is refused on its own (nodev) mount...
    let node = p.images().rootfs_dir(image.digest().hex()).join("dev/zero");
    let (code, out) = run_once(&p, image, PROBE).await;
    assert_eq!(
        std::fs::File::open(&node).map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::PermissionDenied),
        "{}",
        node.display()
    );
    // ...and works through the overlay.
    assert_eq!(code, 0, "{out}");
    assert_eq!(out, expected(0));
    assert!(p.destroy_all().await.is_empty());
    drop(p);
    assert!(common::scope_cgroups(&scope).is_empty());
    assert!(common::host_mounts_under(Path::new(&state_dir)).is_empty());
}
