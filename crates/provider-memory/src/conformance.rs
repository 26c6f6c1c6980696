//! The memory oracle as a conformance target: every token, a manual clock,
//! simulated listeners, and optional injected faults (feature
//! `conformance`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_conformance::context::fresh_token;
use checkfu_sandbox_conformance::{ConformanceTarget, Listener, LiveObjects, TargetError, Token};
use checkfu_sandbox_contract::*;

use crate::{Fault, MemoryProvider};

/// The instant the memory target's manual clock starts at.
pub const MEMORY_EPOCH: &str = "2030-01-01T00:00:00.000Z";

/// The port of the first listener a memory target starts; each next one
/// takes the next port.
const FIRST_PORT: u16 = 7000;

/// The memory oracle under test.
pub struct MemoryTarget {
    provider: MemoryProvider,
    clock: ManualClock,
    next_port: AtomicU16,
}

impl MemoryTarget {
    /// An honest oracle.
    pub fn new() -> Self {
        Self::with_faults(Vec::new())
    }

    /// The oracle with `faults` injected.
    pub fn with_faults(faults: Vec<Fault>) -> Self {
        let clock =
            ManualClock::new(Timestamp::parse(MEMORY_EPOCH).unwrap_or_else(|_| Timestamp::now()));
        let provider = MemoryProvider::builder()
            .manual_clock(clock.clone())
            .faults(faults)
            .build();
        MemoryTarget {
            provider,
            clock,
            next_port: AtomicU16::new(FIRST_PORT),
        }
    }

    /// The underlying provider (for inspection in tests).
    pub fn memory(&self) -> &MemoryProvider {
        &self.provider
    }
}

impl Default for MemoryTarget {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ConformanceTarget for MemoryTarget {
    fn name(&self) -> &str {
        "memory"
    }

    fn provider(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(WireLoopback(self.provider.clone()))
    }

    fn reopen(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(WireLoopback(self.provider.clone()))
    }

    fn declared_tokens(&self) -> BTreeSet<Token> {
        Token::ALL.into_iter().collect()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.clock.clone())
    }

    fn root_image(&self) -> ImageReference {
        ImageReference::parse(&format!("checkfu-memory@sha256:{}", "0".repeat(64)))
            .expect("a valid literal reference")
    }

    fn tier_platform(&self) -> (Tier, Platform) {
        (
            Tier::Container,
            Platform {
                os: Os::Linux,
                architecture: Architecture::Amd64,
            },
        )
    }

    async fn start_listener(&self) -> Result<Listener, TargetError> {
        let port = self.next_port.fetch_add(1, Ordering::SeqCst);
        let listener = Listener {
            host: format!("listener-{port}.test"),
            port,
            token: fresh_token("memory-listener"),
        };
        self.provider.add_listener(
            &listener.host,
            listener.port,
            listener.token.clone().into_bytes(),
        );
        Ok(listener)
    }

    async fn control_probe(&self, listener: &Listener) -> Result<Vec<u8>, TargetError> {
        self.provider
            .dial(&listener.host, listener.port)
            .ok_or_else(|| TargetError::NotListening {
                host: listener.host.clone(),
                port: listener.port,
            })
    }

    async fn stop_listener(&self, listener: &Listener) {
        self.provider.remove_listener(&listener.host, listener.port);
    }

    async fn live_objects(&self) -> Result<LiveObjects, TargetError> {
        Ok(LiveObjects {
            instances: self.provider.live_instances().into_iter().collect(),
            snapshots: self.provider.live_snapshots().into_iter().collect(),
        })
    }

    fn active_write_journal_durable(&self) -> bool {
        self.provider.journal_on_durable_storage()
    }

    async fn pause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        self.provider.pause_workload(instance_id);
        Some(Ok(()))
    }

    async fn unpause_workload(&self, instance_id: &str) -> Option<Result<(), TargetError>> {
        self.provider.unpause_workload(instance_id);
        Some(Ok(()))
    }

    async fn workload_paused(&self, instance_id: &str) -> Option<Result<bool, TargetError>> {
        Some(self.provider.workload_paused(instance_id).ok_or_else(|| {
            TargetError::platform("workload_paused", format!("no instance {instance_id}"))
        }))
    }

    /// Destroys every instance and snapshot the oracle still holds and
    /// removes every listener the target started.
    async fn close(&self) -> Result<(), TargetError> {
        let mut left = Vec::new();
        for id in self.provider.live_snapshots() {
            let r = self
                .provider
                .destroy_snapshot(DestroySnapshotRequest {
                    snapshot_id: id.clone(),
                })
                .await;
            if let Err(e) = r {
                left.push(format!("snapshot {id}: {e}"));
            }
        }
        for id in self.provider.live_instances() {
            let r = self
                .provider
                .destroy(DestroyRequest {
                    instance_id: id.clone(),
                })
                .await;
            if let Err(e) = r {
                left.push(format!("instance {id}: {e}"));
            }
        }
        let last = self.next_port.load(Ordering::SeqCst);
        for port in FIRST_PORT..last {
            self.provider
                .remove_listener(&format!("listener-{port}.test"), port);
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(TargetError::Leftovers(left))
        }
    }
}

/// Serves the oracle's execute settlements through the strict wire codec,
/// as a wire seam would: a settlement with two exit causes or none is
/// refused by the decoder (`decode_command_result`, field `exit`).
struct WireLoopback(MemoryProvider);

#[async_trait]
impl SandboxProvider for WireLoopback {
    fn provider_id(&self) -> &str {
        self.0.provider_id()
    }
    fn capabilities(&self) -> SandboxProviderCapabilities {
        self.0.capabilities()
    }
    async fn provision(
        &self,
        r: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.provision(r).await
    }
    async fn write_file(&self, r: WriteFileRequest) -> Result<(), SandboxError> {
        self.0.write_file(r).await
    }
    async fn activate(&self, r: ActivateRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.activate(r).await
    }
    async fn execute(&self, r: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        let result = self.0.execute(r).await?;
        let wire = self.0.command_result_wire(&result);
        checkfu_sandbox_contract::wire::decode_value::<SandboxCommandResult>(
            checkfu_sandbox_contract::WireType::CommandResult,
            &wire,
        )
    }
    async fn read_file(&self, r: ReadFileRequest) -> Result<SandboxFileContent, SandboxError> {
        self.0.read_file(r).await
    }
    async fn snapshot(&self, r: SnapshotRequest) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.0.snapshot(r).await
    }
    async fn clone_snapshot(
        &self,
        r: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.0.clone_snapshot(r).await
    }
    async fn release(
        &self,
        r: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.0.release(r).await
    }
    async fn resume(&self, r: ResumeRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.resume(r).await
    }
    async fn destroy(&self, r: DestroyRequest) -> Result<(), SandboxError> {
        self.0.destroy(r).await
    }
    async fn destroy_snapshot(&self, r: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.0.destroy_snapshot(r).await
    }
    async fn cleanup(&self, r: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.0.cleanup(r).await
    }
    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        self.0.read_files()
    }
    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        self.0.list_dir()
    }
    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        self.0.list_project_dir()
    }
    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.0.open_process()
    }
    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.0.begin_active_write()
    }
    fn resolve_image(&self) -> Option<&dyn ResolveImageMember> {
        self.0.resolve_image()
    }
    fn cleanup_inventory(&self) -> Option<&dyn CleanupInventoryMember> {
        self.0.cleanup_inventory()
    }
}
