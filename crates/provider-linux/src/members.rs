//! The contract extensions this provider implements (decision
//! 010): resolveImage through the local OCI image store, and
//! cleanupInventory from the same records cleanup sweeps from.

use async_trait::async_trait;
use checkfu_sandbox_contract::{
    CleanupInventory, CleanupInventoryMember, Requirement, ResolveImageMember, SandboxError,
};
use checkfu_sandbox_hostfs::errors::chain;
use checkfu_sandbox_hostfs::sweep_rule;

use crate::image::ImageError;
use crate::provider::{Inventory, LinuxProvider};

/// A tag resolves to the image it designates now; a pinned reference must
/// name an image of the local store carrying that name. No registry is
/// contacted.
#[async_trait]
impl ResolveImageMember for LinuxProvider {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        let store = self.images().clone();
        let reference = reference.to_owned();
        let res = tokio::task::spawn_blocking(move || store.resolve(&reference).map(|i| i.pinned))
            .await
            .map_err(|e| {
                SandboxError::failed(
                    checkfu_sandbox_contract::provider::op::RESOLVE_IMAGE,
                    checkfu_sandbox_contract::FailureReason::ProviderError,
                    e.to_string(),
                )
            })?;
        match res {
            Ok(pinned) => Ok(pinned),
            Err(e @ ImageError::NotFound { .. }) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("{e} {}", crate::image::STORE_HINT),
            )),
            Err(e) => Err(SandboxError::unavailable(Requirement::BaseImage, chain(&e))),
        }
    }
}

/// The scope's instances and snapshots with the times their records carry (a lost time is `None`, which the rule sweeps).
#[async_trait]
impl CleanupInventoryMember for LinuxProvider {
    async fn cleanup_inventory(&self) -> Result<CleanupInventory, SandboxError> {
        Ok(candidates(&self.inventory().await?))
    }
}

/// The inventory as the contract's sweep candidates.
pub(crate) fn candidates(inventory: &Inventory) -> CleanupInventory {
    sweep_rule::candidates(&inventory.instances, &inventory.snapshots)
}
