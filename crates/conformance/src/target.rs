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
    /// A message when no listener could be started.
    async fn start_listener(&self) -> Result<Listener, String>;

    /// The positive control: dial `listener` from a vantage point that
    /// must reach it, returning what it sent.
    ///
    /// # Errors
    /// A message when the control could not dial it.
    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, String>;

    /// Stops a listener (idempotent).
    async fn stop_listener(&self, listener: &Listener);

    /// What the provider holds now, observed from the platform's own state.
    ///
    /// # Errors
    /// A message when the platform could not be asked.
    async fn live_objects(&self) -> Result<LiveObjects, String>;
}
