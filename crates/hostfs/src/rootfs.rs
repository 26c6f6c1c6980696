//! The fixture's root file system: the checked busybox binary and the
//! deterministic `rootfs.tar` every provider's fixture image is made of.
//!
//! # Layout of the root file system
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

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Uid and gid of the unprivileged `checkfu` user in the fixture.
pub const CHECKFU_UID: u32 = 1000;

/// Where Debian's `busybox-static` installs its binary.
pub const DEFAULT_BUSYBOX_PATH: &str = "/bin/busybox";

/// The fixture's `PATH` (also the image configuration's `Env`).
pub const FIXTURE_PATH_ENV: &str = "PATH=/usr/local/bin:/usr/bin:/bin";

/// Failure to read the busybox binary or to build the root file system.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
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
    /// Building the tar archive failed.
    #[error("cannot build the root file system archive")]
    Archive(#[source] io::Error),
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

/// Why [`check_static_elf`] refuses a binary: the failed check, with the
/// header value found and the one required.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    /// Fewer than 64 bytes, or the first four are not `\x7fELF`.
    #[error("no ELF magic ({len} bytes)")]
    NoMagic {
        /// The file's length in bytes.
        len: usize,
    },
    /// `EI_CLASS`/`EI_DATA` are not 2/1 (64-bit, little-endian).
    #[error("not a 64-bit little-endian ELF (class {class}, data {data}; expected 2 and 1)")]
    NotElf64Le {
        /// `EI_CLASS` found.
        class: u8,
        /// `EI_DATA` found.
        data: u8,
    },
    /// `e_type` is neither `ET_EXEC` (2) nor `ET_DYN` (3).
    #[error("ELF type {e_type} is not an executable (expected 2 or 3)")]
    NotExecutable {
        /// `e_type` found.
        e_type: u16,
    },
    /// `e_phnum` is 0 or `e_phentsize` is under 4 bytes.
    #[error("no program headers (e_phnum {phnum}, e_phentsize {phentsize})")]
    NoProgramHeaders {
        /// `e_phnum` found.
        phnum: u16,
        /// `e_phentsize` found, in bytes.
        phentsize: u16,
    },
    /// A program header's type field lies past the end of the file (or its
    /// offset does not fit a `usize`).
    #[error("program header {index} (e_phoff {phoff}) runs past the file ({len} bytes)")]
    HeadersPastEnd {
        /// The header's index.
        index: usize,
        /// `e_phoff` found.
        phoff: u64,
        /// The file's length in bytes.
        len: usize,
    },
    /// A program header is `PT_INTERP`: the binary needs a dynamic loader.
    #[error("program header {index} is PT_INTERP (dynamically linked)")]
    Interpreter {
        /// The header's index.
        index: usize,
    },
}

/// Checks that `bytes` is a 64-bit little-endian ELF executable without a
/// program interpreter (`PT_INTERP`), i.e. one that runs in an empty
/// (`FROM scratch`) root. Static-PIE binaries pass; anything needing
/// `ld.so` fails.
///
/// # Errors
///
/// [`ElfError`], naming the failed check and the header values.
pub fn check_static_elf(bytes: &[u8]) -> Result<(), ElfError> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err(ElfError::NoMagic { len: bytes.len() });
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err(ElfError::NotElf64Le {
            class: bytes[4],
            data: bytes[5],
        });
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let e_type = u16_at(0x10);
    if e_type != 2 && e_type != 3 {
        return Err(ElfError::NotExecutable { e_type });
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&bytes[0x20..0x28]);
    let phoff64 = u64::from_le_bytes(off);
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    if phnum == 0 || phentsize < 4 {
        return Err(ElfError::NoProgramHeaders { phnum, phentsize });
    }
    for index in 0..usize::from(phnum) {
        let past_end = ElfError::HeadersPastEnd {
            index,
            phoff: phoff64,
            len: bytes.len(),
        };
        let p = usize::try_from(phoff64)
            .ok()
            .and_then(|phoff| {
                usize::from(phentsize)
                    .checked_mul(index)?
                    .checked_add(phoff)
            })
            .and_then(|start| bytes.get(start..start.checked_add(4)?))
            .ok_or(past_end)?;
        if u32::from_le_bytes([p[0], p[1], p[2], p[3]]) == PT_INTERP {
            return Err(ElfError::Interpreter { index });
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
/// [`RootfsError::Busybox`] when unreadable or listing fails,
/// [`RootfsError::NotStaticElf`] when it needs a dynamic loader.
// The busybox binary is the operator's host file, not a sandbox tree.
#[allow(clippy::disallowed_methods)]
pub async fn load_busybox(path: &Path) -> Result<Busybox, RootfsError> {
    let err = |reason: String| RootfsError::Busybox {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| err(e.to_string()))?;
    check_static_elf(&bytes).map_err(|e| RootfsError::NotStaticElf {
        path: path.to_path_buf(),
        reason: e.to_string(),
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

/// Appends the regular file `path` holding `data` to `b`: owned by root,
/// with `mode` and modification time 0 (so equal inputs give equal
/// archives).
///
/// # Errors
///
/// The tar builder's.
pub fn add_file(
    b: &mut tar::Builder<Vec<u8>>,
    path: &str,
    mode: u32,
    data: &[u8],
) -> io::Result<()> {
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
/// Builds the root file system tar (see the module table). Deterministic:
/// the same busybox gives the same bytes.
///
/// # Errors
///
/// [`RootfsError::Archive`] when the tar builder fails.
pub fn rootfs_tar(busybox: &Busybox) -> Result<Vec<u8>, RootfsError> {
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
    build().map_err(RootfsError::Archive)
}

#[cfg(test)]
// The tests read files they wrote themselves.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn elf_checks() {
        assert_eq!(
            check_static_elf(b"not an elf"),
            Err(ElfError::NoMagic { len: 10 })
        );
        // The host's own dynamic shell, if any, has a PT_INTERP.
        if let Ok(bytes) = std::fs::read("/bin/ls") {
            let err = check_static_elf(&bytes).unwrap_err();
            assert!(matches!(err, ElfError::Interpreter { .. }), "{err}");
        }
        if let Ok(bytes) = std::fs::read(DEFAULT_BUSYBOX_PATH) {
            check_static_elf(&bytes).unwrap();
        }
    }

    #[test]
    fn rootfs_is_deterministic() {
        let bb = Busybox {
            path: "/x".into(),
            bytes: b"\x7fELF-not-really".to_vec(),
            sha256_hex: "ab".repeat(32),
            applets: vec!["sh".into(), "cat".into(), "[".into()],
        };
        let rootfs = rootfs_tar(&bb).unwrap();
        assert_eq!(rootfs, rootfs_tar(&bb).unwrap());
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
