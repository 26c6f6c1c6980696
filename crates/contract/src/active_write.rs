//! beginActiveWrite's ownership handoff (spec "The operations",
//! paragraph "beginActiveWrite has an explicit ownership handoff";
//! decision `027-active-write-journal`).
//!
//! A transaction is a [`ActiveWriteTransaction`]: the request and the
//! caller's [`DispatchMarker`]. The provider keeps a durable journal of it,
//! `open` → `dispatched` → `committed`:
//!
//! * while the journal is **open** the transaction is caller-owned and
//!   abortable: staged bodies only, nothing published;
//! * **immediately before** the journal becomes `dispatched` the provider
//!   calls [`ActiveWriteTransaction::mark_dispatched`]. An `Err` from the
//!   marker is the caller aborting: the provider discards the open journal
//!   and answers `rolled_back`. After an `Ok` the command is the
//!   provider's: a caller that stops observing leaves it
//!   [`crate::types::ActiveWriteOutcome::Indeterminate`] and available for redelivery;
//! * a redelivery with the same `transaction_id` and the same batch (equal
//!   [`batch_digest`]) gets the same outcome; a different batch is refused;
//! * only dispatched journals are recovery work: recovery rolls an
//!   uncommitted dispatch back and finishes cleanup forward after the
//!   committed marker; another transaction's open journal is never rolled
//!   back.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest as _, Sha256};

use crate::error::SandboxError;
use crate::types::ActiveWriteRequest;

/// The caller's side of the handoff: invoked by the provider immediately
/// before it changes the transaction's journal to dispatched.
#[async_trait]
pub trait DispatchMarker: Send + Sync {
    /// The transaction `transaction_id` is about to be dispatched.
    ///
    /// # Errors
    /// Any closed [`SandboxError`]: the caller aborts the still-open
    /// transaction; the provider must discard its journal, publish nothing
    /// and answer `rolled_back`.
    async fn dispatch(&self, transaction_id: &str) -> Result<(), SandboxError>;
}

/// A marker that always lets the transaction proceed (a caller that never
/// aborts).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProceedMarker;

#[async_trait]
impl DispatchMarker for ProceedMarker {
    async fn dispatch(&self, _transaction_id: &str) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// One beginActiveWrite transaction as a provider receives it: the
/// request and the caller's dispatch marker.
#[derive(Clone)]
pub struct ActiveWriteTransaction {
    request: ActiveWriteRequest,
    marker: Arc<dyn DispatchMarker>,
}

impl fmt::Debug for ActiveWriteTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActiveWriteTransaction")
            .field("instance_id", &self.request.instance_id)
            .field("transaction_id", &self.request.transaction_id)
            .field("files", &self.request.files.len())
            .finish_non_exhaustive()
    }
}

impl ActiveWriteTransaction {
    /// A transaction whose marker is `marker`.
    pub fn new(request: ActiveWriteRequest, marker: Arc<dyn DispatchMarker>) -> Self {
        ActiveWriteTransaction { request, marker }
    }

    /// A transaction whose caller never aborts ([`ProceedMarker`]).
    pub fn proceeding(request: ActiveWriteRequest) -> Self {
        Self::new(request, Arc::new(ProceedMarker))
    }

    /// The request.
    pub fn request(&self) -> &ActiveWriteRequest {
        &self.request
    }

    /// The request, by value.
    pub fn into_request(self) -> ActiveWriteRequest {
        self.request
    }

    /// The caller's marker.
    pub fn marker(&self) -> Arc<dyn DispatchMarker> {
        self.marker.clone()
    }

    /// Invokes the dispatch marker. Call it immediately before the journal
    /// becomes dispatched, and only then.
    ///
    /// # Errors
    /// The caller's abort (see [`DispatchMarker::dispatch`]).
    pub async fn mark_dispatched(&self) -> Result<(), SandboxError> {
        self.marker.dispatch(&self.request.transaction_id).await
    }
}

/// The digest that identifies a batch for redelivery: `sha256:` and 64
/// lowercase hex digits of, for every file in order, the path's length
/// (u64 big-endian), the path's bytes, the content's length (u64
/// big-endian) and the content. Two deliveries of one `transaction_id`
/// are the same batch exactly when their digests are equal.
pub fn batch_digest(request: &ActiveWriteRequest) -> String {
    let mut h = Sha256::new();
    for f in &request.files {
        h.update((f.path.len() as u64).to_be_bytes());
        h.update(f.path.as_bytes());
        h.update((f.content_base64.len() as u64).to_be_bytes());
        h.update(f.content_base64.as_slice());
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ActiveWriteFile;

    fn req(files: &[(&str, &[u8])]) -> ActiveWriteRequest {
        ActiveWriteRequest {
            instance_id: "i".into(),
            transaction_id: "t".into(),
            files: files
                .iter()
                .map(|(p, b)| ActiveWriteFile {
                    path: (*p).into(),
                    content_base64: b.to_vec().into(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_batch_digest_tells_batches_apart() {
        let a = batch_digest(&req(&[("/w/a", b"1"), ("/w/b", b"2")]));
        assert_eq!(a, batch_digest(&req(&[("/w/a", b"1"), ("/w/b", b"2")])));
        assert_ne!(a, batch_digest(&req(&[("/w/b", b"2"), ("/w/a", b"1")])));
        assert_ne!(a, batch_digest(&req(&[("/w/a", b"12"), ("/w/b", b"")])));
        assert_ne!(a, batch_digest(&req(&[("/w/a", b"1")])));
        assert!(a.starts_with("sha256:") && a.len() == 71);
    }
}
