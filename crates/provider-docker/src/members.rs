//! The contract extensions this provider implements (decision
//! 010): resolveImage through the daemon's image
//! store, and cleanupInventory from the same labels and records cleanup
//! sweeps from.

use async_trait::async_trait;
use checkfu_sandbox_contract::{
    CleanupInventory, CleanupInventoryMember, Requirement, ResolveImageMember, SandboxError,
};
use checkfu_sandbox_hostfs::errors::chain;
use checkfu_sandbox_hostfs::sweep_rule;

use crate::fixture;
use crate::provider::{DockerProvider, Inventory};

/// A tag resolves to the image it designates now; a pinned reference must
/// name an image of the local store carrying that name. No registry is
/// contacted.
#[async_trait]
impl ResolveImageMember for DockerProvider {
    async fn resolve_image(&self, reference: &str) -> Result<String, SandboxError> {
        match fixture::resolve_image(self.docker(), reference).await {
            Ok(Some(pinned)) => Ok(pinned),
            Ok(None) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!(
                    "image {reference:?} is not in the local image store (no registry is used; \
`checkfu sandbox fixture` builds the fixture image)"
                ),
            )),
            Err(e) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("image {reference:?}: {}", chain(&e)),
            )),
        }
    }
}

/// The scope's instances and snapshots with the times their labels and
/// records carry (a lost time is `None`, which the rule sweeps).
#[async_trait]
impl CleanupInventoryMember for DockerProvider {
    async fn cleanup_inventory(&self) -> Result<CleanupInventory, SandboxError> {
        Ok(candidates(&self.inventory().await?))
    }
}

/// The inventory as the contract's sweep candidates.
pub(crate) fn candidates(inventory: &Inventory) -> CleanupInventory {
    sweep_rule::candidates(&inventory.instances, &inventory.snapshots)
}
