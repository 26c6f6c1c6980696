//! The contract extensions this provider implements (decision
//! `cli-pin-and-sweep-members`): resolveImage through the daemon's image
//! store, and cleanupInventory from the same labels and records cleanup
//! sweeps from.

use async_trait::async_trait;
use checkfu_sandbox_contract::{
    CleanupInventory, CleanupInventoryMember, Requirement, ResolveImageMember, SandboxError,
    SweepCandidate,
};

use crate::fixture;
use crate::provider::{DockerProvider, Inventory};

/// An error and its sources, joined by `: `.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

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
    let list = |objects: &std::collections::BTreeMap<String, crate::ObjectTimes>| {
        objects
            .iter()
            .map(|(id, t)| SweepCandidate {
                id: id.clone(),
                created_at: t.created_at,
                expires_at: t.expires_at,
            })
            .collect()
    };
    CleanupInventory {
        instances: list(&inventory.instances),
        snapshots: list(&inventory.snapshots),
    }
}
