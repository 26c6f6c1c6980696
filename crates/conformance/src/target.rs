//! What a provider under test supplies besides the provider itself.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::{Clock, ImageReference, Platform, SandboxProvider, Tier};

use crate::token::Token;

/// A listener the case started: where it is and the fresh token it sends
/// on accept. Reachability is certified by reading the token back, never
/// by a bare TCP connect (DESIGN D15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Host name or address the sandbox would dial.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The bytes the listener writes to every accepted connection.
    pub token: String,
}

/// Objects the provider holds right now, as the target can observe them
/// independently of the runtime (for leak checks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveObjects {
    /// Instance ids.
    pub instances: BTreeSet<String>,
    /// Snapshot ids.
    pub snapshots: BTreeSet<String>,
}

/// Why a target hook failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The platform behind the target (a daemon, a network, a fixture, a
    /// state directory) could not do `operation`.
    #[error("{operation}: {reason}")]
    Platform {
        /// What the target was doing (`listener`, `inventory`, ...).
        operation: String,
        /// The platform's own message, with its causes.
        reason: String,
    },
    /// The positive control found nothing listening where the listener was
    /// started.
    #[error("nothing listens at {host}:{port}")]
    NotListening {
        /// Host name or address dialled.
        host: String,
        /// TCP port dialled.
        port: u16,
    },
    /// [`ConformanceTarget::close`] could not remove everything of the
    /// target's scope; each entry names one object and why.
    #[error("left after closing: {}", .0.join("; "))]
    Leftovers(Vec<String>),
}

impl TargetError {
    /// A [`TargetError::Platform`] for `operation` with `reason`.
    pub fn platform(operation: impl Into<String>, reason: impl ToString) -> Self {
        TargetError::Platform {
            operation: operation.into(),
            reason: reason.to_string(),
        }
    }
}

/// A provider under test, with the hooks the cases need.
///
/// Network hooks must only ever start listeners on this machine: on
/// loopback, inside the sandbox, or in a container or namespace the target
/// itself created (DESIGN D11).
#[async_trait]
pub trait ConformanceTarget: Send + Sync {
    /// A short name for evidence (`memory`, `docker`, ...).
    fn name(&self) -> &str;

    /// The provider, as the runtime will call it.
    fn provider(&self) -> Arc<dyn SandboxProvider>;

    /// A fresh provider object over the same backing platform state, as a
    /// restarted Runner would construct it (orphan-reclaim uses it to prove
    /// cleanup needs no side database).
    fn reopen(&self) -> Arc<dyn SandboxProvider>;

    /// The tokens this target declares.
    fn declared_tokens(&self) -> BTreeSet<Token>;

    /// The clock the runtime should use with this target.
    fn clock(&self) -> Arc<dyn Clock>;

    /// The pinned root image instances start from.
    fn root_image(&self) -> ImageReference;

    /// The tier and platform to request.
    fn tier_platform(&self) -> (Tier, Platform);

    /// Starts a listener outside the sandbox.
    ///
    /// # Errors
    /// [`TargetError::Platform`] when no listener could be started.
    async fn start_listener(&self) -> Result<Listener, TargetError>;

    /// The positive control: dial `listener` from a vantage point that
    /// must reach it, returning what it sent.
    ///
    /// # Errors
    /// [`TargetError::NotListening`] or [`TargetError::Platform`] when the
    /// control could not dial it.
    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, TargetError>;

    /// Stops a listener (idempotent).
    async fn stop_listener(&self, listener: &Listener);

    /// What the provider holds now, observed from the platform's own state.
    ///
    /// # Errors
    /// [`TargetError::Platform`] when the platform could not be asked.
    async fn live_objects(&self) -> Result<LiveObjects, TargetError>;

    /// Whether the provider's beginActiveWrite journal places file bodies
    /// on durable host storage; such a provider must refuse `ephemeral_zdr`
    /// transactions (spec "beginActiveWrite has an explicit ownership
    /// handoff"). Default `false`: the suite then accepts either a commit
    /// or that refusal on a ZDR instance.
    fn active_write_journal_durable(&self) -> bool {
        false
    }

    /// Pauses an instance's workload from outside the provider (a
    /// pre-existing pause beginActiveWrite must not resume). `None` when
    /// the target cannot; the pause check is then not run.
    async fn pause_workload(&self, _instance_id: &str) -> Option<Result<(), TargetError>> {
        None
    }

    /// Ends a pause made by [`ConformanceTarget::pause_workload`].
    async fn unpause_workload(&self, _instance_id: &str) -> Option<Result<(), TargetError>> {
        None
    }

    /// Whether the instance's workload is paused now, observed from the
    /// platform's own state. `None` when the target cannot tell.
    async fn workload_paused(&self, _instance_id: &str) -> Option<Result<bool, TargetError>> {
        None
    }

    /// Removes everything of the target's scope: every instance and
    /// snapshot it holds, every listener, and whatever platform objects and
    /// directories the target itself created. Idempotent; the target must
    /// not be used afterwards. Callers close a target on every way out of
    /// a suite: success, failure and interrupt.
    ///
    /// # Errors
    /// [`TargetError::Leftovers`] naming what could not be removed.
    async fn close(&self) -> Result<(), TargetError>;
}
