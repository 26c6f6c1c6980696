//! What a conformance scope holds beside its instances and snapshots: the
//! support objects [`super::sweep_conformance_scope`] removes (listener and
//! dialer containers, warm-pool slots no instance claimed, images that are
//! not a snapshot's or an instance's, the private network, the state
//! directory), named so that a cleanup can list them before it removes
//! them and count what it removed.

use std::path::PathBuf;

use super::{scope_images, scope_networks};
use crate::labels::{
    INSTANCE_REPOSITORY, KIND_INSTANCE, LABEL_KIND, LABEL_POOL_SLOT, LABEL_SCOPE,
    SNAPSHOT_REPOSITORY,
};
use crate::{daemon, DockerProvider};
use checkfu_sandbox_hostfs::errors::chain;

/// The state directories a conformance target of `scope` made in the
/// temporary directory (`checkfu-<scope>-<suffix>`), sorted: where its
/// instance and snapshot records are.
pub fn conformance_state_dirs(scope: &str) -> Vec<PathBuf> {
    let prefix = format!("checkfu-{scope}-");
    // The host's temporary directory, never a workload tree.
    #[allow(clippy::disallowed_methods)]
    let listed = std::fs::read_dir(std::env::temp_dir());
    let mut dirs: Vec<PathBuf> = listed
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// The support objects of `provider`'s scope that exist now, one line
/// each, sorted: `container <12 hex> (<kind>)` or `container <12 hex>
/// (warm-pool slot <slot>)`, `image <12
/// hex>`, `network <name>`, `state directory <path>`. Instances (their
/// containers, claimed warm-pool containers included) and snapshots
/// (their images) are not listed: they are the provider's inventory,
/// which the runtime's cleanup counts.
///
/// # Errors
/// A line naming what the daemon or the provider's inventory could not
/// list.
pub async fn scope_support_objects(provider: &DockerProvider) -> Result<Vec<String>, String> {
    let scope = provider.scope().to_owned();
    let docker = provider.docker();
    let inventory = provider
        .inventory()
        .await
        .map_err(|e| format!("inventory: {e}"))?;
    let mut objects = Vec::new();
    let containers = daemon::list_containers_by_labels(docker, &[(LABEL_SCOPE, scope.as_str())])
        .await
        .map_err(|e| format!("listing containers: {}", chain(&e)))?;
    for c in containers {
        let id = c.id.unwrap_or_default();
        let labels = c.labels.unwrap_or_default();
        let kind = labels.get(LABEL_KIND).map_or("unlabelled", String::as_str);
        if kind == KIND_INSTANCE || inventory.pool_containers.contains(&id) {
            continue;
        }
        let short: String = id.chars().take(12).collect();
        match labels.get(LABEL_POOL_SLOT) {
            Some(slot) => objects.push(format!("container {short} (warm-pool slot {slot})")),
            None => objects.push(format!("container {short} ({kind})")),
        }
    }
    let owned_tag = |tag: &str| {
        [SNAPSHOT_REPOSITORY, INSTANCE_REPOSITORY]
            .iter()
            .any(|repo| tag.starts_with(&format!("{repo}:")))
    };
    for id in scope_images(docker, &scope).await? {
        let tags = docker
            .inspect_image(&id)
            .await
            .ok()
            .and_then(|i| i.repo_tags)
            .unwrap_or_default();
        if tags.iter().any(|t| owned_tag(t)) {
            continue;
        }
        let hex = id.strip_prefix("sha256:").unwrap_or(&id);
        objects.push(format!("image {}", &hex[..hex.len().min(12)]));
    }
    let network = format!("checkfu-{scope}");
    let mut networks = scope_networks(docker, &scope).await?;
    match docker
        .inspect_network(
            &network,
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await
    {
        Ok(_) => networks.push(network),
        Err(e) if daemon::is_not_found(&e) => {}
        Err(e) => return Err(format!("inspecting network {network}: {}", chain(&e))),
    }
    networks.sort();
    networks.dedup();
    objects.extend(networks.into_iter().map(|n| format!("network {n}")));
    objects.extend(
        conformance_state_dirs(&scope)
            .into_iter()
            .map(|d| format!("state directory {}", d.display())),
    );
    objects.sort();
    Ok(objects)
}
