//! Reading blobs out of a Git repository through the `git` command line's
//! plumbing (`rev-parse`, `ls-tree`, `cat-file --batch`), for mount
//! staging (decision "git command line for staging").
//!
//! `git` runs as a child process with a fixed environment: no system or
//! global configuration, no replace objects, literal pathspecs, no
//! discovery above the given directory. Every read of its output is
//! bounded, and every blob's object id is recomputed here from the bytes
//! received (SHA-1 or SHA-256, after the repository's object format), so
//! nothing staged is trusted unverified.

use checkfu_sandbox_contract::Operation;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use checkfu_sandbox_contract::bounds::{MAX_FILE_BYTES, MAX_LIST_ENTRIES, MIB};
use checkfu_sandbox_contract::{FailureReason, SandboxError, SandboxFailure};
use sha2::Digest as _;

/// The operation name every failure here carries.
const OP: Operation = Operation::StageGit;

/// Most bytes of blob content one staging run reads (all blobs together).
pub const MAX_STAGE_GIT_BYTES: u64 = 256 * MIB;

/// Most bytes of one `ls-tree` listing read.
pub const MAX_LISTING_BYTES: u64 = 64 * MIB;

/// Most bytes of one `rev-parse` answer read.
const MAX_SHORT_ANSWER_BYTES: u64 = 4096;

/// Most bytes of `git`'s stderr kept for an error message.
const MAX_STDERR_BYTES: u64 = 8192;

/// The hash function a repository names its objects with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectFormat {
    /// SHA-1: 40 hex digits.
    Sha1,
    /// SHA-256: 64 hex digits.
    Sha256,
}

impl ObjectFormat {
    /// The object id (lower-case hex) of a blob holding `bytes`: the hash
    /// of `blob <len>\0` followed by the bytes.
    pub fn blob_id(self, bytes: &[u8]) -> String {
        let header = format!("blob {}\0", bytes.len());
        match self {
            ObjectFormat::Sha1 => {
                let mut h = sha1::Sha1::new();
                h.update(header.as_bytes());
                h.update(bytes);
                hex::encode(h.finalize())
            }
            ObjectFormat::Sha256 => {
                let mut h = sha2::Sha256::new();
                h.update(header.as_bytes());
                h.update(bytes);
                hex::encode(h.finalize())
            }
        }
    }

    fn hex_len(self) -> usize {
        match self {
            ObjectFormat::Sha1 => 40,
            ObjectFormat::Sha256 => 64,
        }
    }
}

/// The Git mode of a staged blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitMode {
    /// `100644`: a regular file.
    Regular,
    /// `100755`: an executable file.
    Executable,
}

impl GitMode {
    /// The mode as Git writes it, in octal (`0o100644`, `0o100755`).
    pub fn octal(self) -> u32 {
        match self {
            GitMode::Regular => 0o100644,
            GitMode::Executable => 0o100755,
        }
    }
}

/// One blob of a tree: its path relative to the staged tree (or its file
/// name when a single file was asked for), Git mode and verified bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitBlob {
    /// Relative path, `/`-separated, UTF-8.
    pub path: String,
    /// The entry's Git mode.
    pub mode: GitMode,
    /// The content; its object id was recomputed and matched.
    pub bytes: Vec<u8>,
}

fn failure(reason: FailureReason, message: impl Into<String>) -> SandboxFailure {
    SandboxError::failed(OP, reason, message).into()
}

/// A `git` command for the repository at `repo` (absolute), with the fixed
/// environment described in the module documentation.
fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(repo);
    if let Some(parent) = repo.parent() {
        c.env("GIT_CEILING_DIRECTORIES", parent);
    }
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    ] {
        c.env_remove(var);
    }
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// `git` could not be started.
fn spawn_failed(e: &std::io::Error) -> SandboxFailure {
    let what = if e.kind() == std::io::ErrorKind::NotFound {
        "the git command line is not installed (no `git` on PATH)".to_owned()
    } else {
        format!("git could not be started: {e}")
    };
    failure(FailureReason::NotFound, what)
}

/// Reads at most `limit` bytes of `r`; more is an error naming `what`.
fn read_bounded(r: impl Read, limit: u64, what: &str) -> Result<Vec<u8>, SandboxFailure> {
    let mut buf = Vec::new();
    r.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| failure(FailureReason::ProviderError, format!("{what}: {e}")))?;
    if buf.len() as u64 > limit {
        return Err(failure(
            FailureReason::InvalidRequest,
            format!("{what}: output exceeds {limit} bytes"),
        ));
    }
    Ok(buf)
}

/// Runs `cmd`, reading at most `limit` bytes of stdout. A non-zero exit is
/// a failure with `reason` and git's stderr.
fn run(
    mut cmd: Command,
    limit: u64,
    what: &str,
    reason: FailureReason,
) -> Result<Vec<u8>, SandboxFailure> {
    let mut child = cmd.spawn().map_err(|e| spawn_failed(&e))?;
    let stderr = child.stderr.take().map(|s| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = s.take(MAX_STDERR_BYTES).read_to_end(&mut buf);
            buf
        })
    });
    let out = match child.stdout.take() {
        Some(stdout) => read_bounded(stdout, limit, what),
        None => Ok(Vec::new()),
    };
    if out.is_err() {
        let _ = child.kill();
    }
    let status = child
        .wait()
        .map_err(|e| failure(FailureReason::ProviderError, format!("{what}: {e}")))?;
    let err = stderr
        .and_then(|t| t.join().ok())
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let out = out?;
    if !status.success() {
        return Err(failure(reason, format!("{what}: git {status}: {err}")));
    }
    Ok(out)
}

/// Opens the repository at `repo`: its absolute path and object format.
fn open(repo: &Path) -> Result<(PathBuf, ObjectFormat), SandboxFailure> {
    let abs = repo.canonicalize().map_err(|e| {
        failure(
            FailureReason::NotFound,
            format!("repository {}: {e}", repo.display()),
        )
    })?;
    let mut cmd = git(&abs);
    cmd.args(["rev-parse", "--show-object-format"]);
    let what = format!("repository {}", repo.display());
    let out = run(cmd, MAX_SHORT_ANSWER_BYTES, &what, FailureReason::NotFound)?;
    let format = match String::from_utf8_lossy(&out).trim() {
        "sha1" => ObjectFormat::Sha1,
        "sha256" => ObjectFormat::Sha256,
        other => {
            return Err(failure(
                FailureReason::InvalidRequest,
                format!("{what}: object format {other:?}; expected sha1 or sha256"),
            ))
        }
    };
    Ok((abs, format))
}

/// The tree id `rev` names (a commit or tree).
fn resolve_tree(repo: &Path, rev: &str, format: ObjectFormat) -> Result<String, SandboxFailure> {
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{rev}^{{tree}}"));
    let what = format!("revision {rev:?}");
    let out = run(cmd, MAX_SHORT_ANSWER_BYTES, &what, FailureReason::NotFound)?;
    let id = String::from_utf8_lossy(&out).trim().to_owned();
    check_id(&id, format, &what)?;
    Ok(id)
}

fn check_id(id: &str, format: ObjectFormat, what: &str) -> Result<(), SandboxFailure> {
    if id.len() == format.hex_len()
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(failure(
            FailureReason::ProviderError,
            format!("{what}: git answered {id:?}, not a {format:?} object id"),
        ))
    }
}

/// One `ls-tree -l -z` entry.
#[derive(Debug)]
struct Entry {
    mode: String,
    kind: String,
    id: String,
    size: Option<u64>,
    path: String,
}

fn ls_tree(
    repo: &Path,
    args: &[&str],
    format: ObjectFormat,
    what: &str,
) -> Result<Vec<Entry>, SandboxFailure> {
    let mut cmd = git(repo);
    cmd.args(["ls-tree", "-z", "-l", "--full-tree"]).args(args);
    let out = run(cmd, MAX_LISTING_BYTES, what, FailureReason::NotFound)?;
    let mut entries = Vec::new();
    for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let bad = || {
            failure(
                FailureReason::ProviderError,
                format!(
                    "{what}: unreadable ls-tree line {:?}",
                    String::from_utf8_lossy(record)
                ),
            )
        };
        let tab = record.iter().position(|b| *b == b'\t').ok_or_else(bad)?;
        let head = std::str::from_utf8(&record[..tab]).map_err(|_| bad())?;
        let path = std::str::from_utf8(&record[tab + 1..]).map_err(|_| {
            failure(
                FailureReason::InvalidRequest,
                format!(
                    "{what}: path {:?} is not UTF-8",
                    String::from_utf8_lossy(&record[tab + 1..])
                ),
            )
        })?;
        let mut fields = head.split_whitespace();
        let (Some(mode), Some(kind), Some(id), Some(size), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err(bad());
        };
        if kind != "commit" {
            check_id(id, format, what)?;
        }
        entries.push(Entry {
            mode: mode.to_owned(),
            kind: kind.to_owned(),
            id: id.to_owned(),
            size: size.parse().ok(),
            path: path.to_owned(),
        });
        if entries.len() > MAX_LIST_ENTRIES as usize {
            return Err(failure(
                FailureReason::InvalidRequest,
                format!("{what}: more than {MAX_LIST_ENTRIES} entries"),
            ));
        }
    }
    Ok(entries)
}

/// The blob mode of `entry`, refusing symlinks, submodules and anything
/// else that is not a regular file.
fn blob_mode(entry: &Entry, shown: &str) -> Result<GitMode, SandboxFailure> {
    match (entry.kind.as_str(), entry.mode.as_str()) {
        ("blob", "100644" | "100664") => Ok(GitMode::Regular),
        ("blob", "100755") => Ok(GitMode::Executable),
        (kind, mode) => Err(failure(
            FailureReason::InvalidRequest,
            format!(
                "{shown}: {kind} with mode {mode}; symlinks and submodules are not staged, \
only regular files (100644, 100755)"
            ),
        )),
    }
}

/// Reads every blob at `repo_path` (a file or a tree; empty or `/` for
/// the whole tree) of revision `rev` in the repository at `repo`, with its
/// Git mode, in tree order, recomputing each blob's object id from its
/// bytes.
///
/// # Errors
/// `SandboxOperationFailed{operation: stage_git}` with reason `not_found`
/// for a missing `git` command, repository, revision or path;
/// `invalid_request` for a symlink or submodule, a blob over
/// [`MAX_FILE_BYTES`], more than [`MAX_STAGE_GIT_BYTES`] in all or a path
/// that is not UTF-8; `provider_error` when git's answer is unreadable or
/// a blob's bytes do not hash to its object id.
pub fn read_blobs(repo: &Path, rev: &str, repo_path: &str) -> Result<Vec<GitBlob>, SandboxFailure> {
    let (repo, format) = open(repo)?;
    let tree = resolve_tree(&repo, rev, format)?;
    let trimmed = repo_path.trim_matches('/');
    let (root, single) = if trimmed.is_empty() {
        (tree, None)
    } else {
        let what = format!("path {trimmed:?} in revision {rev:?}");
        let found = ls_tree(&repo, &[tree.as_str(), "--", trimmed], format, &what)?
            .into_iter()
            .find(|e| e.path == trimmed)
            .ok_or_else(|| failure(FailureReason::NotFound, format!("{what}: not found")))?;
        if found.kind == "tree" {
            (found.id, None)
        } else {
            (found.id.clone(), Some(found))
        }
    };
    let listed: Vec<(Entry, GitMode)> = match single {
        Some(mut entry) => {
            let mode = blob_mode(&entry, trimmed)?;
            entry.path = Path::new(trimmed)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            vec![(entry, mode)]
        }
        None => {
            let what = format!("tree {trimmed:?} of revision {rev:?}");
            ls_tree(&repo, &["-r", root.as_str()], format, &what)?
                .into_iter()
                .map(|e| {
                    let mode = blob_mode(&e, &e.path)?;
                    Ok((e, mode))
                })
                .collect::<Result<_, SandboxFailure>>()?
        }
    };
    let mut total: u64 = 0;
    for (e, _) in &listed {
        let size = e.size.ok_or_else(|| {
            failure(
                FailureReason::ProviderError,
                format!("{}: git listed no size", e.path),
            )
        })?;
        if size > MAX_FILE_BYTES {
            return Err(failure(
                FailureReason::InvalidRequest,
                format!(
                    "{}: {size} bytes; a staged file holds at most {MAX_FILE_BYTES}",
                    e.path
                ),
            ));
        }
        total += size;
        if total > MAX_STAGE_GIT_BYTES {
            return Err(failure(
                FailureReason::InvalidRequest,
                format!("more than {MAX_STAGE_GIT_BYTES} bytes to stage from revision {rev:?}"),
            ));
        }
    }
    cat_blobs(&repo, format, listed)
}

/// Reads the listed blobs through one `git cat-file --batch`, each exactly
/// its listed size, and verifies each object id.
fn cat_blobs(
    repo: &Path,
    format: ObjectFormat,
    listed: Vec<(Entry, GitMode)>,
) -> Result<Vec<GitBlob>, SandboxFailure> {
    if listed.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmd = git(repo);
    cmd.args(["cat-file", "--batch"]).stdin(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| spawn_failed(&e))?;
    let ids: Vec<String> = listed.iter().map(|(e, _)| e.id.clone()).collect();
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            for id in ids {
                if writeln!(stdin, "{id}").is_err() {
                    break;
                }
            }
        })
    });
    let stderr = child.stderr.take().map(|s| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = s.take(MAX_STDERR_BYTES).read_to_end(&mut buf);
            buf
        })
    });
    let read = match child.stdout.take() {
        Some(stdout) => read_batch(BufReader::new(stdout), format, listed),
        None => Err(failure(FailureReason::ProviderError, "cat-file: no stdout")),
    };
    if read.is_err() {
        let _ = child.kill();
    }
    let status = child.wait();
    if let Some(w) = writer {
        let _ = w.join();
    }
    let err = stderr
        .and_then(|t| t.join().ok())
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let blobs = read?;
    match status {
        Ok(s) if s.success() => Ok(blobs),
        Ok(s) => Err(failure(
            FailureReason::ProviderError,
            format!("cat-file: git {s}: {err}"),
        )),
        Err(e) => Err(failure(
            FailureReason::ProviderError,
            format!("cat-file: {e}"),
        )),
    }
}

fn read_batch(
    mut out: impl BufRead,
    format: ObjectFormat,
    listed: Vec<(Entry, GitMode)>,
) -> Result<Vec<GitBlob>, SandboxFailure> {
    let io = |e: std::io::Error| failure(FailureReason::ProviderError, format!("cat-file: {e}"));
    let mut blobs = Vec::with_capacity(listed.len());
    for (entry, mode) in listed {
        let expected = entry.size.unwrap_or(0);
        let mut header = Vec::new();
        (&mut out)
            .take(MAX_SHORT_ANSWER_BYTES)
            .read_until(b'\n', &mut header)
            .map_err(io)?;
        let header = String::from_utf8_lossy(&header).trim_end().to_owned();
        let want = format!("{} blob {expected}", entry.id);
        if header != want {
            return Err(failure(
                FailureReason::ProviderError,
                format!(
                    "{}: cat-file answered {header:?}, expected {want:?}",
                    entry.path
                ),
            ));
        }
        let mut bytes = vec![0u8; expected as usize];
        out.read_exact(&mut bytes).map_err(io)?;
        let mut lf = [0u8; 1];
        out.read_exact(&mut lf).map_err(io)?;
        let actual = format.blob_id(&bytes);
        if actual != entry.id || lf != [b'\n'] {
            return Err(failure(
                FailureReason::ProviderError,
                format!(
                    "{}: blob id {} but content hashes to {actual}",
                    entry.path, entry.id
                ),
            ));
        }
        blobs.push(GitBlob {
            path: entry.path,
            mode,
            bytes,
        });
    }
    Ok(blobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_match_git_for_both_formats() {
        // `git hash-object` of "hello\n" in a sha1 and a sha256 repository.
        assert_eq!(
            ObjectFormat::Sha1.blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(
            ObjectFormat::Sha256.blob_id(b"hello\n"),
            "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4"
        );
    }
}
