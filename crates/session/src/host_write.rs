//! Writing one output file on the host: beneath the output folder without
//! following any symlink, with its holes kept, and within the output
//! copy's budget of host bytes.
//!
//! A body read through readFiles carries its holes as zeros. Written as
//! is, a file of one written byte and 16 MiB of hole would take 16 MiB of
//! the host's disk, so a workload that writes nothing could fill it. The
//! writer skips every all-zero block of [`HOLE_BLOCK`] bytes (aligned on
//! the file's offsets): it seeks over them and sets the file's length at
//! the end, so the host allocates what the workload wrote, not its holes.
//! The budget ([`output_budget`]) bounds the whole copy.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use checkfu_sandbox_contained::{create_dirs_beneath, ContainedError, FILE_MODE};
use checkfu_sandbox_contract::{Operation, SandboxError};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// The environment variable that sets the most host bytes one output copy
/// may allocate (decimal bytes); [`DEFAULT_OUTPUT_MAX_BYTES`] when unset.
pub const OUTPUT_MAX_BYTES_ENV: &str = "CHECKFU_OUTPUT_MAX_BYTES";

/// The most host bytes one output copy may allocate unless configured
/// (1 GiB).
pub const DEFAULT_OUTPUT_MAX_BYTES: u64 = 1 << 30;

/// Free space an output copy always leaves on the file system of its
/// folder (1 GiB, as snapshots leave): a file that would eat into it is
/// not written.
pub const FREE_SPACE_RESERVE_BYTES: u64 = 1 << 30;

/// The block, in bytes, whose all-zero instances (at offsets that are a
/// multiple of it) are left as holes (4 KiB: the page size, and the block
/// size of ext4, XFS and Btrfs on common hosts).
pub const HOLE_BLOCK: usize = 4096;

/// The ceiling on one output copy's host bytes: [`OUTPUT_MAX_BYTES_ENV`]
/// when set, else [`DEFAULT_OUTPUT_MAX_BYTES`].
///
/// # Errors
/// `invalid_request` of `copy_outputs` naming the variable, what it must
/// be and its value, when it is not a decimal number of bytes.
pub fn output_ceiling_bytes() -> Result<u64, SandboxError> {
    parse_ceiling(std::env::var(OUTPUT_MAX_BYTES_ENV).ok())
}

/// The ceiling given the variable's value, if set.
fn parse_ceiling(value: Option<String>) -> Result<u64, SandboxError> {
    match value {
        Some(v) if !v.trim().is_empty() => v.trim().parse::<u64>().map_err(|_| {
            SandboxError::invalid_request(
                Operation::CopyOutputs,
                OUTPUT_MAX_BYTES_ENV,
                "a decimal number of bytes",
                v.clone(),
            )
        }),
        _ => Ok(DEFAULT_OUTPUT_MAX_BYTES),
    }
}

/// The host bytes an output copy into the folder `root` may allocate: the
/// ceiling ([`output_ceiling_bytes`]) or the free space of its file system
/// for unprivileged users less [`FREE_SPACE_RESERVE_BYTES`], whichever is
/// less. Returns `(ceiling, budget)`.
///
/// # Errors
/// `invalid_request` for a malformed ceiling; the `fstatvfs` failure,
/// as one line, when the file system cannot be queried.
pub fn output_budget(root: BorrowedFd<'_>) -> Result<(u64, u64), crate::SessionError> {
    let ceiling = output_ceiling_bytes()?;
    let st = rustix::fs::fstatvfs(root).map_err(|e| {
        crate::SessionError::Host(format!("output folder: cannot query its free space: {e}"))
    })?;
    let free = st
        .f_bavail
        .saturating_mul(st.f_frsize)
        .saturating_sub(FREE_SPACE_RESERVE_BYTES);
    Ok((ceiling, ceiling.min(free)))
}

/// Whether every byte of `block` is zero.
fn is_zero(block: &[u8]) -> bool {
    // No early exit: the compiler vectorizes the fold over whole words.
    let mut words = block.chunks_exact(8);
    let any = words.by_ref().fold(0u64, |acc, w| {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        acc | u64::from_ne_bytes(word)
    });
    any == 0 && words.remainder().iter().all(|b| *b == 0)
}

/// The data runs of `bytes`: maximal ranges of whole [`HOLE_BLOCK`]-aligned
/// blocks (the last one possibly short) that are not all zeros, in order.
fn data_runs(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, block) in bytes.chunks(HOLE_BLOCK).enumerate() {
        if is_zero(block) {
            continue;
        }
        let start = i * HOLE_BLOCK;
        let end = start + block.len();
        match runs.last_mut() {
            Some(last) if last.end == start => last.end = end,
            _ => runs.push(start..end),
        }
    }
    runs
}

/// The host bytes writing `bytes` with [`write_sparse`] allocates: its
/// blocks that are not all zeros, each counted as a whole [`HOLE_BLOCK`].
pub fn sparse_bytes(bytes: &[u8]) -> u64 {
    let blocks = bytes.chunks(HOLE_BLOCK).filter(|b| !is_zero(b)).count();
    blocks as u64 * HOLE_BLOCK as u64
}

/// Writes `bytes` into `file`, which must be empty, so that it reads back
/// as `bytes`: each run of blocks that are not all zeros is written at its
/// offset, all-zero blocks are skipped, and the length is set to
/// `bytes.len()` at the end, so that skipped blocks stay holes.
///
/// # Errors
/// The write or `ftruncate` failure.
pub fn write_sparse(file: &File, bytes: &[u8]) -> io::Result<()> {
    for run in data_runs(bytes) {
        file.write_all_at(&bytes[run.clone()], run.start as u64)?;
    }
    file.set_len(bytes.len() as u64)
}

/// What writing one output file on the host came to.
#[derive(Debug)]
pub enum WriteOutcome {
    /// Written; the host bytes it allocates (`st_blocks * 512`).
    Written(u64),
    /// Not written: it needs `needs_bytes` (by [`sparse_bytes`]), more than
    /// the `left_bytes` left of the copy's budget.
    OverBudget {
        /// What it needs.
        needs_bytes: u64,
        /// What was left.
        left_bytes: u64,
    },
}

/// Writes `bytes` at `rel` beneath `root` with exactly the permission bits
/// `mode & 0o777`, keeping its holes ([`write_sparse`]), when its
/// [`sparse_bytes`] are at most `left_bytes`. Parents are created as by
/// [`create_dirs_beneath`] (no symlink followed); the name is opened with
/// `O_CREAT | O_TRUNC | O_NOFOLLOW`.
///
/// # Errors
/// As [`checkfu_sandbox_contained::overwrite_beneath_mode`]:
/// [`ContainedError::OutsideRoot`] for a symlink among the parents or at
/// the name, [`ContainedError::NotRegularFile`] when a parent is not a
/// directory, `InvalidPath`, `Io` (a directory at the name among them);
/// [`reason`] words each.
pub fn write_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    bytes: &[u8],
    mode: u32,
    left_bytes: u64,
) -> Result<WriteOutcome, ContainedError> {
    let needs_bytes = sparse_bytes(bytes);
    if needs_bytes > left_bytes {
        return Ok(WriteOutcome::OverBudget {
            needs_bytes,
            left_bytes,
        });
    }
    let invalid = || ContainedError::InvalidPath {
        path: rel.to_path_buf(),
    };
    let name = rel.file_name().ok_or_else(invalid)?;
    let parent = rel.parent().ok_or_else(invalid)?;
    let dir: Option<OwnedFd> = if parent.as_os_str().is_empty() {
        None
    } else {
        Some(create_dirs_beneath(root, parent, None)?)
    };
    let dir = dir.as_ref().map_or(root, AsFd::as_fd);
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(FILE_MODE),
    )
    .map_err(|e| open_error(rel, e))?;
    let io_err = |source: io::Error| ContainedError::Io {
        path: rel.to_path_buf(),
        source,
    };
    let file = File::from(fd);
    write_sparse(&file, bytes).map_err(io_err)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o777))
        .map_err(|e| io_err(io::Error::from(e)))?;
    let allocated = file
        .metadata()
        .map_err(io_err)?
        .blocks()
        .saturating_mul(512);
    Ok(WriteOutcome::Written(allocated))
}

/// The error of opening `rel` for writing.
fn open_error(rel: &Path, e: Errno) -> ContainedError {
    let path = rel.to_path_buf();
    match e {
        // A symlink at the name (O_NOFOLLOW).
        Errno::LOOP => ContainedError::OutsideRoot { path },
        other => ContainedError::Io {
            path,
            source: io::Error::from(other),
        },
    }
}

/// Why writing the output file `e` names failed, as one line that names
/// the reason (`"a/x" is a directory on the host`), not only the path.
pub fn reason(e: &ContainedError) -> String {
    let quoted = |p: &PathBuf| format!("{:?}", p.display().to_string());
    match e {
        ContainedError::Io { path, source }
            if source.raw_os_error() == Some(Errno::ISDIR.raw_os_error()) =>
        {
            format!("{} is a directory on the host", quoted(path))
        }
        ContainedError::Io { path, source } => {
            format!("cannot write {} on the host: {source}", quoted(path))
        }
        ContainedError::OutsideRoot { path } => format!(
            "{} or one of its parents is a symbolic link on the host, which is never followed",
            quoted(path)
        ),
        // From the parents: a file (or a vanished entry) where a directory
        // must be; `path` is the parents' path.
        ContainedError::NotRegularFile { path } | ContainedError::NotFound { path } => format!(
            "{} (or one of its parents) is not a directory on the host",
            quoted(path)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(dir: &Path) -> OwnedFd {
        rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    /// `n` blocks of zeros, then `island` at `at`, length `len`.
    fn body(len: usize, islands: &[(usize, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for (at, data) in islands {
            b[*at..*at + data.len()].copy_from_slice(data);
        }
        b
    }

    #[test]
    fn zero_blocks_are_found_at_any_length() {
        assert!(is_zero(&[]));
        assert!(is_zero(&[0; 4096]));
        assert!(is_zero(&[0; 13]));
        for at in [0, 7, 8, 4095] {
            let mut b = vec![0u8; 4096];
            b[at] = 1;
            assert!(!is_zero(&b), "{at}");
        }
        let mut short = vec![0u8; 13];
        short[12] = 9;
        assert!(!is_zero(&short));
    }

    #[test]
    fn data_runs_join_adjacent_blocks_and_skip_zero_blocks() {
        let b = body(
            5 * HOLE_BLOCK + 10,
            &[(1, b"a"), (HOLE_BLOCK + 5, b"b"), (3 * HOLE_BLOCK, b"c")],
        );
        assert_eq!(
            data_runs(&b),
            vec![0..2 * HOLE_BLOCK, 3 * HOLE_BLOCK..4 * HOLE_BLOCK]
        );
        assert_eq!(sparse_bytes(&b), 3 * HOLE_BLOCK as u64);
        let tail = body(2 * HOLE_BLOCK + 10, &[(2 * HOLE_BLOCK + 9, b"z")]);
        assert_eq!(data_runs(&tail), vec![2 * HOLE_BLOCK..2 * HOLE_BLOCK + 10]);
        assert_eq!(sparse_bytes(&tail), HOLE_BLOCK as u64);
        assert!(data_runs(&[0; 3 * HOLE_BLOCK]).is_empty());
        assert_eq!(sparse_bytes(&[]), 0);
    }

    #[test]
    fn a_body_of_holes_and_islands_reads_back_exactly_and_allocates_only_its_islands() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        let mib = 1 << 20;
        let b = body(
            16 * mib - 1,
            &[(0, b"head"), (8 * mib + 3, b"middle"), (16 * mib - 2, b"t")],
        );
        let outcome = write_beneath(root.as_fd(), Path::new("d/s"), &b, 0o640, u64::MAX).unwrap();
        let path = dir.path().join("d/s");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), b.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), b);
        assert_eq!(meta.mode() & 0o777, 0o640);
        let allocated = meta.blocks() * 512;
        assert!(matches!(outcome, WriteOutcome::Written(n) if n == allocated));
        // Three islands of one block each; a file system may allocate a
        // little more per extent, never the 16 MiB of holes.
        assert!(allocated <= 256 * 1024, "{allocated} bytes allocated");
    }

    #[test]
    fn a_file_of_zeros_allocates_nothing_and_keeps_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        let b = vec![0u8; 16 * (1 << 20) - 1];
        write_beneath(root.as_fd(), Path::new("s"), &b, 0o644, 0).unwrap();
        let meta = std::fs::metadata(dir.path().join("s")).unwrap();
        assert_eq!(meta.len(), b.len() as u64);
        assert_eq!(meta.blocks(), 0);
    }

    #[test]
    fn an_existing_dense_file_is_replaced_by_the_sparse_body() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        std::fs::write(dir.path().join("f"), vec![7u8; 3 * HOLE_BLOCK]).unwrap();
        let b = body(2 * HOLE_BLOCK, &[(HOLE_BLOCK, b"x")]);
        write_beneath(root.as_fd(), Path::new("f"), &b, 0o644, u64::MAX).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b);
    }

    #[test]
    fn a_body_over_what_is_left_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        let b = body(4 * HOLE_BLOCK, &[(0, b"a"), (2 * HOLE_BLOCK, b"b")]);
        let left = 2 * HOLE_BLOCK as u64 - 1;
        match write_beneath(root.as_fd(), Path::new("f"), &b, 0o644, left).unwrap() {
            WriteOutcome::OverBudget {
                needs_bytes,
                left_bytes,
            } => {
                assert_eq!(needs_bytes, 2 * HOLE_BLOCK as u64);
                assert_eq!(left_bytes, left);
            }
            other => panic!("{other:?}"),
        }
        assert!(!dir.path().join("f").exists());
    }

    #[test]
    fn a_directory_at_the_name_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        std::fs::create_dir(dir.path().join("good.txt")).unwrap();
        let e =
            write_beneath(root.as_fd(), Path::new("good.txt"), b"x", 0o644, u64::MAX).unwrap_err();
        assert_eq!(reason(&e), "\"good.txt\" is a directory on the host");
        std::fs::write(dir.path().join("file"), b"").unwrap();
        let e =
            write_beneath(root.as_fd(), Path::new("file/x"), b"x", 0o644, u64::MAX).unwrap_err();
        assert_eq!(
            reason(&e),
            "\"file\" (or one of its parents) is not a directory on the host"
        );
    }

    #[test]
    fn the_ceiling_is_the_variable_in_decimal_bytes_or_the_default() {
        assert_eq!(parse_ceiling(None).unwrap(), DEFAULT_OUTPUT_MAX_BYTES);
        assert_eq!(
            parse_ceiling(Some(" ".into())).unwrap(),
            DEFAULT_OUTPUT_MAX_BYTES
        );
        assert_eq!(parse_ceiling(Some("4096".into())).unwrap(), 4096);
        for bad in ["lots", "1G", "-1"] {
            let e = parse_ceiling(Some(bad.into())).unwrap_err().to_string();
            assert!(e.contains(OUTPUT_MAX_BYTES_ENV) && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn the_budget_is_at_most_the_ceiling_and_the_free_space_less_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let fd = root(dir.path());
        let (ceiling, budget) = output_budget(fd.as_fd()).unwrap();
        let st = rustix::fs::fstatvfs(&fd).unwrap();
        let free = (st.f_bavail * st.f_frsize).saturating_sub(FREE_SPACE_RESERVE_BYTES);
        assert!(budget <= ceiling);
        // Free space moves with other writers; allow a few MiB of drift.
        assert!(budget <= free + (8 << 20), "{budget} > {free}");
        assert!(
            budget == ceiling || budget + (8 << 20) >= free,
            "{budget} {free}"
        );
    }
}
