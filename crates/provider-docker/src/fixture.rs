//! The offline fixture image and pinned image references.
//!
//! No registry is reachable, so the image the provider's tests and the
//! conformance cases run in is built locally from Debian's `busybox-static`
//! binary: a `FROM scratch` image whose root holds `/bin/busybox`, one
//! relative symlink per applet (`/bin/sh -> busybox`, ...), the fixed
//! directories of the sandbox layout, and an `/etc/passwd` with `root` and
//! the `checkfu` user (uid/gid 1000).
//!
//! # Layout of the image
//!
//! | path | owner | mode |
//! |---|---|---|
//! | `/bin/busybox`, `/bin/<applet>` (symlinks), `/usr/bin/env` | 0:0 | 0755 |
//! | `/tmp` | 0:0 | 1777 |
//! | `/workspace`, `/home/checkfu`, `/mnt/session/outputs` | 1000:1000 | 0755 |
//! | `/workspace/.checkfu` (provider control root) | 0:0 | 0755 |
//! | `/root` | 0:0 | 0700 |
//! | `/proc`, `/dev`, `/sys`, `/etc`, `/mnt`, `/mnt/session`, `/usr`, `/usr/bin` | 0:0 | 0755 |
//! | `/etc/passwd`, `/etc/group` | 0:0 | 0644 |
//!
//! The root file system is an uncompressed tar (`rootfs.tar`, every entry
//! with mtime 0, numeric owners, no user names) added with `ADD rootfs.tar
//! /`, which keeps the owners and modes from the archive (`COPY` would
//! reset owners to root). The build context is an uncompressed tar too: the
//! daemon never has to pick a decompressor.
//!
//! # Pinned references
//!
//! Nothing is pushed to a registry, so an image has no registry manifest
//! digest (`RepoDigests` is empty). The pinned form this crate uses is
//! `name@sha256:<image id hex>`: the digest is the **image ID** (the digest
//! of the image configuration), which the daemon content-addresses and
//! cannot change under the same ID. [`resolve_image`] resolves such a
//! reference by inspecting `sha256:<hex>` and checking that `name` is the
//! repository of one of the image's tags.
//!
//! Rebuilding produces a new image ID (the configuration records a creation
//! time), which is why [`ensure_fixture`] reuses an existing tag and
//! serialises builds, within the process and across processes.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::busybox::locate_busybox;
use crate::daemon::is_not_found;

/// Repository name of the fixture image.
pub const FIXTURE_REPOSITORY: &str = "checkfu-fixture";
/// Label every fixture image carries, with value `"true"`.
pub const FIXTURE_LABEL: &str = "checkfu.sandbox.fixture";
/// Label holding the SHA-256 (hex) of the busybox binary inside.
pub const FIXTURE_BUSYBOX_LABEL: &str = "checkfu.sandbox.fixture.busybox_sha256";
/// Where Debian's `busybox-static` installs its binary.
pub const DEFAULT_BUSYBOX_PATH: &str = "/bin/busybox";
/// Uid and gid of the unprivileged `checkfu` user in the fixture.
pub const CHECKFU_UID: u32 = 1000;

/// Failure to build or resolve an image.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The busybox binary could not be read or listed.
    #[error("cannot use busybox at {path:?}: {reason}")]
    Busybox {
        /// Path given.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The binary is not a statically linked ELF executable.
    #[error("busybox at {path:?} is not a static ELF executable: {reason}")]
    NotStaticElf {
        /// Path given.
        path: PathBuf,
        /// Which check failed.
        reason: String,
    },
    /// Building the tar context failed.
    #[error("cannot build the context archive")]
    Archive(#[source] io::Error),
    /// The cross-process build lock could not be taken.
    #[error("cannot take the fixture build lock at {path:?}")]
    Lock {
        /// Lock file.
        path: PathBuf,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
    /// The daemon reported a build error.
    #[error("image build failed: {message}")]
    Build {
        /// The daemon's message.
        message: String,
    },
    /// The reference is not `name@sha256:<64 hex>` or `name[:tag]`.
    #[error("invalid image reference {reference:?}")]
    InvalidReference {
        /// The reference given.
        reference: String,
    },
    /// The image with that ID exists but none of its tags has that name.
    #[error("image {reference:?} exists but its tags {repo_tags:?} do not name it")]
    ReferenceMismatch {
        /// The reference given.
        reference: String,
        /// The image's tags.
        repo_tags: Vec<String>,
    },
    /// The daemon answered something unexpected (for example no image ID).
    #[error("daemon answered unexpectedly: {0}")]
    Unexpected(String),
    /// A daemon call failed.
    #[error("daemon call failed")]
    Docker(#[from] bollard::errors::Error),
}

/// The busybox binary, checked and hashed.
#[derive(Debug, Clone)]
pub struct Busybox {
    /// Path it was read from.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Lowercase hex SHA-256 of `bytes`.
    pub sha256_hex: String,
    /// Applet names, from `busybox --list` (excluding `busybox`).
    pub applets: Vec<String>,
}

impl Busybox {
    /// The fixture tag for this binary: `checkfu-fixture:busybox-<12 hex>`.
    pub fn tag(&self) -> String {
        format!("{FIXTURE_REPOSITORY}:busybox-{}", &self.sha256_hex[..12])
    }
}

/// Checks that `bytes` is a 64-bit little-endian ELF executable without a
/// program interpreter (`PT_INTERP`), i.e. one that runs in an empty
/// (`FROM scratch`) root. Static-PIE binaries pass; anything needing
/// `ld.so` fails.
///
/// # Errors
///
/// A human-readable reason naming the failed check.
pub fn check_static_elf(bytes: &[u8]) -> Result<(), String> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("no ELF magic".into());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let e_type = u16_at(0x10);
    if e_type != 2 && e_type != 3 {
        return Err(format!("ELF type {e_type} is not an executable"));
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&bytes[0x20..0x28]);
    let phoff = usize::try_from(u64::from_le_bytes(off)).map_err(|_| "bad e_phoff")?;
    let phentsize = usize::from(u16_at(0x36));
    let phnum = usize::from(u16_at(0x38));
    if phnum == 0 || phentsize < 4 {
        return Err("no program headers".into());
    }
    for i in 0..phnum {
        let start = phentsize
            .checked_mul(i)
            .and_then(|x| x.checked_add(phoff))
            .ok_or("program header offset overflows")?;
        let end = start.checked_add(4).ok_or("program header overflows")?;
        let Some(p) = bytes.get(start..end) else {
            return Err("program headers run past the file".into());
        };
        if u32::from_le_bytes([p[0], p[1], p[2], p[3]]) == PT_INTERP {
            return Err("has a PT_INTERP program header (dynamically linked)".into());
        }
    }
    Ok(())
}

fn applet_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name != "busybox"
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.[".contains(&b))
}

/// Reads, checks and hashes the busybox binary at `path`, and lists its
/// applets by running `<path> --list` on the host (the daemon is local, so
/// the host can run what the image will run).
///
/// # Errors
///
/// [`FixtureError::Busybox`] when unreadable or listing fails,
/// [`FixtureError::NotStaticElf`] when it needs a dynamic loader.
// The busybox binary is the operator's host file, not a sandbox tree.
#[allow(clippy::disallowed_methods)]
pub async fn load_busybox(path: &Path) -> Result<Busybox, FixtureError> {
    let err = |reason: String| FixtureError::Busybox {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| err(e.to_string()))?;
    check_static_elf(&bytes).map_err(|reason| FixtureError::NotStaticElf {
        path: path.to_path_buf(),
        reason,
    })?;
    let out = tokio::process::Command::new(path)
        .arg("--list")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| err(format!("cannot run --list: {e}")))?;
    if !out.status.success() {
        return Err(err(format!("--list exited with {}", out.status)));
    }
    let listing = String::from_utf8(out.stdout).map_err(|_| err("--list is not UTF-8".into()))?;
    let mut applets: Vec<String> = listing
        .lines()
        .map(str::trim)
        .filter(|n| applet_name_ok(n))
        .map(String::from)
        .collect();
    applets.sort();
    applets.dedup();
    if !applets.iter().any(|a| a == "sh") {
        return Err(err("has no sh applet".into()));
    }
    let sha256_hex = hex(&Sha256::digest(&bytes));
    Ok(Busybox {
        path: path.to_path_buf(),
        bytes,
        sha256_hex,
        applets,
    })
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn header(kind: tar::EntryType, mode: u32, uid: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(u64::from(uid));
    h.set_gid(u64::from(uid));
    h.set_mtime(0);
    h.set_size(size);
    h
}

fn add_dir(b: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32, uid: u32) -> io::Result<()> {
    let mut h = header(tar::EntryType::Directory, mode, uid, 0);
    b.append_data(&mut h, path, io::empty())
}

fn add_file(b: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32, data: &[u8]) -> io::Result<()> {
    let mut h = header(tar::EntryType::Regular, mode, 0, data.len() as u64);
    b.append_data(&mut h, path, data)
}

fn add_symlink(b: &mut tar::Builder<Vec<u8>>, path: &str, target: &str) -> io::Result<()> {
    let mut h = header(tar::EntryType::Symlink, 0o777, 0, 0);
    b.append_link(&mut h, path, target)
}

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
checkfu:x:1000:1000:checkfu:/home/checkfu:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\ncheckfu:x:1000:\nnogroup:x:65534:\n";
const DOCKERFILE: &str = "FROM scratch\n\
ADD rootfs.tar /\n\
ENV PATH=/usr/local/bin:/usr/bin:/bin\n\
WORKDIR /\n\
CMD [\"/bin/sh\"]\n";

/// Builds the root file system tar (see the module table). Deterministic:
/// the same busybox gives the same bytes.
///
/// # Errors
///
/// [`FixtureError::Archive`] when the tar builder fails.
pub fn rootfs_tar(busybox: &Busybox) -> Result<Vec<u8>, FixtureError> {
    let build = || -> io::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        for (dir, mode, uid) in [
            ("bin", 0o755, 0),
            ("dev", 0o755, 0),
            ("etc", 0o755, 0),
            ("home", 0o755, 0),
            ("home/checkfu", 0o755, CHECKFU_UID),
            ("mnt", 0o755, 0),
            ("mnt/session", 0o755, 0),
            ("mnt/session/outputs", 0o755, CHECKFU_UID),
            ("proc", 0o755, 0),
            ("root", 0o700, 0),
            ("sys", 0o755, 0),
            ("tmp", 0o1777, 0),
            ("usr", 0o755, 0),
            ("usr/bin", 0o755, 0),
            ("workspace", 0o755, CHECKFU_UID),
            ("workspace/.checkfu", 0o755, 0),
        ] {
            add_dir(&mut b, dir, mode, uid)?;
        }
        add_file(&mut b, "bin/busybox", 0o755, &busybox.bytes)?;
        for applet in &busybox.applets {
            add_symlink(&mut b, &format!("bin/{applet}"), "busybox")?;
        }
        add_symlink(&mut b, "usr/bin/env", "../../bin/busybox")?;
        add_file(&mut b, "etc/passwd", 0o644, PASSWD.as_bytes())?;
        add_file(&mut b, "etc/group", 0o644, GROUP.as_bytes())?;
        b.into_inner()
    };
    build().map_err(FixtureError::Archive)
}

/// Builds the whole (uncompressed) build context: `Dockerfile` and
/// `rootfs.tar`.
///
/// # Errors
///
/// [`FixtureError::Archive`] when the tar builder fails.
pub fn build_context(busybox: &Busybox) -> Result<Vec<u8>, FixtureError> {
    let rootfs = rootfs_tar(busybox)?;
    let build = || -> io::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        add_file(&mut b, "Dockerfile", 0o644, DOCKERFILE.as_bytes())?;
        add_file(&mut b, "rootfs.tar", 0o644, &rootfs)?;
        b.into_inner()
    };
    build().map_err(FixtureError::Archive)
}

fn pinned(name: &str, image_id: &str) -> Result<String, FixtureError> {
    let hex = image_id
        .strip_prefix("sha256:")
        .filter(|h| is_sha256_hex(h))
        .ok_or_else(|| FixtureError::Unexpected(format!("image id {image_id:?}")))?;
    Ok(format!("{name}@sha256:{hex}"))
}

fn is_sha256_hex(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Returns the fixture's pinned reference if an image tagged for this
/// busybox exists and carries the fixture label.
async fn existing_fixture(docker: &Docker, tag: &str) -> Result<Option<String>, FixtureError> {
    match docker.inspect_image(tag).await {
        Ok(img) => {
            let labelled = img
                .config
                .as_ref()
                .and_then(|c| c.labels.as_ref())
                .and_then(|l| l.get(FIXTURE_LABEL))
                .is_some_and(|v| v == "true");
            if !labelled {
                return Ok(None);
            }
            let id = img
                .id
                .ok_or_else(|| FixtureError::Unexpected("image without id".into()))?;
            Ok(Some(pinned(FIXTURE_REPOSITORY, &id)?))
        }
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

static BUILD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Takes an exclusive `flock` on a lock file in the temp directory so that
/// concurrent processes build the fixture one at a time. The lock is held
/// while the returned descriptor lives.
// The lock file is the provider's own, in the host temp directory.
#[allow(clippy::disallowed_methods)]
async fn cross_process_lock() -> Result<std::os::fd::OwnedFd, FixtureError> {
    let path = std::env::temp_dir().join("checkfu-fixture-build.lock");
    let p = path.clone();
    let res = tokio::task::spawn_blocking(move || -> io::Result<std::os::fd::OwnedFd> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)?;
        let fd = std::os::fd::OwnedFd::from(f);
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(fd)
    })
    .await
    .map_err(|e| io::Error::other(e.to_string()))
    .and_then(|r| r);
    res.map_err(|source| FixtureError::Lock { path, source })
}

/// Makes sure the fixture image for the busybox at `busybox_path` exists
/// and returns its pinned reference `checkfu-fixture@sha256:<image id>`.
///
/// Reuses an existing image tagged `checkfu-fixture:busybox-<12 hex>` with
/// the fixture label; otherwise builds it (classic builder, network `none`,
/// uncompressed context), reporting each line of the build stream through
/// `progress`. Builds are serialised by an in-process mutex and a
/// cross-process `flock`, and the tag is checked again once both are held,
/// so concurrent callers share one image.
///
/// # Errors
///
/// [`FixtureError`] for an unusable binary, a failed build or a failed
/// daemon call.
///
/// # Cancel safety
///
/// Dropping the future mid-build leaves the daemon to finish or abandon the
/// build on its own; a later call reuses the result if it was tagged.
pub async fn ensure_fixture(
    docker: &Docker,
    busybox_path: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<String, FixtureError> {
    let busybox_path =
        locate_busybox(busybox_path, progress)
            .await
            .map_err(|e| FixtureError::Busybox {
                path: e.path,
                reason: e.reason,
            })?;
    let busybox = load_busybox(&busybox_path).await?;
    let tag = busybox.tag();
    if let Some(found) = existing_fixture(docker, &tag).await? {
        return Ok(found);
    }
    let _in_process = BUILD_LOCK.lock().await;
    let _cross_process = cross_process_lock().await?;
    if let Some(found) = existing_fixture(docker, &tag).await? {
        return Ok(found);
    }
    progress(&format!("building {tag} from {}", busybox.path.display()));
    let context = build_context(&busybox)?;
    let labels = HashMap::from([
        (FIXTURE_LABEL.to_string(), "true".to_string()),
        (
            FIXTURE_BUSYBOX_LABEL.to_string(),
            busybox.sha256_hex.clone(),
        ),
    ]);
    let options = BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .networkmode("none")
        .labels(&labels)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item?;
        if let Some(error) = info.error.or(info.error_detail.and_then(|d| d.message)) {
            return Err(FixtureError::Build { message: error });
        }
        if let Some(line) = info.stream.or(info.status) {
            let line = line.trim_end();
            if !line.is_empty() {
                progress(line);
            }
        }
    }
    existing_fixture(docker, &tag)
        .await?
        .ok_or_else(|| FixtureError::Build {
            message: format!("build finished but {tag} is missing or unlabelled"),
        })
}

/// Splits `reference` into repository name and tag, the tag being the part
/// after the last `:` that follows the last `/` (so `host:5000/x` has no
/// tag). A missing tag is `latest`.
fn split_tag(reference: &str) -> (&str, &str) {
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[slash..].rfind(':') {
        Some(i) => (&reference[..slash + i], &reference[slash + i + 1..]),
        None => (reference, "latest"),
    }
}

/// Resolves an image reference against the local daemon.
///
/// * `name@sha256:<64 hex>`: the image whose **ID** is `sha256:<hex>`
///   (see the module documentation), provided one of its tags has
///   repository `name`; returns the reference unchanged.
/// * `name[:tag]`: the image the tag designates now; returns its pinned
///   form `name@sha256:<image id hex>`.
///
/// Returns `Ok(None)` when no local image answers.
///
/// # Errors
///
/// [`FixtureError::InvalidReference`] for a malformed reference,
/// [`FixtureError::ReferenceMismatch`] when the ID exists under other names,
/// [`FixtureError::Docker`] when the daemon fails.
pub async fn resolve_image(
    docker: &Docker,
    reference: &str,
) -> Result<Option<String>, FixtureError> {
    let invalid = || FixtureError::InvalidReference {
        reference: reference.to_string(),
    };
    if let Some((name, digest)) = reference.split_once('@') {
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| is_sha256_hex(h))
            .ok_or_else(invalid)?;
        if name.is_empty() || name.contains(':') && !name.contains('/') {
            return Err(invalid());
        }
        let img = match docker.inspect_image(&format!("sha256:{hex}")).await {
            Ok(img) => img,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if img.id.as_deref() != Some(&format!("sha256:{hex}")) {
            // Inspect also accepts ID prefixes and names; insist on the ID.
            return Ok(None);
        }
        let repo_tags = img.repo_tags.unwrap_or_default();
        if repo_tags.iter().any(|t| split_tag(t).0 == name) {
            Ok(Some(reference.to_string()))
        } else {
            Err(FixtureError::ReferenceMismatch {
                reference: reference.to_string(),
                repo_tags,
            })
        }
    } else {
        let (name, tag) = split_tag(reference);
        if name.is_empty() || tag.is_empty() || reference.starts_with("sha256:") {
            return Err(invalid());
        }
        match docker.inspect_image(&format!("{name}:{tag}")).await {
            Ok(img) => {
                let id = img
                    .id
                    .ok_or_else(|| FixtureError::Unexpected("image without id".into()))?;
                Ok(Some(pinned(name, &id)?))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
// The tests read files they wrote themselves.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn split_tag_cases() {
        assert_eq!(split_tag("a:b"), ("a", "b"));
        assert_eq!(split_tag("a"), ("a", "latest"));
        assert_eq!(split_tag("host:5000/x"), ("host:5000/x", "latest"));
        assert_eq!(split_tag("host:5000/x:y"), ("host:5000/x", "y"));
    }

    #[test]
    fn elf_checks() {
        assert!(check_static_elf(b"not an elf").is_err());
        // The host's own dynamic shell, if any, has a PT_INTERP.
        if let Ok(bytes) = std::fs::read("/bin/ls") {
            let err = check_static_elf(&bytes).unwrap_err();
            assert!(err.contains("PT_INTERP"), "{err}");
        }
        if let Ok(bytes) = std::fs::read(DEFAULT_BUSYBOX_PATH) {
            check_static_elf(&bytes).unwrap();
        }
    }

    #[test]
    fn context_is_deterministic() {
        let bb = Busybox {
            path: "/x".into(),
            bytes: b"\x7fELF-not-really".to_vec(),
            sha256_hex: "ab".repeat(32),
            applets: vec!["sh".into(), "cat".into(), "[".into()],
        };
        let a = build_context(&bb).unwrap();
        let b = build_context(&bb).unwrap();
        assert_eq!(a, b);
        let rootfs = rootfs_tar(&bb).unwrap();
        let mut ar = tar::Archive::new(rootfs.as_slice());
        let mut seen = HashMap::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), 0);
            seen.insert(
                e.path()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .trim_end_matches('/')
                    .to_string(),
                (h.mode().unwrap(), h.uid().unwrap()),
            );
        }
        assert_eq!(seen["tmp"], (0o1777, 0));
        assert_eq!(seen["workspace"], (0o755, 1000));
        assert_eq!(seen["bin/sh"].1, 0);
        assert!(seen.contains_key("bin/["));
    }
}
