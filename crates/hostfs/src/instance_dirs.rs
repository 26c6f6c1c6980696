//! An instance's directories in the state directory: the host directories
//! of its mounts and output tree made at provision ([`prepare_dirs`],
//! [`prepare_mount_points`]), what destroy finds there
//! ([`destroy_target`]) and the directory's removal
//! ([`remove_instance_dir`], [`remove_instance_dir_blocking`]).

use std::os::fd::AsFd as _;

use checkfu_sandbox_contained as contained;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{Operation, SandboxError, SandboxProvisionRequest};
use serde::de::DeserializeOwned;

use crate::errors::{blocking, chain, provider_error};
use crate::process::ProcessTable;
use crate::store::{self, owner_of, Home, Layout};

/// Creates the host directories of instance `id` made from `request` (its
/// mounts, under `mounts/` only when there are any, and its output tree,
/// each given to its owner, [`owner_of`]) and the mount points of nested
/// mounts. A directory that exists already is kept.
///
/// # Errors
///
/// A line naming the step that failed.
pub fn prepare_dirs(
    layout: &Layout,
    id: &str,
    request: &SandboxProvisionRequest,
) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    if !request.mounts.is_empty() {
        std::fs::create_dir_all(layout.instance_dir(id).join("mounts"))
            .map_err(|e| io("creating mounts", e))?;
    }
    let mut homes: Vec<Home> = (0..request.mounts.len()).map(Home::Mount).collect();
    homes.push(Home::Output);
    for home in homes {
        let dir = layout.home_dir(id, home);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("creating a host directory", e)),
        }
        if let Some(uid) = owner_of(request, home) {
            std::os::unix::fs::chown(&dir, Some(uid), Some(uid))
                .map_err(|e| io("chown of a host directory", e))?;
        }
    }
    prepare_mount_points(layout, id, request)
}

/// Creates, inside each parent mount's host directory of instance `id`,
/// the mount point of every mount nested in it
/// ([`store::nested_mount_points`]), without following a link, owned as
/// the parent's files are.
///
/// # Errors
///
/// A line naming the mount point that could not be made.
pub fn prepare_mount_points(
    layout: &Layout,
    id: &str,
    request: &SandboxProvisionRequest,
) -> Result<(), String> {
    for (parent, rel) in store::nested_mount_points(request) {
        let owner = owner_of(request, Home::Mount(parent));
        contained::open_root(&layout.mount_dir(id, parent))
            .and_then(|root| contained::create_dirs_beneath(root.as_fd(), &rel, owner))
            .map(drop)
            .map_err(|e| format!("mount point {}: {}", rel.display(), chain(&e)))?;
    }
    Ok(())
}

/// What destroy finds for an instance id.
#[derive(Debug)]
pub enum DestroyTarget<R> {
    /// Not an instance id of this provider, or another scope's instance
    /// under a shared state directory: nothing to destroy.
    NotOurs,
    /// This scope's instance (or an id with no record): its record when
    /// one is readable.
    Ours(Option<R>),
}

/// The instance `id` that destroy is to remove: ids not of
/// `instance_prefix`'s shape and records `ours` refuses are
/// [`DestroyTarget::NotOurs`]; otherwise the process slot of `id` in
/// `processes` is freed (its process goes with the instance) and its
/// record, if readable, is returned.
pub fn destroy_target<R: DeserializeOwned>(
    layout: &Layout,
    instance_prefix: &str,
    processes: &ProcessTable,
    id: &str,
    ours: impl FnOnce(&R) -> bool,
) -> DestroyTarget<R> {
    if !store::is_id(instance_prefix, id) {
        return DestroyTarget::NotOurs;
    }
    processes.forget(id);
    let rec = store::read_record::<R>(&layout.instance_record(id))
        .ok()
        .flatten();
    match rec {
        Some(rec) if !ours(&rec) => DestroyTarget::NotOurs,
        rec => DestroyTarget::Ours(rec),
    }
}

/// Removes the state directory of instance `id` (an absent one is
/// removed already), on the blocking pool.
///
/// # Errors
///
/// `ProviderError` of `operation` when the directory cannot be removed.
pub async fn remove_instance_dir(
    layout: &Layout,
    operation: Operation,
    id: &str,
) -> Result<(), SandboxError> {
    let (layout, id) = (layout.clone(), id.to_owned());
    blocking(op::DESTROY, move || {
        remove_instance_dir_blocking(&layout, operation, &id)
    })
    .await?
}

/// [`remove_instance_dir`] on the calling thread, for a provider that
/// removes the directory in a blocking task it runs anyway. Blocking.
///
/// # Errors
///
/// As [`remove_instance_dir`].
pub fn remove_instance_dir_blocking(
    layout: &Layout,
    operation: Operation,
    id: &str,
) -> Result<(), SandboxError> {
    match std::fs::remove_dir_all(layout.instance_dir(id)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
    .map_err(|e| provider_error(operation, format!("removing the instance directory: {e}")))
}
