//! The `checkfu.sandbox.*` labels every container and image carries, and
//! the names and tags of the daemon objects.

use std::collections::HashMap;

use checkfu_sandbox_contract::*;

use super::inner::{Inner, PROVIDER_ID};
use crate::store::InstanceRecord;

/// Label: which provider created the object (`docker`).
pub const LABEL_PROVIDER: &str = "checkfu.sandbox.provider";
/// Label: the provider scope.
pub const LABEL_SCOPE: &str = "checkfu.sandbox.scope";
/// Label: `instance` or `snapshot`.
pub const LABEL_KIND: &str = "checkfu.sandbox.kind";
/// Label: the instance id (instances).
pub const LABEL_INSTANCE_ID: &str = "checkfu.sandbox.instance_id";
/// Label: the snapshot id (snapshots).
pub const LABEL_SNAPSHOT_ID: &str = "checkfu.sandbox.snapshot_id";
/// Label: the instance a snapshot was captured from.
pub const LABEL_SOURCE_INSTANCE_ID: &str = "checkfu.sandbox.source_instance_id";
/// Label: the Session.
pub const LABEL_SESSION_ID: &str = "checkfu.sandbox.session_id";
/// Label: the Workspace.
pub const LABEL_WORKSPACE_ID: &str = "checkfu.sandbox.workspace_id";
/// Label: the profile id.
pub const LABEL_PROFILE_ID: &str = "checkfu.sandbox.profile_id";
/// Label: the profile version.
pub const LABEL_PROFILE_VERSION: &str = "checkfu.sandbox.profile_version";
/// Label: the profile digest.
pub const LABEL_PROFILE_DIGEST: &str = "checkfu.sandbox.profile_digest";
/// Label: when the object was created (canonical timestamp).
pub const LABEL_CREATED_AT: &str = "checkfu.sandbox.created_at";
/// Label: when the object expires (canonical timestamp).
pub const LABEL_EXPIRES_AT: &str = "checkfu.sandbox.expires_at";
/// `checkfu.sandbox.kind` of instance containers.
pub const KIND_INSTANCE: &str = "instance";
/// `checkfu.sandbox.kind` of snapshot images.
pub const KIND_SNAPSHOT: &str = "snapshot";
/// Repository of snapshot image tags (`checkfu-snapshot:<snapshot id>`).
pub const SNAPSHOT_REPOSITORY: &str = "checkfu-snapshot";
/// Repository of per-instance image tags (`checkfu-instance:<instance id>`).
pub const INSTANCE_REPOSITORY: &str = "checkfu-instance";

pub(crate) fn container_name(instance_id: &str) -> String {
    format!("checkfu-{instance_id}")
}

pub(super) fn snapshot_tag(snapshot_id: &str) -> String {
    format!("{SNAPSHOT_REPOSITORY}:{snapshot_id}")
}

pub(super) fn instance_tag(instance_id: &str) -> String {
    format!("{INSTANCE_REPOSITORY}:{instance_id}")
}

pub(super) fn parse_time(labels: &HashMap<String, String>, key: &str) -> Option<Timestamp> {
    labels.get(key).and_then(|v| Timestamp::parse(v).ok())
}

impl Inner {
    pub(super) fn base_labels(&self, kind: &str) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_PROVIDER.to_owned(), PROVIDER_ID.to_owned()),
            (LABEL_SCOPE.to_owned(), self.scope.clone()),
            (LABEL_KIND.to_owned(), kind.to_owned()),
        ])
    }

    /// Every label key is set, so nothing inherited from an image (a
    /// resumed snapshot's labels) survives on a container.
    pub(super) fn instance_labels(&self, rec: &InstanceRecord) -> HashMap<String, String> {
        let r = &rec.request;
        let mut l = self.base_labels(KIND_INSTANCE);
        for (k, v) in [
            (LABEL_INSTANCE_ID, rec.instance_id.clone()),
            (LABEL_SNAPSHOT_ID, String::new()),
            (LABEL_SOURCE_INSTANCE_ID, String::new()),
            (LABEL_SESSION_ID, r.session_id.clone()),
            (LABEL_WORKSPACE_ID, r.workspace_id.clone()),
            (LABEL_PROFILE_ID, r.profile.profile_id.clone()),
            (LABEL_PROFILE_VERSION, r.profile.profile_version.to_string()),
            (LABEL_PROFILE_DIGEST, r.profile.profile_digest.to_string()),
            (LABEL_CREATED_AT, rec.created_at.to_string()),
            (LABEL_EXPIRES_AT, r.expires_at.to_string()),
        ] {
            l.insert(k.to_owned(), v);
        }
        l
    }

    pub(super) fn snapshot_labels(&self, s: &SandboxSnapshot) -> HashMap<String, String> {
        let mut l = self.base_labels(KIND_SNAPSHOT);
        for (k, v) in [
            (LABEL_INSTANCE_ID, String::new()),
            (LABEL_SNAPSHOT_ID, s.snapshot_id.clone()),
            (LABEL_SOURCE_INSTANCE_ID, s.source_instance_id.clone()),
            (LABEL_SESSION_ID, s.session_id.clone()),
            (LABEL_WORKSPACE_ID, s.workspace_id.clone()),
            (LABEL_PROFILE_ID, s.profile_id.clone()),
            (LABEL_PROFILE_VERSION, s.profile_version.to_string()),
            (LABEL_PROFILE_DIGEST, s.profile_digest.to_string()),
            (LABEL_CREATED_AT, s.created_at.to_string()),
            (LABEL_EXPIRES_AT, s.expires_at.to_string()),
        ] {
            l.insert(k.to_owned(), v);
        }
        l
    }
}
