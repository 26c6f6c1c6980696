//! The conformance suite over the wire: [`WireTarget`] implements
//! `ConformanceTarget` over a [`WireClient`]; [`TargetHooks`] serves a
//! local target's hooks.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_conformance::{ConformanceTarget, Listener, LiveObjects, TargetError, Token};
use checkfu_sandbox_contract::{
    Clock, ImageReference, ManualClock, Platform, SandboxProvider, SystemClock, Tier,
};

use crate::client::WireClient;
use crate::protocol::*;
use crate::server::ConformanceHooks;

/// Every `conformance/*` hook a served provider offers for
/// [`WireTarget`], in `PROTOCOL.md`'s order.
pub const CONFORMANCE_HOOKS: [&str; 6] = [
    method::CONFORMANCE_DESCRIBE,
    method::CONFORMANCE_START_LISTENER,
    method::CONFORMANCE_CONTROL_PROBE,
    method::CONFORMANCE_STOP_LISTENER,
    method::CONFORMANCE_LIVE_OBJECTS,
    method::CONFORMANCE_CLOSE,
];

/// Why a served provider cannot be a conformance target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireTargetError {
    /// The served side does not serve these hooks: its `initialize` answer
    /// says `conformance: false` (then all of [`CONFORMANCE_HOOKS`] are
    /// missing), or `conformance/describe` is an unknown method.
    #[error(
        "the served provider does not serve the conformance hooks the suite needs; missing: {}",
        .missing.join(", ")
    )]
    HooksMissing {
        /// The missing hook methods.
        missing: Vec<&'static str>,
    },
    /// `conformance/describe` failed or its answer does not decode.
    #[error("conformance/describe: {0}")]
    Describe(String),
}

/// A served provider under test, reached through its `conformance/*` hooks.
pub struct WireTarget {
    client: WireClient,
    describe: DescribeResult,
    root_image: ImageReference,
    clock: Arc<dyn Clock>,
}

impl WireTarget {
    /// Asks the served side to describe itself.
    ///
    /// # Errors
    /// [`WireTargetError::HooksMissing`] naming the hooks the server does
    /// not serve; [`WireTargetError::Describe`] when its description fails
    /// or does not decode.
    pub async fn new(client: WireClient) -> Result<Self, WireTargetError> {
        if !client.serves_conformance() {
            return Err(WireTargetError::HooksMissing {
                missing: CONFORMANCE_HOOKS.to_vec(),
            });
        }
        let describe: DescribeResult = client
            .hook(method::CONFORMANCE_DESCRIBE, &serde_json::Value::Null)
            .await
            .map_err(|e| {
                if e.contains("code -32601") {
                    WireTargetError::HooksMissing {
                        missing: vec![method::CONFORMANCE_DESCRIBE],
                    }
                } else {
                    WireTargetError::Describe(e)
                }
            })?;
        let root_image = ImageReference::parse(&describe.root_image)
            .map_err(|e| WireTargetError::Describe(format!("root_image: {e}")))?;
        let clock: Arc<dyn Clock> = if describe.manual_clock {
            Arc::new(ManualClock::new(describe.clock_now))
        } else {
            Arc::new(SystemClock)
        };
        Ok(WireTarget {
            client,
            describe,
            root_image,
            clock,
        })
    }

    /// The client underneath.
    pub fn client(&self) -> &WireClient {
        &self.client
    }

    /// `conformance/pauseWorkload`; `None` when the served side does not
    /// serve it.
    async fn pause_hook(&self, instance_id: &str, paused: bool) -> Option<Result<(), TargetError>> {
        let params = PauseWorkloadParams {
            instance_id: instance_id.to_owned(),
            paused,
        };
        let r: Result<serde_json::Value, String> = self
            .client
            .hook(method::CONFORMANCE_PAUSE_WORKLOAD, &params)
            .await;
        match r {
            Ok(_) => Some(Ok(())),
            Err(e) if e.contains("code -32601") => None,
            Err(e) => Some(Err(TargetError::platform(
                method::CONFORMANCE_PAUSE_WORKLOAD,
                e,
            ))),
        }
    }
}

fn to_wire(l: &Listener) -> ListenerWire {
    ListenerWire {
        host: l.host.clone(),
        port: l.port,
        token: l.token.clone(),
    }
}

#[async_trait]
impl ConformanceTarget for WireTarget {
    fn name(&self) -> &str {
        &self.describe.name
    }

    fn provider(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(self.client.clone())
    }

    fn reopen(&self) -> Arc<dyn SandboxProvider> {
        // A new provider object over the same served state; the client
        // keeps no state of its own beyond the connection.
        Arc::new(self.client.clone())
    }

    fn declared_tokens(&self) -> BTreeSet<Token> {
        self.describe.declared_tokens.iter().copied().collect()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn root_image(&self) -> ImageReference {
        self.root_image.clone()
    }

    fn tier_platform(&self) -> (Tier, Platform) {
        (self.describe.tier, self.describe.platform)
    }

    async fn start_listener(&self) -> Result<Listener, TargetError> {
        let l: ListenerWire = self
            .client
            .hook(method::CONFORMANCE_START_LISTENER, &serde_json::Value::Null)
            .await
            .map_err(|e| TargetError::platform(method::CONFORMANCE_START_LISTENER, e))?;
        Ok(Listener {
            host: l.host,
            port: l.port,
            token: l.token,
        })
    }

    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, TargetError> {
        let r: ProbeResult = self
            .client
            .hook(method::CONFORMANCE_CONTROL_PROBE, &to_wire(listener))
            .await
            .map_err(|e| TargetError::platform(method::CONFORMANCE_CONTROL_PROBE, e))?;
        Ok(r.data_base64.0)
    }

    async fn stop_listener(&self, listener: &Listener) {
        let r: Result<serde_json::Value, String> = self
            .client
            .hook(method::CONFORMANCE_STOP_LISTENER, &to_wire(listener))
            .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "stopping a listener failed");
        }
    }

    async fn live_objects(&self) -> Result<LiveObjects, TargetError> {
        let l: LiveObjectsWire = self
            .client
            .hook(method::CONFORMANCE_LIVE_OBJECTS, &serde_json::Value::Null)
            .await
            .map_err(|e| TargetError::platform(method::CONFORMANCE_LIVE_OBJECTS, e))?;
        Ok(LiveObjects {
            instances: l.instances.into_iter().collect(),
            snapshots: l.snapshots.into_iter().collect(),
        })
    }

    fn active_write_journal_durable(&self) -> bool {
        self.describe.active_write_journal_durable
    }

    async fn pause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        self.pause_hook(instance_id, true).await
    }

    async fn unpause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        self.pause_hook(instance_id, false).await
    }

    async fn workload_paused(&self, instance_id: &str) -> Option<Result<bool, TargetError>> {
        let params = WorkloadPausedParams {
            instance_id: instance_id.to_owned(),
        };
        let r: Result<WorkloadPausedResult, String> = self
            .client
            .hook(method::CONFORMANCE_WORKLOAD_PAUSED, &params)
            .await;
        match r {
            Ok(r) => Some(Ok(r.paused)),
            Err(e) if e.contains("code -32601") => None,
            Err(e) => Some(Err(TargetError::platform(
                method::CONFORMANCE_WORKLOAD_PAUSED,
                e,
            ))),
        }
    }

    /// Asks the served side to release what its target holds
    /// (`conformance/close`), then ends the connection: a child process
    /// is killed and reaped.
    async fn close(&self) -> Result<(), TargetError> {
        let closed: Result<serde_json::Value, String> = self
            .client
            .hook(method::CONFORMANCE_CLOSE, &serde_json::Value::Null)
            .await;
        self.client.close().await;
        closed.map_err(|e| TargetError::platform(method::CONFORMANCE_CLOSE, e))?;
        Ok(())
    }
}

/// Serves a local conformance target's hooks (the served provider is
/// `target.provider()`).
pub struct TargetHooks {
    target: Arc<dyn ConformanceTarget>,
    manual_clock: bool,
}

impl TargetHooks {
    /// `target`'s hooks; `manual_clock` says whether its clock is a manual
    /// clock the runner should mirror.
    pub fn new(target: Arc<dyn ConformanceTarget>, manual_clock: bool) -> Self {
        TargetHooks {
            target,
            manual_clock,
        }
    }
}

#[async_trait]
impl ConformanceHooks for TargetHooks {
    async fn describe(&self) -> Result<DescribeResult, String> {
        let (tier, platform) = self.target.tier_platform();
        Ok(DescribeResult {
            name: self.target.name().to_owned(),
            declared_tokens: self.target.declared_tokens().into_iter().collect(),
            root_image: self.target.root_image().to_string(),
            tier,
            platform,
            clock_now: self.target.clock().now(),
            manual_clock: self.manual_clock,
            active_write_journal_durable: self.target.active_write_journal_durable(),
        })
    }

    async fn pause_workload(&self, instance_id: &str, paused: bool) -> Option<Result<(), String>> {
        let r = if paused {
            self.target.pause_workload(instance_id).await
        } else {
            self.target.unpause_workload(instance_id).await
        };
        r.map(|r| r.map_err(|e| e.to_string()))
    }

    async fn workload_paused(&self, instance_id: &str) -> Option<Result<bool, String>> {
        self.target
            .workload_paused(instance_id)
            .await
            .map(|r| r.map_err(|e| e.to_string()))
    }

    async fn start_listener(&self) -> Result<ListenerWire, String> {
        self.target
            .start_listener()
            .await
            .map(|l| to_wire(&l))
            .map_err(|e| e.to_string())
    }

    async fn control_probe(&self, l: ListenerWire) -> Result<Vec<u8>, String> {
        self.target
            .control_probe(&Listener {
                host: l.host,
                port: l.port,
                token: l.token,
            })
            .await
            .map_err(|e| e.to_string())
    }

    async fn stop_listener(&self, l: ListenerWire) {
        self.target
            .stop_listener(&Listener {
                host: l.host,
                port: l.port,
                token: l.token,
            })
            .await;
    }

    async fn live_objects(&self) -> Result<LiveObjectsWire, String> {
        let l = self
            .target
            .live_objects()
            .await
            .map_err(|e| e.to_string())?;
        Ok(LiveObjectsWire {
            instances: l.instances.into_iter().collect(),
            snapshots: l.snapshots.into_iter().collect(),
        })
    }

    async fn close(&self) -> Result<(), String> {
        self.target.close().await.map_err(|e| e.to_string())
    }
}
