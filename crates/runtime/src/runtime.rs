//! The registry of adapters and selection.

use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::wire::check_capabilities;
use checkfu_sandbox_contract::{
    Clock, SandboxError, SandboxFailure, SandboxProvider, SandboxProviderCapabilities, SystemClock,
    UnmetAdapter,
};

use crate::adapter::Adapter;
use crate::ceiling::{drift, intersect, Ceiling, Cut, Enrollment, DRIFT_OPERATION};
use crate::select::{check_mount_plan, unmet, Requirements};

/// The Runner's sandbox runtime: the only way the rest of the system talks
/// to a provider.
///
/// Register adapters, then [`select`](SandboxRuntime::select) one for a
/// Run's [`Requirements`]; every call on the returned [`Adapter`] is
/// admitted before the provider sees it and checked after it returns.
pub struct SandboxRuntime {
    adapters: Vec<Registered>,
    clock: Arc<dyn Clock>,
    rollback_bound: Duration,
}

struct Registered {
    provider: Arc<dyn SandboxProvider>,
    adapter: Result<Adapter, SandboxError>,
}

impl std::fmt::Debug for SandboxRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self
            .adapters
            .iter()
            .map(|r| r.provider.provider_id())
            .collect();
        f.debug_struct("SandboxRuntime")
            .field("adapters", &ids)
            .finish_non_exhaustive()
    }
}

impl Default for SandboxRuntime {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

impl SandboxRuntime {
    /// An empty runtime on `clock`, with the spec's 30 s rollback bound.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        SandboxRuntime {
            adapters: Vec::new(),
            clock,
            rollback_bound: Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS),
        }
    }

    /// Registers a provider. Its envelope is checked now; an adapter whose
    /// envelope breaks a cross-field rule is kept but never selected, and
    /// [`adapter`](Self::adapter) reports why.
    pub fn register(&mut self, provider: Arc<dyn SandboxProvider>) -> &mut Self {
        let envelope = provider.capabilities();
        let adapter = check_capabilities(&envelope).map(|()| {
            Adapter::new(
                provider.clone(),
                envelope.clone(),
                envelope,
                self.clock.clone(),
                self.rollback_bound,
            )
        });
        self.adapters.push(Registered { provider, adapter });
        self
    }

    /// Registers an enrolled provider under its enrollment `ceiling`: the
    /// live envelope must equal the `enrolled` one (the envelope its
    /// evidence was signed over), and the adapter then checks and selects
    /// against declared ∩ ceiling ([`crate::ceiling::intersect`]). Returns
    /// every claim the ceiling cut down.
    ///
    /// # Errors
    /// Nothing is registered when:
    /// - the live envelope breaks a cross-field rule (its decode error);
    /// - it differs from the enrolled one: `SandboxProtocolInvalid{operation:
    ///   enrolled_envelope, field, expected: enrolled value, actual: live
    ///   value}` naming the first differing field (every difference is listed
    ///   in `field`, comma-separated, when there are several);
    /// - a claim cannot be cut down (see [`crate::ceiling::intersect`]).
    pub fn register_enrolled(
        &mut self,
        provider: Arc<dyn SandboxProvider>,
        enrolled: &SandboxProviderCapabilities,
        ceiling: &Ceiling,
    ) -> Result<Vec<Cut>, SandboxError> {
        let live = provider.capabilities();
        check_capabilities(&live)?;
        let drifted = drift(enrolled, &live);
        if let Some((_, expected, actual)) = drifted.first() {
            let fields: Vec<&str> = drifted.iter().map(|(f, _, _)| f.as_str()).collect();
            return Err(SandboxError::protocol(
                DRIFT_OPERATION,
                fields.join(", "),
                expected.clone(),
                actual.clone(),
            ));
        }
        let (envelope, cuts) = intersect(&live, ceiling)?;
        let adapter = Adapter::new(
            provider.clone(),
            envelope,
            live,
            self.clock.clone(),
            self.rollback_bound,
        );
        self.adapters.push(Registered {
            provider,
            adapter: Ok(adapter),
        });
        Ok(cuts)
    }

    /// Registers `provider` plainly ([`register`](Self::register)) or,
    /// with an enrollment, under its ceiling
    /// ([`register_enrolled`](Self::register_enrolled)).
    ///
    /// # Errors
    /// Those of [`register_enrolled`](Self::register_enrolled).
    pub fn register_as(
        &mut self,
        provider: Arc<dyn SandboxProvider>,
        enrollment: Option<&Enrollment>,
    ) -> Result<Vec<Cut>, SandboxError> {
        match enrollment {
            None => {
                self.register(provider);
                Ok(Vec::new())
            }
            Some(e) => self.register_enrolled(provider, &e.envelope, &e.ceiling),
        }
    }

    /// The clock the runtime checks deadlines against.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The adapter registered under `provider_id`.
    ///
    /// # Errors
    /// `SandboxAdapterUnavailable` when no adapter has that id, or the
    /// envelope's decode error when its envelope is invalid.
    pub fn adapter(&self, provider_id: &str) -> Result<Adapter, SandboxFailure> {
        match self
            .adapters
            .iter()
            .find(|r| r.provider.provider_id() == provider_id)
        {
            Some(r) => r.adapter.clone().map_err(SandboxFailure::from),
            None => Err(SandboxError::SandboxAdapterUnavailable {
                adapters: Vec::new(),
                invalid: Vec::new(),
            }
            .into()),
        }
    }

    /// Exactly one adapter meeting every requirement. The handle it
    /// returns holds the instances it provisions or resumes to
    /// `needs.minimum_egress` ([`Adapter::requiring_egress`]).
    ///
    /// # Errors
    /// - `SandboxCapabilityUnavailable{requirement: mounts}` when the mount
    ///   plan itself is refused (reserved root, duplicate, malformed, > 64);
    /// - `SandboxAdapterUnavailable` listing each valid adapter's unmet
    ///   requirements and each adapter skipped for an invalid envelope;
    /// - `SandboxAdapterAmbiguous` listing the candidates when several fit.
    pub fn select(&self, needs: &Requirements) -> Result<Adapter, SandboxFailure> {
        check_mount_plan(&needs.mounts)?;
        let mut candidates = Vec::new();
        let mut refused = Vec::new();
        let mut invalid = Vec::new();
        for r in &self.adapters {
            match &r.adapter {
                Err(_) => invalid.push(r.provider.provider_id().to_owned()),
                Ok(a) => {
                    let missing = unmet(a.envelope(), needs);
                    if missing.is_empty() {
                        candidates.push(a.clone().requiring_egress(needs.minimum_egress));
                    } else {
                        refused.push(UnmetAdapter {
                            provider: a.provider_id().to_owned(),
                            unmet: missing,
                        });
                    }
                }
            }
        }
        match candidates.len() {
            1 => Ok(candidates.remove(0)),
            0 => Err(SandboxError::SandboxAdapterUnavailable {
                adapters: refused,
                invalid,
            }
            .into()),
            _ => Err(SandboxError::SandboxAdapterAmbiguous {
                candidates: candidates
                    .iter()
                    .map(|a| a.provider_id().to_owned())
                    .collect(),
            }
            .into()),
        }
    }
}
