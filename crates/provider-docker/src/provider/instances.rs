//! Instances: admission, host directories, the container, destruction.

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::instance::{self, HostProviderIdentity};
use checkfu_sandbox_hostfs::instance_dirs::{self, DestroyTarget};

use super::{
    envelope::host_platform,
    errors::{chain, daemon_error, provider_error},
    inner::{Inner, INSTANCE_PREFIX, MATERIALIZATION_REVISION, PROVIDER_ID, PROVIDER_REVISION},
    labels::{
        container_name, instance_tag, KIND_INSTANCE, LABEL_INSTANCE_ID, LABEL_KIND, LABEL_SCOPE,
    },
};
use crate::daemon;
use crate::fixture::{self, CHECKFU_UID};
use crate::store::{self, InstanceRecord};

/// What this provider is, for the shared instance and admission code.
pub(super) const IDENTITY: HostProviderIdentity = HostProviderIdentity {
    provider_id: PROVIDER_ID,
    provider_revision: PROVIDER_REVISION,
    materialization_revision: MATERIALIZATION_REVISION,
};

/// The instance `id` of `request` in `state`.
pub(super) fn instance_of(
    request: &SandboxProvisionRequest,
    id: &str,
    state: InstanceState,
) -> SandboxInstance {
    instance::instance_of(&IDENTITY, request, id, state)
}

impl Inner {
    /// The provider-side admission of a request (the runtime checks first;
    /// this refuses what this provider cannot do even if called directly).
    pub(super) fn admit(
        &self,
        operation: Operation,
        request: &SandboxProvisionRequest,
    ) -> Result<(), SandboxError> {
        instance::admit(&IDENTITY, host_platform(), operation, request, |policy| {
            self.admit_network(policy)
        })
    }

    pub(super) async fn resolve_root(
        &self,
        request: &SandboxProvisionRequest,
    ) -> Result<String, SandboxError> {
        let reference = request.root_image.as_str();
        match fixture::resolve_image(&self.docker, reference).await {
            Ok(Some(_)) => Ok(format!("sha256:{}", request.root_image.digest().hex())),
            Ok(None) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("root image {reference} is not present at the local daemon"),
            )),
            Err(fixture::FixtureError::Docker(e)) => Err(provider_error(
                op::PROVISION,
                format!("resolving {reference}: {}", chain(&e)),
            )),
            Err(e) => Err(SandboxError::unavailable(
                Requirement::BaseImage,
                format!("root image {reference}: {}", chain(&e)),
            )),
        }
    }

    /// Creates the host directories of a fresh instance (mounts and output
    /// tree), with owners, and the mount points of nested mounts.
    pub(super) fn prepare_dirs(
        &self,
        id: &str,
        request: &SandboxProvisionRequest,
    ) -> Result<(), String> {
        instance_dirs::prepare_dirs(&self.layout, id, request)
    }

    pub(super) fn prepare_mount_points(
        &self,
        id: &str,
        request: &SandboxProvisionRequest,
    ) -> Result<(), String> {
        instance_dirs::prepare_mount_points(&self.layout, id, request)
    }

    /// What the container of `request` is created from: the host
    /// directories of `dir_id` (an instance or a pool slot) bound at the
    /// mount paths and the output tree, the workload user, and the
    /// profile's limits.
    pub(super) fn container_spec(
        &self,
        dir_id: &str,
        request: &SandboxProvisionRequest,
        image: &str,
        labels: std::collections::HashMap<String, String>,
    ) -> daemon::ContainerSpec {
        let mut binds: Vec<daemon::BindMount> = request
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| daemon::BindMount {
                host_path: self.layout.mount_dir(dir_id, i),
                container_path: m.path.clone(),
                read_only: m.access == MountAccess::ReadOnly,
            })
            .collect();
        binds.push(daemon::BindMount {
            host_path: self.layout.outputs_dir(dir_id),
            container_path: OUTPUT_PATH.to_owned(),
            read_only: false,
        });
        let res = &request.profile.resources;
        daemon::ContainerSpec {
            image: image.to_owned(),
            name: Some(container_name(dir_id)),
            labels,
            binds,
            user: Some(format!("{CHECKFU_UID}:{CHECKFU_UID}")),
            working_dir: Some("/".into()),
            env: Vec::new(),
            memory_bytes: res
                .memory_bytes
                .map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
            // At most the kernel's largest limit, which admission holds
            // the request to: the keeper's two come out of a limit that
            // large, which no host reaches.
            pids_limit: res.pids.map(|n| {
                (i64::from(n) + daemon::INIT_PROCESSES)
                    .min(i64::from(checkfu_sandbox_hostfs::instance::MAX_PIDS))
            }),
            nano_cpus: res.cpu_millis.map(|c| i64::from(c) * 1_000_000),
            command: None,
            network_mode: None,
            extra_hosts: Vec::new(),
            ipv4_address: None,
        }
    }

    /// Creates and starts the container of an instance. An allowlist
    /// instance joins the egress network with its resolved names, and its
    /// rules are loaded before the instance is handed out
    /// ([`crate::egress`]); such an instance is never pooled.
    pub(super) async fn start_container(
        &self,
        operation: Operation,
        rec: &InstanceRecord,
    ) -> Result<(), SandboxError> {
        let spec = self.container_spec(
            &rec.instance_id,
            &rec.request,
            &rec.image,
            self.instance_labels(rec),
        );
        let plan = self
            .egress_plan(operation, &rec.request.profile.network_policy)
            .await?;
        let spec = match &plan {
            Some(p) => daemon::ContainerSpec {
                network_mode: Some(self.egress.network.clone()),
                extra_hosts: p.hosts.clone(),
                ..spec
            },
            None => spec,
        };
        let cid = daemon::create_and_start(&self.docker, &spec)
            .await
            .map_err(|e| daemon_error(operation, &e))?;
        if let Some(p) = plan {
            if let Err(e) = self.enforce_egress(operation, &cid, &p).await {
                let _ = daemon::remove_container(&self.docker, &cid).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Destroys an instance known (from a fresh inventory) to have no
    /// container and no image: only its state directory.
    pub(super) async fn destroy_instance_record(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        if !store::is_id(INSTANCE_PREFIX, id) {
            return Ok(());
        }
        instance_dirs::remove_instance_dir(&self.layout, operation, id).await
    }

    /// Removes every trace of an instance: its open process, container,
    /// owned image tag and directory. Idempotent; unknown ids succeed.
    pub(super) async fn destroy_instance(
        &self,
        operation: Operation,
        id: &str,
    ) -> Result<(), SandboxError> {
        let target = instance_dirs::destroy_target(
            &self.layout,
            INSTANCE_PREFIX,
            &self.processes,
            id,
            |r: &InstanceRecord| r.scope == self.scope,
        );
        let DestroyTarget::Ours(rec) = target else {
            return Ok(());
        };
        self.host_exec.forget(id);
        // The container (kill and remove are one forced call), and any
        // container of this scope labelled with the id under another name,
        // at once; then the per-instance image tag, which a container still
        // being removed would hold. A pooled instance's container is the
        // claimed slot's: activation started none under the instance's
        // name, and any such container would carry the id's label (strays).
        let pooled = rec.as_ref().and_then(|r| r.pool_container.clone());
        let own = async {
            let own = pooled.clone().unwrap_or_else(|| container_name(id));
            daemon::remove_container(&self.docker, &own).await
        };
        let strays = async {
            let labels = [
                (LABEL_SCOPE, self.scope.as_str()),
                (LABEL_KIND, KIND_INSTANCE),
                (LABEL_INSTANCE_ID, id),
            ];
            for c in daemon::list_containers_by_labels(&self.docker, &labels).await? {
                if let Some(cid) = c.id {
                    daemon::remove_container(&self.docker, &cid).await?;
                }
            }
            Ok::<(), daemon::DaemonError>(())
        };
        let (own, strays) = tokio::join!(own, strays);
        own.and(strays).map_err(|e| daemon_error(operation, &e))?;
        // A record that owns no image needs no image call.
        if rec.as_ref().is_none_or(|r| r.owned_image.is_some()) {
            daemon::remove_image(&self.docker, &instance_tag(id), false)
                .await
                .map_err(|e| daemon_error(operation, &e))?;
        }
        instance_dirs::remove_instance_dir(&self.layout, operation, id).await
    }
}
