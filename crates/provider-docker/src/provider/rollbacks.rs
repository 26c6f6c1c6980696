//! The rollbacks of allocating calls, each undoing exactly what its call
//! allocated: [`checkfu_sandbox_hostfs::rollbacks`] over this provider
//! (what undoing an activation means here: [`super::host`]).

use super::inner::Inner;

pub(super) use checkfu_sandbox_hostfs::rollbacks::NothingToUndo;

/// Rollback of an instance allocation (provision, resume).
pub(super) type InstanceRollback = checkfu_sandbox_hostfs::rollbacks::InstanceRollback<Inner>;
/// Rollback of an activation.
pub(super) type ActivateRollback = checkfu_sandbox_hostfs::rollbacks::ActivateRollback<Inner>;
/// Rollback of a snapshot allocation (snapshot, clone, durable release).
pub(super) type SnapshotRollback = checkfu_sandbox_hostfs::rollbacks::SnapshotRollback<Inner>;
