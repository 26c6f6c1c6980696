//! Copying the output tree out of an instance into a host folder, without
//! ever writing outside that folder.
//!
//! The listing comes from listDir and the bytes from readFiles (the
//! runtime falls back to readFile per member when a provider lacks the
//! batch member); each file's bytes are checked against the listing's
//! SHA-256. A file over 16 MiB (one readFiles member's bound, by the
//! listing's size) is not requested: it is reported and the rest is
//! copied. On the host every path component is created or opened relative
//! to its parent's descriptor with `O_NOFOLLOW`, so a symlink already in
//! DIR (or a `..` a provider might report) can never redirect a write.
//! Each file gets exactly the permission bits its listing names (`mode`,
//! `& 0o777`: no set-id or sticky bit), `0o644` when it names none.
//!
//! Host bytes are bounded by what the workload wrote: all-zero blocks of a
//! body are left as holes ([`crate::host_write`]), and one copy allocates
//! at most its budget ([`crate::host_write::output_budget`]: 1 GiB or
//! `CHECKFU_OUTPUT_MAX_BYTES`, and never the last 1 GiB of free space); a
//! file that would pass it is named in [`CopyReport::over_budget`] and not
//! written.

use checkfu_sandbox_contract::Operation;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkfu_sandbox_contract::bounds::{
    MAX_LIST_ENTRIES, MAX_READ_FILES_AGGREGATE_BYTES, MAX_READ_FILES_COUNT, MAX_READ_FILE_BYTES,
    OUTPUT_PATH,
};
use checkfu_sandbox_contract::{
    Digest, DirEntry, ReadFileOutcome, ReadFilesEntry, SandboxError, SandboxFailure, SandboxPath,
};
use checkfu_sandbox_runtime::staging::sha256_digest;
use checkfu_sandbox_runtime::Adapter;
use rustix::fs::{Mode, OFlags};

use crate::host_write::{output_budget, reason, write_beneath, WriteOutcome};
use crate::SessionError as Failure;

/// Most entries the output copy lists.
pub const OUTPUT_LIST_ENTRIES: u32 = MAX_LIST_ENTRIES;

/// A listed file the copy did not request: it is over the 16 MiB bound of
/// one readFiles member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path in the sandbox (bytes; `Display` escapes what is not UTF-8).
    pub path: SandboxPath,
    /// Its size in bytes, as listed.
    pub size_bytes: u64,
}

/// A listed file that changed between the listing and its read (the
/// workload still writing it, or a process left running that replaced or
/// removed it): the workload's behaviour, not the provider's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The path in the sandbox (bytes; `Display` escapes what is not UTF-8).
    pub path: SandboxPath,
    /// What was found, e.g. `content differs from the listing`.
    pub what: String,
    /// True when the bytes as read were copied; false when the file was
    /// skipped (gone, no longer a regular file, or grown past 16 MiB).
    pub copied: bool,
}

/// A file read but not written because the host bytes it needs would pass
/// what is left of the output copy's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget {
    /// The path in the sandbox (bytes; `Display` escapes what is not UTF-8).
    pub path: SandboxPath,
    /// The host bytes it needs: its blocks that are not all zeros, in
    /// bytes ([`crate::host_write::sparse_bytes`]).
    pub needs_bytes: u64,
    /// The bytes left of [`CopyReport::budget_bytes`] when it came.
    pub left_bytes: u64,
}

/// What [`copy_outputs`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Files written into the host folder.
    pub copied: usize,
    /// Files over [`MAX_READ_FILE_BYTES`], not copied.
    pub skipped: Vec<Skipped>,
    /// Files read but not written into the host folder: (path in the
    /// sandbox, why), e.g. a name the host folder cannot hold. The copy
    /// goes on with the other files.
    pub unwritten: Vec<(SandboxPath, String)>,
    /// Files that changed while they were copied (see [`Changed`]).
    pub changed: Vec<Changed>,
    /// Set when the copy's deadline passed: what it says was not copied
    /// (listed files are also in [`CopyReport::unwritten`]).
    pub deadline_passed: Option<String>,
    /// Files not written because they would pass the budget; the copy goes
    /// on with the files that fit.
    pub over_budget: Vec<OverBudget>,
    /// The ceiling on the copy's host bytes, in bytes
    /// ([`crate::host_write::output_ceiling_bytes`]).
    pub ceiling_bytes: u64,
    /// The host bytes the copy could allocate: the ceiling, or the free
    /// space of the folder's file system less 1 GiB when that is less.
    pub budget_bytes: u64,
    /// The host bytes the written files allocate (`st_blocks * 512`).
    pub host_bytes: u64,
}

impl CopyReport {
    /// True when every listed file was copied (a changed file copied as
    /// read counts as copied).
    pub fn complete(&self) -> bool {
        self.skipped.is_empty()
            && self.unwritten.is_empty()
            && self.over_budget.is_empty()
            && self.deadline_passed.is_none()
            && self.changed.iter().all(|c| c.copied)
    }
}

/// What one readFiles member gave: bytes to write, and whether the file
/// changed since the listing.
#[derive(Debug)]
enum Member {
    /// Bytes to write; `Some(what)` when they are not what was listed.
    Write(Vec<u8>, Option<String>),
    /// Nothing to write: why.
    Skip(String),
}

/// Copies every regular file of `/mnt/session/outputs` of at most 16 MiB
/// into `dir` (created when missing). Larger files are not requested; they
/// are returned in [`CopyReport::skipped`]. Files are read in readFiles
/// budget groups and each group is written before the next is read, so at
/// most one group's bytes (128 MiB) are held at once.
///
/// Each file is written with its all-zero 4 KiB blocks left as holes, so
/// it allocates what the workload wrote. The copy allocates at most its
/// budget ([`output_budget`], read once per copy): a file whose blocks
/// that are not all zeros need more than is left is not written and is
/// named in [`CopyReport::over_budget`]; later files that fit are written.
///
/// A file that changed between listing and reading (see [`Changed`]) is
/// copied as read when it could be read whole (at most 16 MiB), otherwise
/// named and skipped; the copy goes on with the other files.
///
/// Nothing is started after `deadline`: a listing or read still running
/// then is abandoned, and every file not yet copied is named in
/// [`CopyReport::unwritten`] with [`CopyReport::deadline_passed`] set.
///
/// # Errors
/// The runtime's errors, a relative path that is not a plain
/// sequence of names, an unusable host folder, or a malformed
/// `CHECKFU_OUTPUT_MAX_BYTES` (`invalid_request` naming it and its value).
/// A host write that fails for one file is reported, with its reason, in
/// [`CopyReport::unwritten`] and the copy goes on.
pub async fn copy_outputs(
    adapter: &Adapter,
    instance_id: &str,
    dir: &Path,
    deadline: tokio::time::Instant,
) -> Result<CopyReport, Failure> {
    let passed = |what: &str| format!("the output copy's deadline passed while {what}");
    let listing = match tokio::time::timeout_at(
        deadline,
        adapter.list_dir(instance_id, OUTPUT_PATH, OUTPUT_LIST_ENTRIES),
    )
    .await
    {
        Ok(listing) => listing?,
        Err(_) => {
            return Ok(CopyReport {
                deadline_passed: Some(passed("listing the output tree; nothing was copied")),
                ..CopyReport::default()
            })
        }
    };
    let mut wanted: Vec<(Vec<Vec<u8>>, DirEntry)> = Vec::with_capacity(listing.entries.len());
    let mut report = CopyReport::default();
    for entry in listing.entries {
        let components = relative_components(&entry.path)?;
        if entry.size_bytes > MAX_READ_FILE_BYTES {
            report.skipped.push(Skipped {
                path: entry.path,
                size_bytes: entry.size_bytes,
            });
        } else {
            wanted.push((components, entry));
        }
    }
    let root = {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || open_root(&dir))
            .await
            .map_err(|e| Failure::Host(format!("output copy task failed: {e}")))??
    };
    (report.ceiling_bytes, report.budget_bytes) = output_budget(root.as_fd())?;
    let root = Arc::new(root);
    let sizes: Vec<u64> = wanted.iter().map(|(_, e)| e.size_bytes).collect();
    for group in read_groups(&sizes) {
        let members = &wanted[group.clone()];
        let files: Vec<ReadFilesEntry> = members
            .iter()
            .map(|(_, e)| ReadFilesEntry {
                path: e.path.clone(),
                maximum_bytes: e.size_bytes,
            })
            .collect();
        let Ok(outcomes) =
            tokio::time::timeout_at(deadline, adapter.read_files(instance_id, files)).await
        else {
            let why = passed("reading");
            for (_, e) in &wanted[group.start..] {
                report.unwritten.push((e.path.clone(), why.clone()));
            }
            report.deadline_passed = Some(why);
            break;
        };
        let outcomes = outcomes?;
        let mut contents = Vec::with_capacity(members.len());
        for ((components, entry), outcome) in members.iter().zip(outcomes) {
            let member = match checked_bytes(entry, outcome) {
                Member::Skip(what) if what.starts_with(GREW) => {
                    // Grown since listed: read it again whole, within bounds.
                    reread(adapter, instance_id, entry, deadline).await?
                }
                m => m,
            };
            match member {
                Member::Write(bytes, changed) => {
                    if let Some(what) = changed {
                        report.changed.push(Changed {
                            path: entry.path.clone(),
                            what,
                            copied: true,
                        });
                    }
                    contents.push((components.clone(), bytes, entry.effective_mode()));
                }
                Member::Skip(what) => report.changed.push(Changed {
                    path: entry.path.clone(),
                    what,
                    copied: false,
                }),
            }
        }
        let root = root.clone();
        let left = report.budget_bytes.saturating_sub(report.host_bytes);
        let written = tokio::task::spawn_blocking(move || write_group(&root, contents, left))
            .await
            .map_err(|e| Failure::Host(format!("output copy task failed: {e}")))?;
        report.copied += written.copied;
        report.host_bytes += written.host_bytes;
        report.unwritten.extend(written.unwritten);
        report.over_budget.extend(written.over_budget);
    }
    Ok(report)
}

/// What [`write_group`] wrote.
#[derive(Debug, Default)]
struct Written {
    copied: usize,
    host_bytes: u64,
    unwritten: Vec<(SandboxPath, String)>,
    over_budget: Vec<OverBudget>,
}

/// Writes one group's files beneath `root`, each in turn against what is
/// left of `left` host bytes (a file charges what it allocates).
fn write_group(root: &OwnedFd, contents: Vec<(Vec<Vec<u8>>, Vec<u8>, u32)>, left: u64) -> Written {
    let mut out = Written::default();
    for (components, bytes, mode) in contents {
        let path = || SandboxPath::join(OUTPUT_PATH, &components.join(&b'/'));
        let rel = relative_path(&components);
        let left_bytes = left.saturating_sub(out.host_bytes);
        match write_beneath(root.as_fd(), &rel, &bytes, mode, left_bytes) {
            Ok(WriteOutcome::Written(allocated)) => {
                out.copied += 1;
                out.host_bytes = out.host_bytes.saturating_add(allocated);
            }
            Ok(WriteOutcome::OverBudget {
                needs_bytes,
                left_bytes,
            }) => out.over_budget.push(OverBudget {
                path: path(),
                needs_bytes,
                left_bytes,
            }),
            Err(e) => out.unwritten.push((path(), reason(&e))),
        }
    }
    out
}

/// The host path of `components` relative to the output folder.
fn relative_path(components: &[Vec<u8>]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    components
        .iter()
        .map(|c| std::ffi::OsStr::from_bytes(c))
        .collect()
}

/// Creates `dir` when missing and opens it as the root of every write.
fn open_root(dir: &Path) -> Result<OwnedFd, Failure> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::Host(format!(
            "output folder {}: cannot create: {e}",
            dir.display()
        ))
    })?;
    rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Failure::Host(format!("output folder {}: cannot open: {e}", dir.display())))
}

/// How [`checked_bytes`] starts the reason of a file grown past its listed
/// size.
const GREW: &str = "grew";

/// The bytes of `outcome`, checked against the listing. A file that is not
/// as listed changed under the copy: the workload's doing, never a
/// protocol failure of the provider (whose reads are contained and bounded
/// by the runtime either way).
fn checked_bytes(entry: &DirEntry, outcome: ReadFileOutcome) -> Member {
    let bytes = match outcome {
        ReadFileOutcome::Read { content_base64, .. } => content_base64.0,
        ReadFileOutcome::TooLarge { size_bytes, .. } => {
            return Member::Skip(format!(
                "{GREW} from {} to {size_bytes} bytes while being copied",
                entry.size_bytes
            ))
        }
        ReadFileOutcome::NotFound { .. } => {
            return Member::Skip("removed while being copied".into())
        }
        ReadFileOutcome::NotRegularFile { .. } => {
            return Member::Skip("no longer a regular file".into())
        }
        ReadFileOutcome::OutsideRoot { .. } => {
            return Member::Skip("replaced by a link out of the output tree".into())
        }
    };
    let digest = sha256_digest(&bytes);
    let listed = entry.sha256.as_ref().map_or("no digest", Digest::as_str);
    if entry.sha256.as_ref() == Some(&digest) {
        return Member::Write(bytes, None);
    }
    let what = format!(
        "changed while being copied (listed {} bytes {listed}, read {} bytes {}); copied as read",
        entry.size_bytes,
        bytes.len(),
        digest
    );
    Member::Write(bytes, Some(what))
}

/// Reads `entry` again alone with the largest bound (16 MiB), after it
/// grew past its listed size: copied as read when it fits.
///
/// # Errors
/// The runtime's errors.
async fn reread(
    adapter: &Adapter,
    instance_id: &str,
    entry: &DirEntry,
    deadline: tokio::time::Instant,
) -> Result<Member, Failure> {
    let files = vec![ReadFilesEntry {
        path: entry.path.clone(),
        maximum_bytes: MAX_READ_FILE_BYTES,
    }];
    let Ok(outcomes) =
        tokio::time::timeout_at(deadline, adapter.read_files(instance_id, files)).await
    else {
        return Ok(Member::Skip(
            "grew while being copied; the output copy's deadline passed before it was read again"
                .into(),
        ));
    };
    Ok(match outcomes?.into_iter().next() {
        Some(ReadFileOutcome::Read { content_base64, .. }) => Member::Write(
            content_base64.0,
            Some(format!(
                "grew from {} bytes while being copied; copied as read",
                entry.size_bytes
            )),
        ),
        Some(other) => match checked_bytes(entry, other) {
            Member::Skip(what) => Member::Skip(what),
            Member::Write(..) => Member::Skip("changed while being copied".into()),
        },
        None => Member::Skip("changed while being copied".into()),
    })
}

/// Budget groups for readFiles: at most 1,024 files and 128 MiB each.
pub fn read_groups(sizes: &[u64]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut total: u64 = 0;
    for (i, size) in sizes.iter().enumerate() {
        let full = i - start >= MAX_READ_FILES_COUNT
            || total.saturating_add(*size) > MAX_READ_FILES_AGGREGATE_BYTES;
        if full && i > start {
            out.push(start..i);
            start = i;
            total = 0;
        }
        total = total.saturating_add(*size);
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// The components of `path` below the output tree: each a plain name (not
/// empty, `.` or `..`), as bytes: a name that is not UTF-8 is kept exactly.
fn relative_components(path: &SandboxPath) -> Result<Vec<Vec<u8>>, SandboxFailure> {
    let refuse = || -> SandboxFailure {
        SandboxError::protocol(
            Operation::CopyOutputs,
            "entries.path",
            format!("a path of plain names below {OUTPUT_PATH}"),
            path,
        )
        .into()
    };
    let rest = path.relative_to(OUTPUT_PATH).ok_or_else(refuse)?;
    let parts: Vec<Vec<u8>> = rest.split(|b| *b == b'/').map(<[u8]>::to_vec).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p == b"." || p == b".." || p.contains(&0))
    {
        return Err(refuse());
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes through the output copy's writer with no budget.
    fn put(
        root: &OwnedFd,
        components: &[Vec<u8>],
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), checkfu_sandbox_contained::ContainedError> {
        write_beneath(
            root.as_fd(),
            &relative_path(components),
            bytes,
            mode,
            u64::MAX,
        )
        .map(|_| ())
    }

    fn listed(content: &[u8]) -> DirEntry {
        DirEntry {
            path: "/mnt/session/outputs/log.txt".into(),
            size_bytes: content.len() as u64,
            sha256: Some(sha256_digest(content)),
            mode: None,
        }
    }

    fn read(content: &[u8]) -> ReadFileOutcome {
        ReadFileOutcome::Read {
            path: "/mnt/session/outputs/log.txt".into(),
            content_base64: checkfu_sandbox_contract::Bytes(content.to_vec()),
        }
    }

    #[test]
    fn a_file_read_as_listed_is_copied_without_a_note() {
        match checked_bytes(&listed(b"x\n"), read(b"x\n")) {
            Member::Write(bytes, None) => assert_eq!(bytes, b"x\n"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_changed_between_listing_and_read_is_copied_as_read_and_named() {
        match checked_bytes(&listed(b"x\n"), read(b"x\nx\n")) {
            Member::Write(bytes, Some(what)) => {
                assert_eq!(bytes, b"x\nx\n");
                assert!(what.contains("changed while being copied"), "{what}");
                assert!(what.contains("listed 2 bytes"), "{what}");
                assert!(what.contains("read 4 bytes"), "{what}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_grown_past_its_bound_or_removed_is_skipped_with_the_reason() {
        let grown = ReadFileOutcome::TooLarge {
            path: "/mnt/session/outputs/log.txt".into(),
            size_bytes: 9,
        };
        match checked_bytes(&listed(b"x\n"), grown) {
            Member::Skip(what) => assert_eq!(what, "grew from 2 to 9 bytes while being copied"),
            other => panic!("{other:?}"),
        }
        let gone = ReadFileOutcome::NotFound {
            path: "/mnt/session/outputs/log.txt".into(),
        };
        match checked_bytes(&listed(b"x\n"), gone) {
            Member::Skip(what) => assert_eq!(what, "removed while being copied"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn read_groups_respect_both_budgets() {
        let sizes = vec![1u64; 2_500];
        let groups = read_groups(&sizes);
        assert_eq!(groups, vec![0..1024, 1024..2048, 2048..2500]);
        let mib = 1024 * 1024;
        let big = vec![16 * mib; 9];
        assert_eq!(read_groups(&big), vec![0..8, 8..9]);
        assert!(read_groups(&[]).is_empty());
    }

    #[test]
    fn only_plain_names_below_the_output_tree() {
        assert_eq!(
            relative_components(&"/mnt/session/outputs/a/b".into()).unwrap(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(
            relative_components(&SandboxPath::from_bytes(
                b"/mnt/session/outputs/d/bad-\xff".to_vec()
            ))
            .unwrap(),
            vec![b"d".to_vec(), b"bad-\xff".to_vec()]
        );
        for bad in [
            "/mnt/session/outputs",
            "/mnt/session/outputs/../x",
            "/mnt/session/outputsx/y",
            "/mnt/session/outputs//y",
            "/etc/passwd",
        ] {
            assert!(relative_components(&bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_symlink_in_the_destination_is_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dest.path().join("link")).unwrap();
        let root = rustix::fs::open(
            dest.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let err = put(&root, &["link".into(), "x".into()], b"data", 0o644).unwrap_err();
        assert!(
            matches!(
                err,
                checkfu_sandbox_contained::ContainedError::OutsideRoot { .. }
            ),
            "{err:?}"
        );
        std::os::unix::fs::symlink(outside.path().join("f"), dest.path().join("f")).unwrap();
        assert!(put(&root, &["f".into()], b"data", 0o644).is_err());
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        put(&root, &["d".into(), "e".into()], b"ok", 0o644).unwrap();
        assert_eq!(std::fs::read(dest.path().join("d/e")).unwrap(), b"ok");
    }

    #[test]
    fn names_are_written_as_bytes_and_a_name_the_host_cannot_hold_fails_alone() {
        let dest = tempfile::tempdir().unwrap();
        let root = rustix::fs::open(
            dest.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        put(&root, &[b"bad-\xff".to_vec()], b"bad\n", 0o644).unwrap();
        use std::os::unix::ffi::OsStrExt;
        let bad = dest.path().join(std::ffi::OsStr::from_bytes(b"bad-\xff"));
        assert_eq!(std::fs::read(bad).unwrap(), b"bad\n");
        // Longer than a host file name can be (255 bytes): this file fails,
        // the next one is still written.
        assert!(put(&root, &[vec![b'n'; 300]], b"x", 0o644).is_err());
        put(&root, &[b"after".to_vec()], b"ok", 0o644).unwrap();
        assert_eq!(std::fs::read(dest.path().join("after")).unwrap(), b"ok");
    }

    #[test]
    fn a_group_past_its_budget_names_the_files_over_it_and_writes_those_that_fit() {
        let dest = tempfile::tempdir().unwrap();
        let root = rustix::fs::open(
            dest.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let block = crate::host_write::HOLE_BLOCK;
        let mut islands = vec![0u8; 64 * block];
        islands[0] = 1;
        islands[32 * block] = 2;
        let contents = vec![
            (vec![b"holes".to_vec()], vec![0u8; 64 * block], 0o644),
            (vec![b"islands".to_vec()], islands, 0o644),
            (vec![b"dense".to_vec()], vec![3u8; 8 * block], 0o644),
            (vec![b"small".to_vec()], b"small\n".to_vec(), 0o644),
        ];
        // Room for the islands (2 blocks) and the small file, not the
        // dense one (8 blocks); a file system may allocate a little more.
        let left = 6 * block as u64;
        let out = write_group(&root, contents, left);
        assert_eq!(out.copied, 3, "{out:?}");
        assert!(out.unwritten.is_empty(), "{out:?}");
        assert_eq!(out.over_budget.len(), 1, "{out:?}");
        let over = &out.over_budget[0];
        assert_eq!(over.path, SandboxPath::from("/mnt/session/outputs/dense"));
        assert_eq!(over.needs_bytes, 8 * block as u64);
        assert!(over.left_bytes < 8 * block as u64 && over.left_bytes <= left);
        assert!(!dest.path().join("dense").exists());
        assert_eq!(
            std::fs::read(dest.path().join("small")).unwrap(),
            b"small\n"
        );
        let allocated: u64 = ["holes", "islands", "small"]
            .iter()
            .map(|n| {
                use std::os::unix::fs::MetadataExt;
                std::fs::metadata(dest.path().join(n)).unwrap().blocks() * 512
            })
            .sum();
        assert_eq!(out.host_bytes, allocated);
    }

    #[test]
    fn a_write_that_fails_names_its_reason() {
        let dest = tempfile::tempdir().unwrap();
        std::fs::create_dir(dest.path().join("good.txt")).unwrap();
        let root = rustix::fs::open(
            dest.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let out = write_group(
            &root,
            vec![(vec![b"good.txt".to_vec()], b"good\n".to_vec(), 0o644)],
            u64::MAX,
        );
        assert_eq!(
            out.unwritten,
            vec![(
                SandboxPath::from("/mnt/session/outputs/good.txt"),
                "\"good.txt\" is a directory on the host".to_owned()
            )]
        );
    }
}
