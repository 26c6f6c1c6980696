//! The contract extensions (decision 010) behind
//! the runtime's checks: image pinning and the cleanup dry run.

use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    CleanupInventory, CleanupResult, ImageReference, Requirement, SandboxError, SandboxFailure,
    SweepCandidate, Timestamp,
};

use crate::adapter::{admit_cleanup, first_repeat};
use crate::Adapter;

type Res<T> = Result<T, SandboxFailure>;

/// The hex of a bare image ID `sha256:<64 lowercase hex>`.
fn image_id_hex(reference: &str) -> Option<&str> {
    reference.strip_prefix("sha256:").filter(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The image name of a reference as given: the part before `@`, else
/// before a trailing `:tag` (a `:` followed by no `/`, so a registry port
/// stays in the name).
fn name_of(reference: &str) -> &str {
    if let Some((name, _)) = reference.split_once('@') {
        return name;
    }
    match reference.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => reference,
    }
}

impl Adapter {
    /// resolveImage: pins `reference` (`name[:tag]`, `name@sha256:<hex>`
    /// or a bare image ID `sha256:<hex>`) through the provider's own image
    /// store. The answer must keep the input's name (`name[:tag]`), be the
    /// input itself (`name@sha256:<hex>`), or carry the ID's own hex under
    /// any name (`sha256:<hex>`).
    ///
    /// # Errors
    /// `SandboxOperationFailed{operation: resolve_image, reason:
    /// invalid_request, field: reference}` for a reference that starts
    /// with `sha256:` but is not an image ID (64 lowercase hex), before the
    /// provider is called (it would read as the name `sha256` with a tag);
    /// `SandboxCapabilityUnavailable{requirement: base_image}` when the
    /// member is absent and `reference` is not already pinned (a pinned
    /// reference is then returned as it is), or when the provider does not
    /// know the image (its error); `SandboxProtocolInvalid{operation: resolve_image}` when the
    /// answer is not `name@sha256:<64 lowercase hex>`, names another image,
    /// or (for a pinned input) is not the input itself.
    ///
    /// # Cancel safety
    /// Cancel-safe: resolution allocates nothing; a dropped future drops
    /// the provider's call with it and leaves no state in the runtime.
    pub async fn resolve_image(&self, reference: &str) -> Res<ImageReference> {
        if reference.starts_with("sha256:") && image_id_hex(reference).is_none() {
            return Err(SandboxError::invalid_request(
                op::RESOLVE_IMAGE,
                "reference",
                "an image ID sha256:<64 lowercase hex>",
                reference,
            )
            .into());
        }
        let Some(member) = self.provider().resolve_image() else {
            // A reference that is already pinned needs no resolution: the
            // provider checks at provision that it holds the image.
            if let Ok(pinned) = ImageReference::parse(reference) {
                return Ok(pinned);
            }
            return Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!(
                    "provider {} cannot resolve image references; give name@sha256:<hex>",
                    self.provider_id()
                ),
            )
            .into());
        };
        let answer = member
            .resolve_image(reference)
            .await
            .map_err(|e| self.verdicts().admit(op::RESOLVE_IMAGE, e))?;
        let refuse = |expected: String| -> SandboxFailure {
            SandboxError::protocol(op::RESOLVE_IMAGE, "reference", expected, answer.clone()).into()
        };
        let pinned = ImageReference::parse(&answer)
            .map_err(|e| refuse(format!("name@sha256:<64 lowercase hex> ({e})")))?;
        if reference.contains('@') && pinned.as_str() != reference {
            return Err(refuse(format!("the pinned input {reference}")));
        }
        if let Some(hex) = image_id_hex(reference) {
            // An image ID names no repository: the digest must be its own.
            if pinned.digest().hex() != hex {
                return Err(refuse(format!("a reference with digest {reference}")));
            }
        } else if pinned.name() != name_of(reference) {
            return Err(refuse(format!("a reference named {}", name_of(reference))));
        }
        Ok(pinned)
    }

    /// The cleanup dry run: what [`Adapter::cleanup`] with the same
    /// arguments would sweep now, computed by the contract's rule
    /// ([`checkfu_sandbox_contract::sweep`]) over the provider's
    /// cleanupInventory. Nothing is removed.
    ///
    /// # Errors
    /// As cleanup's admission; `SandboxLifecycleConflict{operation:
    /// cleanup_inventory, actual: cleanup_inventory_unsupported}` when the
    /// member is absent (as for an absent openProcess); the provider's error;
    /// `SandboxProtocolInvalid{operation: cleanup_inventory}` for an empty
    /// or repeated id.
    ///
    /// # Cancel safety
    /// Cancel-safe: a dry run only reads the provider's inventory; a
    /// dropped future sweeps nothing and leaves no state in the runtime.
    pub async fn cleanup_dry_run(
        &self,
        now: Timestamp,
        orphaned_before: Timestamp,
        pinned_snapshots: Vec<String>,
    ) -> Res<CleanupResult> {
        let request = admit_cleanup(now, orphaned_before, pinned_snapshots)?;
        let inventory = self.cleanup_inventory().await?;
        Ok(request.would_sweep(&inventory))
    }

    /// cleanupInventory, checked: every live instance and snapshot of the
    /// provider with the `created_at` / `expires_at` its own record
    /// carries (`None` when unreadable). Used by the dry run and by
    /// listings of the snapshots a provider holds.
    ///
    /// # Errors
    /// `SandboxLifecycleConflict{operation: cleanup_inventory, actual:
    /// cleanup_inventory_unsupported}` when the member is absent; the
    /// provider's error; `SandboxProtocolInvalid{operation:
    /// cleanup_inventory}` for an empty or repeated id.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of the provider's inventory; a dropped future
    /// changes nothing.
    pub async fn cleanup_inventory(&self) -> Res<CleanupInventory> {
        let Some(member) = self.provider().cleanup_inventory() else {
            return Err(SandboxError::conflict(
                op::CLEANUP_INVENTORY,
                "cleanup_inventory",
                checkfu_sandbox_contract::ConflictActual::CleanupInventoryUnsupported,
            )
            .into());
        };
        let inventory = member
            .cleanup_inventory()
            .await
            .map_err(|e| self.verdicts().admit(op::CLEANUP_INVENTORY, e))?;
        for (field, list) in [
            ("instances", &inventory.instances),
            ("snapshots", &inventory.snapshots),
        ] {
            let ids = || list.iter().map(|c: &SweepCandidate| c.id.as_str());
            if ids().any(str::is_empty) {
                return Err(SandboxError::protocol(
                    op::CLEANUP_INVENTORY,
                    format!("{field}.id"),
                    "a non-empty id",
                    "\"\"",
                )
                .into());
            }
            if let Some(dup) = first_repeat(ids()) {
                return Err(SandboxError::protocol(
                    op::CLEANUP_INVENTORY,
                    format!("{field}.id"),
                    "each id once",
                    format!("{dup} repeated"),
                )
                .into());
            }
        }
        Ok(inventory)
    }
}

#[cfg(test)]
mod tests {
    use super::name_of;

    #[test]
    fn names_keep_registry_ports() {
        assert_eq!(name_of("demo:1"), "demo");
        assert_eq!(name_of("demo"), "demo");
        assert_eq!(name_of("localhost:5000/demo"), "localhost:5000/demo");
        assert_eq!(name_of("localhost:5000/demo:2"), "localhost:5000/demo");
        assert_eq!(name_of("demo@sha256:ab"), "demo");
    }
}
