//! The Runner's side of a durable run: the snapshot reference a release
//! settled, kept so that a later process can resume it.
//!
//! The page makes the Runner the custodian of a snapshot reference: resume
//! takes the whole [`SandboxSnapshot`] release returned, not an id, and the
//! runtime cross-checks it against the resume request (provider,
//! placement, workspace, session, profile, expiry) before the provider is
//! called; the provider then compares it with its own record. A
//! [`Checkpoint`] is that reference plus what the resume request must
//! repeat (the pinned root image and the declared mounts); a
//! [`CheckpointStore`] keeps one JSON file per snapshot in a directory.
//!
//! File names are the SHA-256 of the snapshot id (a provider-assigned
//! string is never a path); a file whose snapshot id is not the one asked
//! for is treated as absent.

use std::io;
use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::{ImageReference, SandboxError, SandboxMount, SandboxSnapshot};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::SessionError;

/// Revision of the checkpoint file format.
pub const CHECKPOINT_REVISION: u32 = 1;

/// A settled snapshot and what resuming it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`CHECKPOINT_REVISION`].
    pub revision: u32,
    /// The snapshot exactly as release returned it (after the runtime's
    /// checks).
    pub snapshot: SandboxSnapshot,
    /// The source instance's pinned root image (`name@sha256:<hex>`),
    /// whose digest is the snapshot's `profile_digest`.
    pub root_image: ImageReference,
    /// The source instance's declared mounts, declared again on resume so
    /// the provider rehydrates each one.
    pub mounts: Vec<SandboxMount>,
}

/// One JSON file per [`Checkpoint`] under a directory (created on first
/// write, mode 0700).
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    /// A store over `dir`.
    pub fn new(dir: PathBuf) -> Self {
        CheckpointStore { dir }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, snapshot_id: &str) -> PathBuf {
        let name = hex::encode(sha2::Sha256::digest(snapshot_id.as_bytes()));
        self.dir.join(format!("{name}.json"))
    }

    /// Writes `checkpoint` (replacing one of the same snapshot id) through
    /// a temporary file and a rename, so a reader never sees half a file.
    ///
    /// # Errors
    /// The I/O error of creating the directory or writing the file.
    pub fn record(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let path = self.file(&checkpoint.snapshot.snapshot_id);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(checkpoint).map_err(io::Error::other)?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// The checkpoint of `snapshot_id`.
    ///
    /// # Errors
    /// [`SessionError::Input`] naming `input` with
    /// `SandboxSnapshotNotFound{snapshot_id}` when no checkpoint of that id
    /// is recorded; [`SessionError::Host`] when the file cannot be read or
    /// does not decode.
    pub fn load(&self, input: &str, snapshot_id: &str) -> Result<Checkpoint, SessionError> {
        let path = self.file(snapshot_id);
        let not_found = || {
            SessionError::input(
                input,
                SandboxError::SandboxSnapshotNotFound {
                    snapshot_id: snapshot_id.to_owned(),
                },
            )
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(not_found()),
            Err(e) => return Err(SessionError::Host(format!("{}: {e}", path.display()))),
        };
        let checkpoint =
            decode(&bytes).map_err(|e| SessionError::Host(format!("{}: {e}", path.display())))?;
        if checkpoint.snapshot.snapshot_id != snapshot_id {
            return Err(not_found());
        }
        Ok(checkpoint)
    }

    /// Every checkpoint recorded, ordered by creation time then id; files
    /// that do not decode are skipped (named in the second list).
    ///
    /// # Errors
    /// The I/O error of reading the directory (none when it is absent).
    pub fn list(&self) -> io::Result<(Vec<Checkpoint>, Vec<String>)> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(e),
        };
        let (mut found, mut unreadable) = (Vec::new(), Vec::new());
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| decode(&b).map_err(|e| e.to_string()))
            {
                Ok(c) if path == self.file(&c.snapshot.snapshot_id) => found.push(c),
                Ok(_) => {
                    unreadable.push(format!("{}: not named after its snapshot", path.display()))
                }
                Err(e) => unreadable.push(format!("{}: {e}", path.display())),
            }
        }
        found.sort_by(|a: &Checkpoint, b: &Checkpoint| {
            (a.snapshot.created_at, &a.snapshot.snapshot_id)
                .cmp(&(b.snapshot.created_at, &b.snapshot.snapshot_id))
        });
        Ok((found, unreadable))
    }

    /// Removes the checkpoint of `snapshot_id`; true when one was there.
    ///
    /// # Errors
    /// The I/O error of removing it.
    pub fn forget(&self, snapshot_id: &str) -> io::Result<bool> {
        match std::fs::remove_file(self.file(snapshot_id)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
    let c: Checkpoint = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if c.revision != CHECKPOINT_REVISION {
        return Err(format!(
            "checkpoint revision: expected {CHECKPOINT_REVISION}, actual {}",
            c.revision
        ));
    }
    if c.root_image.digest() != c.snapshot.profile_digest {
        return Err(format!(
            "root_image: expected the digest {}, actual {}",
            c.snapshot.profile_digest, c.root_image
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_sandbox_contract::{Placement, Timestamp};

    fn checkpoint(id: &str) -> Checkpoint {
        let root_image =
            ImageReference::parse(&format!("demo@sha256:{}", "ab".repeat(32))).expect("pinned");
        Checkpoint {
            revision: CHECKPOINT_REVISION,
            snapshot: SandboxSnapshot {
                snapshot_id: id.into(),
                provider: "docker".into(),
                placement: Placement::Runner,
                source_instance_id: "i".into(),
                workspace_id: "cli".into(),
                session_id: "s".into(),
                profile_id: "p".into(),
                profile_version: 1,
                profile_digest: root_image.digest(),
                created_at: Timestamp::from_unix_millis(1_000).expect("instant"),
                expires_at: Timestamp::from_unix_millis(2_000).expect("instant"),
            },
            root_image,
            mounts: Vec::new(),
        }
    }

    #[test]
    fn records_load_list_and_forget() {
        let dir = tempfile::tempdir().expect("dir");
        let store = CheckpointStore::new(dir.path().join("checkpoints"));
        let c = checkpoint("../../etc/passwd");
        store.record(&c).expect("record");
        assert_eq!(store.load("--resume x", "../../etc/passwd"), Ok(c.clone()));
        assert_eq!(store.list().expect("list"), (vec![c], Vec::new()));
        match store.load("--resume x", "other") {
            Err(SessionError::Input { input, failure }) => {
                assert_eq!(input, "--resume x");
                assert_eq!(
                    failure.causes().next(),
                    Some(&SandboxError::SandboxSnapshotNotFound {
                        snapshot_id: "other".into()
                    })
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(store.forget("../../etc/passwd").ok(), Some(true));
        assert_eq!(store.forget("../../etc/passwd").ok(), Some(false));
        assert_eq!(store.list().expect("list").0, Vec::new());
    }
}
