//! The cleanup rule in one place (decision 004), and the inventory a
//! provider reports for a dry run (contract extension, decision
//! `cli-pin-and-sweep-members`).
//!
//! Every sweep applies [`CleanupRequest::sweeps_instance`] and
//! [`CleanupRequest::sweeps_snapshot`]: the providers' own `cleanup`, and
//! the runtime's dry run over a provider's [`CleanupInventory`]. Only the
//! request's `now` is consulted, never a clock, so a sweep is reproducible.

use crate::timestamp::Timestamp;
use crate::types::{CleanupRequest, CleanupResult};

/// One live object of a provider, with the times its own record carries.
///
/// A time the provider cannot read (a lost or unreadable record) is `None`
/// and counts as orphaned and expired: an object nobody can date is swept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepCandidate {
    /// The instance or snapshot id.
    pub id: String,
    /// When it was created, if known.
    pub created_at: Option<Timestamp>,
    /// Its hard expiry (instance) or retention deadline (snapshot), if known.
    pub expires_at: Option<Timestamp>,
}

/// Every instance and snapshot a provider holds now, as its cleanup would
/// see them; returned by the optional
/// [`CleanupInventoryMember`](crate::provider::CleanupInventoryMember).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanupInventory {
    /// Live instances.
    pub instances: Vec<SweepCandidate>,
    /// Live snapshots.
    pub snapshots: Vec<SweepCandidate>,
}

impl CleanupRequest {
    /// Whether an instance is swept: created before `orphaned_before`, or
    /// its `expires_at` is at or before `now`.
    pub fn sweeps_instance(
        &self,
        created_at: Option<Timestamp>,
        expires_at: Option<Timestamp>,
    ) -> bool {
        self.orphaned(created_at) || self.expired(expires_at)
    }

    /// Whether snapshot `id` is swept: its `expires_at` is at or before
    /// `now` (a pin never saves an expired snapshot), or it is not in
    /// `pinned_snapshots` and was created before `orphaned_before`.
    pub fn sweeps_snapshot(
        &self,
        id: &str,
        created_at: Option<Timestamp>,
        expires_at: Option<Timestamp>,
    ) -> bool {
        self.expired(expires_at) || (!self.is_pinned(id) && self.orphaned(created_at))
    }

    /// Whether `id` is one of the request's pins.
    pub fn is_pinned(&self, id: &str) -> bool {
        self.pinned_snapshots.iter().any(|p| p == id)
    }

    /// The ids of `inventory` this request sweeps, in inventory order.
    pub fn would_sweep(&self, inventory: &CleanupInventory) -> CleanupResult {
        CleanupResult {
            instances: inventory
                .instances
                .iter()
                .filter(|c| self.sweeps_instance(c.created_at, c.expires_at))
                .map(|c| c.id.clone())
                .collect(),
            snapshots: inventory
                .snapshots
                .iter()
                .filter(|c| self.sweeps_snapshot(&c.id, c.created_at, c.expires_at))
                .map(|c| c.id.clone())
                .collect(),
        }
    }

    fn orphaned(&self, created_at: Option<Timestamp>) -> bool {
        created_at.is_none_or(|c| c < self.orphaned_before)
    }

    fn expired(&self, expires_at: Option<Timestamp>) -> bool {
        expires_at.is_none_or(|e| e <= self.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn a_pin_exempts_from_the_cutoff_but_never_from_expiry() {
        let request = CleanupRequest {
            now: t("2030-01-01T12:00:00.000Z"),
            orphaned_before: t("2030-01-01T11:00:00.000Z"),
            pinned_snapshots: vec!["pinned-old".into(), "pinned-expired".into()],
        };
        let old = Some(t("2030-01-01T10:00:00.000Z"));
        let fresh = Some(t("2030-01-01T11:30:00.000Z"));
        let later = Some(t("2030-01-02T00:00:00.000Z"));
        let c = |id: &str, created_at, expires_at| SweepCandidate {
            id: id.into(),
            created_at,
            expires_at,
        };
        let inventory = CleanupInventory {
            instances: vec![
                c("fresh", fresh, later),
                c("old", old, later),
                c("expired", fresh, Some(request.now)),
                c("undated", None, later),
            ],
            snapshots: vec![
                c("kept", fresh, later),
                c("old", old, later),
                c("pinned-old", old, later),
                c("pinned-expired", fresh, Some(request.now)),
                c("unknown-expiry", fresh, None),
            ],
        };
        let swept = request.would_sweep(&inventory);
        assert_eq!(swept.instances, vec!["old", "expired", "undated"]);
        assert_eq!(
            swept.snapshots,
            vec!["old", "pinned-expired", "unknown-expiry"]
        );
    }
}
