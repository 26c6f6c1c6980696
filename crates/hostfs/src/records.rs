//! A host-side provider's instance and snapshot records as the shared code
//! reads them ([`StoredInstance`], [`StoredSnapshot`]; each provider keeps
//! its own record types, decision 034), the id prefixes, and loading and
//! saving them under the state directory ([`crate::store::Layout`]),
//! never beyond the provider's scope.

use checkfu_sandbox_contract::{
    InstanceState, Operation, SandboxError, SandboxSnapshot, Timestamp,
};
use serde::{de::DeserializeOwned, Serialize};

use crate::errors::provider_error;
use crate::host::InstanceRecordView;
use crate::store::{self, Layout};
use crate::sweep_rule::ObjectTimes;

/// The prefix of every instance id (`i-<24 hex>`, [`store::fresh_id`]).
pub const INSTANCE_PREFIX: &str = "i";
/// The prefix of every snapshot id (`s-<24 hex>`).
pub const SNAPSHOT_PREFIX: &str = "s";

/// Whether `scope` may name a provider's scope: 1..=64 characters of
/// `[a-z0-9._-]`, the first a letter or a digit (usable as a label value,
/// a directory name and a name part; `.` and `..` would name a directory
/// other than the scope's own).
pub fn scope_ok(scope: &str) -> bool {
    scope.len() <= 64
        && scope
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && scope
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

/// A provider's instance record (`instance.json`).
pub trait StoredInstance: InstanceRecordView + Serialize + DeserializeOwned {
    /// The scope the instance belongs to.
    fn scope(&self) -> &str;
    /// The instance id.
    fn instance_id(&self) -> &str;
    /// When the instance was created.
    fn created_at(&self) -> Timestamp;
    /// Records a new lifecycle state.
    fn set_state(&mut self, state: InstanceState);

    /// Creation and expiry (the request's `expires_at`) as a sweep sees
    /// them.
    fn times(&self) -> ObjectTimes {
        ObjectTimes {
            created_at: Some(self.created_at()),
            expires_at: Some(self.request().expires_at),
        }
    }
}

/// A provider's snapshot record (`snapshot.json`).
pub trait StoredSnapshot: Serialize + DeserializeOwned {
    /// The scope the snapshot belongs to.
    fn scope(&self) -> &str;
    /// The snapshot as the contract returned it.
    fn snapshot(&self) -> &SandboxSnapshot;

    /// Creation and expiry as a sweep sees them.
    fn times(&self) -> ObjectTimes {
        ObjectTimes {
            created_at: Some(self.snapshot().created_at),
            expires_at: Some(self.snapshot().expires_at),
        }
    }
}

/// The record of instance `id` of `scope`.
///
/// # Errors
///
/// `SandboxInstanceNotFound` for an id not of the [`INSTANCE_PREFIX`]
/// shape, without a record, or of another scope; `ProviderError` of
/// `operation` for an unreadable record.
pub fn load_instance<R: StoredInstance>(
    layout: &Layout,
    scope: &str,
    operation: Operation,
    id: &str,
) -> Result<R, SandboxError> {
    let not_found = || SandboxError::SandboxInstanceNotFound {
        instance_id: id.to_owned(),
    };
    if !store::is_id(INSTANCE_PREFIX, id) {
        return Err(not_found());
    }
    match store::read_record::<R>(&layout.instance_record(id)) {
        Ok(Some(rec)) if rec.scope() == scope => Ok(rec),
        Ok(_) => Err(not_found()),
        Err(m) => Err(provider_error(operation, m)),
    }
}

/// The record of snapshot `id` of `scope`.
///
/// # Errors
///
/// `SandboxSnapshotNotFound` for an id not of the [`SNAPSHOT_PREFIX`]
/// shape, without a record, or of another scope; `ProviderError` of
/// `operation` for an unreadable record.
pub fn load_snapshot<R: StoredSnapshot>(
    layout: &Layout,
    scope: &str,
    operation: Operation,
    id: &str,
) -> Result<R, SandboxError> {
    let not_found = || SandboxError::SandboxSnapshotNotFound {
        snapshot_id: id.to_owned(),
    };
    if !store::is_id(SNAPSHOT_PREFIX, id) {
        return Err(not_found());
    }
    match store::read_record::<R>(&layout.snapshot_record(id)) {
        Ok(Some(rec)) if rec.scope() == scope => Ok(rec),
        Ok(_) => Err(not_found()),
        Err(m) => Err(provider_error(operation, m)),
    }
}

/// Writes instance record `rec` back, atomically, surviving a crash of
/// this process ([`store::Durability::ProcessCrash`]).
///
/// # Errors
///
/// `ProviderError` of `operation` when the record cannot be written.
pub fn save_instance<R: StoredInstance>(
    layout: &Layout,
    operation: Operation,
    rec: &R,
) -> Result<(), SandboxError> {
    store::write_record_with(
        &layout.instance_record(rec.instance_id()),
        rec,
        store::Durability::ProcessCrash,
    )
    .map_err(|e| provider_error(operation, format!("writing the instance record: {e}")))
}

/// Whether destroying snapshot `id` may touch what its id names: the id
/// has the [`SNAPSHOT_PREFIX`] shape and no readable record says another
/// scope owns it (a missing or unreadable record is this scope's leftover).
pub fn snapshot_destroyable<R: StoredSnapshot>(layout: &Layout, scope: &str, id: &str) -> bool {
    if !store::is_id(SNAPSHOT_PREFIX, id) {
        return false;
    }
    let rec = store::read_record::<R>(&layout.snapshot_record(id))
        .ok()
        .flatten();
    rec.as_ref().is_none_or(|r| r.scope() == scope)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use checkfu_sandbox_contract::{Digest, Placement};
    use serde::Deserialize;

    #[derive(Serialize, Deserialize)]
    struct Snap {
        scope: String,
        snapshot: SandboxSnapshot,
    }

    impl StoredSnapshot for Snap {
        fn scope(&self) -> &str {
            &self.scope
        }
        fn snapshot(&self) -> &SandboxSnapshot {
            &self.snapshot
        }
    }

    /// A snapshot of provider `p` with id `id`, created 2030-01-01 and
    /// expiring a day later (the unit tests' fixture).
    pub(crate) fn sample_snapshot(id: &str) -> SandboxSnapshot {
        SandboxSnapshot {
            snapshot_id: id.to_owned(),
            provider: "p".into(),
            placement: Placement::Runner,
            source_instance_id: "i-1".into(),
            workspace_id: "w".into(),
            session_id: "s".into(),
            profile_id: "prof".into(),
            profile_version: 1,
            profile_digest: Digest::from_sha256_bytes([7; 32]),
            created_at: Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap(),
            expires_at: Timestamp::parse("2030-01-02T00:00:00.000Z").unwrap(),
        }
    }

    fn snap(scope: &str, id: &str) -> Snap {
        Snap {
            scope: scope.to_owned(),
            snapshot: sample_snapshot(id),
        }
    }

    fn stored(layout: &Layout, rec: &Snap) {
        let dir = layout.snapshot_dir(&rec.snapshot.snapshot_id);
        std::fs::create_dir_all(&dir).unwrap();
        store::write_record(&dir.join(store::SNAPSHOT_RECORD), rec).unwrap();
    }

    #[test]
    fn scopes() {
        assert!(scope_ok("conf-123-4"));
        assert!(scope_ok("1.a_b-c"));
        for bad in [
            "",
            "A",
            "a b",
            "a/b",
            ".",
            "..",
            ".a",
            "-a",
            "_a",
            &"x".repeat(65),
        ] {
            assert!(!scope_ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_snapshot_loads_only_in_its_own_scope() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().to_path_buf());
        let id = store::fresh_id(SNAPSHOT_PREFIX, "a");
        stored(&layout, &snap("a", &id));
        let op = checkfu_sandbox_contract::provider::op::CLONE_SNAPSHOT;
        let got: Snap = load_snapshot(&layout, "a", op, &id).unwrap();
        assert_eq!(got.snapshot.snapshot_id, id);
        assert_eq!(got.times().expires_at, Some(got.snapshot.expires_at));
        let other = load_snapshot::<Snap>(&layout, "b", op, &id).err();
        assert_eq!(
            other,
            Some(SandboxError::SandboxSnapshotNotFound {
                snapshot_id: id.clone()
            })
        );
        assert!(snapshot_destroyable::<Snap>(&layout, "a", &id));
        assert!(!snapshot_destroyable::<Snap>(&layout, "b", &id));
    }

    #[test]
    fn an_id_of_another_shape_is_not_found_without_touching_a_path() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().to_path_buf());
        let op = checkfu_sandbox_contract::provider::op::CLONE_SNAPSHOT;
        for bad in ["../x", "s-1", "i-000000000000000000000000"] {
            let err = load_snapshot::<Snap>(&layout, "a", op, bad).err();
            assert_eq!(
                err,
                Some(SandboxError::SandboxSnapshotNotFound {
                    snapshot_id: bad.to_owned()
                })
            );
            assert!(!snapshot_destroyable::<Snap>(&layout, "a", bad));
        }
        // A well-shaped id without a record is this scope's leftover.
        assert!(snapshot_destroyable::<Snap>(
            &layout,
            "a",
            &store::fresh_id(SNAPSHOT_PREFIX, "a")
        ));
    }
}
