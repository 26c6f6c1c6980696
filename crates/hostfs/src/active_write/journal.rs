//! The on-disk journal of one beginActiveWrite transaction and the
//! instance's pause token (provider-owned files in the state directory,
//! out of the workload's reach, so they use path-based calls).
//!
//! ```text
//! <state_dir>/instances/<id>/active-write/pause-token.json   PauseToken
//! <state_dir>/instances/<id>/active-write/<key>/journal.json Journal
//! <state_dir>/instances/<id>/active-write/<key>/staged/<k>   body of files[k]
//! <state_dir>/instances/<id>/active-write/<key>/rollback/<k> the old files[k]
//! ```
//!
//! `<key>` is the first 32 hex digits of the SHA-256 of the transaction
//! id. The journal and the mounts' host directories are on one file
//! system (both under the state directory), so every move is a `rename`.
//! Every record is written to a temporary file, synced, and renamed.

use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::ActiveWriteOutcome;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::store;

/// Revision of the journal format.
pub(crate) const JOURNAL_REVISION: u32 = 1;

/// Where a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum JournalState {
    /// Bodies staged; caller-owned; never recovery work.
    Open,
    /// Past the dispatch marker; recovery rolls it back.
    Dispatched,
    /// The committed marker; recovery finishes its cleanup forward.
    Committed,
    /// Evidence and bodies are gone; only the outcome remains, for
    /// redelivery.
    Settled,
}

/// `journal.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Journal {
    pub(crate) journal_revision: u32,
    pub(crate) transaction_id: String,
    /// [`checkfu_sandbox_contract::active_write::batch_digest`].
    pub(crate) batch_digest: String,
    pub(crate) state: JournalState,
    /// Index of the owning mount in the instance's `mounts`.
    pub(crate) mount_index: usize,
    /// Its path in the sandbox.
    pub(crate) mount_path: String,
    /// The targets, in request order (absolute sandbox paths).
    pub(crate) paths: Vec<String>,
    /// Whether each target existed when publication began (recorded while
    /// the workload is paused, before the first move); `None` until then.
    pub(crate) existed: Option<Vec<bool>>,
    /// The outcome, once committed or settled.
    pub(crate) outcome: Option<ActiveWriteOutcome>,
}

/// `pause-token.json`: this provider paused the workload (or inherited a
/// predecessor's pause) and owes the unpause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseToken {
    /// The holder: a transaction id, or `recovery`.
    pub(crate) holder: String,
    /// The predecessor the token was transferred from, if any.
    pub(crate) inherited_from: Option<String>,
}

/// The paths of one instance's active-write directory.
#[derive(Debug, Clone)]
pub(crate) struct Dirs {
    pub(crate) root: PathBuf,
}

impl Dirs {
    /// The directory [`super::ActiveWriteHost::journal_root`] names.
    pub(crate) fn new(root: PathBuf) -> Self {
        Dirs { root }
    }

    pub(crate) fn token(&self) -> PathBuf {
        self.root.join("pause-token.json")
    }

    pub(crate) fn transaction(&self, transaction_id: &str) -> PathBuf {
        self.root.join(key(transaction_id))
    }
}

/// The directory name of a transaction.
pub(crate) fn key(transaction_id: &str) -> String {
    let h = Sha256::digest(transaction_id.as_bytes());
    crate::rootfs::hex(&h)[..32].to_string()
}

pub(crate) fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.json")
}

pub(crate) fn staged(dir: &Path) -> PathBuf {
    dir.join("staged")
}

pub(crate) fn rollback(dir: &Path) -> PathBuf {
    dir.join("rollback")
}

/// Reads a journal; `Ok(None)` when there is none.
pub(crate) fn read(dir: &Path) -> Result<Option<Journal>, String> {
    store::read_record::<Journal>(&journal_path(dir))
}

/// Writes a journal durably (temporary file, fsync, rename, fsync of the
/// directory).
pub(crate) fn write(dir: &Path, journal: &Journal) -> Result<(), String> {
    store::write_record(&journal_path(dir), journal)
        .and_then(|()| sync_dir(dir))
        .map_err(|e| format!("writing the journal {}: {e}", dir.display()))
}

pub(crate) fn read_token(dirs: &Dirs) -> Result<Option<PauseToken>, String> {
    store::read_record::<PauseToken>(&dirs.token())
}

pub(crate) fn write_token(dirs: &Dirs, token: &PauseToken) -> Result<(), String> {
    std::fs::create_dir_all(&dirs.root)
        .and_then(|()| store::write_record(&dirs.token(), token))
        .and_then(|()| sync_dir(&dirs.root))
        .map_err(|e| format!("writing the pause token: {e}"))
}

pub(crate) fn clear_token(dirs: &Dirs) -> Result<(), String> {
    match std::fs::remove_file(dirs.token()) {
        Ok(()) => sync_dir(&dirs.root).map_err(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("clearing the pause token: {e}")),
    }
}

/// Fsyncs a directory so that renames in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    // A directory opened read-only by path: provider-owned state.
    #[allow(clippy::disallowed_methods)]
    let f = std::fs::File::open(dir)?;
    f.sync_all()
}

/// Removes a directory tree if present.
pub(crate) fn remove_tree(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", dir.display())),
    }
}

/// The transaction directories of one instance (names only).
pub(crate) fn transactions(dirs: &Dirs) -> Result<Vec<PathBuf>, String> {
    // Provider-owned state directory.
    #[allow(clippy::disallowed_methods)]
    let entries = match std::fs::read_dir(&dirs.root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("listing {}: {e}", dirs.root.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}
