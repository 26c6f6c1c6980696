//! A real Git repository for stage-git-project, made with the `git`
//! command line in a fixed environment so the commit id is deterministic:
//! no system or user configuration (`GIT_CONFIG_NOSYSTEM`, `HOME` and
//! `XDG_CONFIG_HOME` pointed at an empty temporary directory), a fixed
//! author, committer and date, and branch `main`.

use std::path::Path;
use std::process::{Command, Stdio};

/// Why a fixture repository could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GitFixtureError {
    /// The `git` command line could not be started (not installed?).
    #[error("git could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    /// A `git` command exited unsuccessfully.
    #[error("git {command}: {status}: {stderr}")]
    Command {
        /// The git subcommand and its arguments.
        command: String,
        /// The exit status, as displayed.
        status: String,
        /// What git wrote to stderr.
        stderr: String,
    },
    /// A fixture file or the temporary home could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The fixed author and committer date of every fixture commit
/// (1970-01-01T00:00:00Z).
pub const FIXTURE_DATE: &str = "@0 +0000";

/// Initializes a repository at `dir` and commits `files` (relative path,
/// bytes; a path ending in `.sh` is committed executable, mode 100755);
/// returns the commit id in hex.
///
/// # Errors
/// [`GitFixtureError`] naming the failing command or file.
pub fn commit_files(dir: &Path, files: &[(&str, &[u8])]) -> Result<String, GitFixtureError> {
    let home =
        crate::scratch::ScratchDir::new("git-home").map_err(|source| GitFixtureError::Io {
            path: "temporary HOME".into(),
            source,
        })?;
    let git = |args: &[&str]| -> Result<String, GitFixtureError> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir))
            .env("GIT_AUTHOR_NAME", "checkfu conformance")
            .env("GIT_AUTHOR_EMAIL", "conformance@checkfu.invalid")
            .env("GIT_AUTHOR_DATE", FIXTURE_DATE)
            .env("GIT_COMMITTER_NAME", "checkfu conformance")
            .env("GIT_COMMITTER_EMAIL", "conformance@checkfu.invalid")
            .env("GIT_COMMITTER_DATE", FIXTURE_DATE)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .map_err(GitFixtureError::Spawn)?;
        if !out.status.success() {
            return Err(GitFixtureError::Command {
                command: args.join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    git(&["init", "-q", "-b", "main", "."])?;
    for (path, bytes) in files {
        let full = dir.join(path);
        let io = |source| GitFixtureError::Io {
            path: full.display().to_string(),
            source,
        };
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&full, bytes).map_err(io)?;
        git(&["add", "--", path])?;
        if path.ends_with(".sh") {
            git(&["update-index", "--chmod=+x", "--", path])?;
        }
    }
    git(&["commit", "-q", "--no-gpg-sign", "-m", "conformance fixture"])?;
    git(&["rev-parse", "HEAD"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_files_give_the_same_commit_id() {
        let files: &[(&str, &[u8])] = &[("a.txt", b"a\n"), ("bin/run.sh", b"#!/bin/sh\n")];
        let one = crate::scratch::ScratchDir::new("git-test").unwrap();
        let two = crate::scratch::ScratchDir::new("git-test").unwrap();
        let a = commit_files(one.path(), files).unwrap();
        let b = commit_files(two.path(), files).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 40);
    }
}
