//! The root file system and environment every instance starts from: the
//! fixture image's (`checkfu_sandbox_hostfs::rootfs`, the image the Docker
//! and Linux providers run), where the oracle models it.
//!
//! | path | what the oracle holds |
//! |---|---|
//! | `/bin/busybox` | a 0755 stand-in file (no `#!`: running it, or a link to it, runs the built-in its name names) |
//! | `/bin/<applet>` | a link to `busybox` for each command of [`APPLETS`] |
//! | `/usr/bin/env` | a link to `../../bin/busybox` |
//! | `/etc/passwd`, `/etc/group` | the fixture's bytes |
//! | `/dev/null`, `/dev/zero` | the devices |
//! | `/home/checkfu`, `/tmp`, `/root`, `/proc`, `/sys`, `/mnt/session/outputs`, `/workspace/.checkfu` | directories |
//!
//! Not modelled: ownership and directory permissions (the fixture's
//! `/root` is 0700 and the system directories are root's, so a workload
//! running as `checkfu` cannot list or write them there), the contents of
//! `/proc`, `/sys` and the rest of `/dev`, and the busybox applets outside
//! the probe vocabulary.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::bounds::{CONTROL_ROOT, OUTPUT_PATH};

use crate::fs::{Fs, FsNode, SpecialKind};

/// The `PATH` every command starts with: the fixture image's own (its
/// configuration's `Env`), as `docker exec` and the Linux provider give it.
pub(crate) const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The `HOME` every command starts with: the `checkfu` user's.
pub(crate) const HOME: &str = "/home/checkfu";

/// The host name of every instance (its `HOSTNAME` and what `hostname`
/// prints), as the Linux provider names its instances' UTS namespaces.
pub const INSTANCE_HOSTNAME: &str = "checkfu";

/// The commands of the probe vocabulary that are programs (each has a
/// link in `/bin`, as busybox's applets do in the fixture). A command the
/// interpreter knows must be listed here to be found by path.
pub(crate) const APPLETS: &[&str] = &[
    "cat",
    "chmod",
    "cp",
    "dd",
    "echo",
    "env",
    "false",
    "head",
    "hostname",
    "kill",
    "ln",
    "ls",
    "mkdir",
    "mkfifo",
    "nc",
    "printf",
    "pwd",
    "rm",
    "setsid",
    "sh",
    "sha256sum",
    "sleep",
    "stat",
    "tee",
    "touch",
    "true",
];

/// The fixture's `/etc/passwd`.
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
checkfu:x:1000:1000:checkfu:/home/checkfu:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";

/// The fixture's `/etc/group`.
const GROUP: &str = "root:x:0:\ncheckfu:x:1000:\nnogroup:x:65534:\n";

/// What `/bin/busybox` holds: a stand-in, not a program.
pub(crate) const BUSYBOX_STAND_IN: &[u8] = b"memory oracle stand-in for busybox\n";

/// The environment every command starts from: `PATH`, `HOME` and
/// `HOSTNAME`, the keys `docker exec` gives in the fixture image; the
/// request's environment overrides them.
pub(crate) fn base_environment() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("PATH".to_owned(), PATH.to_owned()),
        ("HOME".to_owned(), HOME.to_owned()),
        ("HOSTNAME".to_owned(), INSTANCE_HOSTNAME.to_owned()),
    ])
}

/// A fresh instance's tree before its mounts: the layout of the module
/// table.
pub(crate) fn base_tree() -> Fs {
    let mut fs = Fs::new();
    for dir in [
        "/bin",
        "/dev",
        "/etc",
        HOME,
        "/proc",
        "/root",
        "/sys",
        "/tmp",
        "/usr/bin",
        CONTROL_ROOT,
        OUTPUT_PATH,
    ] {
        fs.mkdir_all(dir);
    }
    fs.insert("/bin/busybox", FsNode::File(BUSYBOX_STAND_IN.to_vec()));
    fs.set_mode("/bin/busybox", 0o755);
    for applet in APPLETS {
        fs.insert(
            format!("/bin/{applet}"),
            FsNode::Symlink("busybox".to_owned()),
        );
    }
    fs.insert("/usr/bin/env", FsNode::Symlink("../../bin/busybox".into()));
    fs.insert("/etc/passwd", FsNode::File(PASSWD.as_bytes().to_vec()));
    fs.insert("/etc/group", FsNode::File(GROUP.as_bytes().to_vec()));
    fs.insert("/dev/null", FsNode::Special(SpecialKind::NullDevice));
    fs.insert("/dev/zero", FsNode::Special(SpecialKind::ZeroDevice));
    fs
}
