//! Containers and images: create and start, inspect, remove, commit, list
//! by label.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerInspectResponse, ContainerSummary,
    EndpointIpamConfig, EndpointSettings, HostConfig, ImageSummary, Mount, MountTypeEnum,
    NetworkingConfig,
};
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use bollard::Docker;

use super::{is_not_found, DaemonError};

/// The long-running init command of sandbox containers: a busybox shell
/// that exits 0 on SIGTERM and otherwise sleeps forever.
pub const INIT_COMMAND: [&str; 3] = [
    "/bin/sh",
    "-c",
    "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done",
];

/// Processes of [`INIT_COMMAND`] (the shell and its `sleep`), added to a
/// container's pids limit so that the limit counts the workload's own
/// processes, as on the Linux provider, whose supervisors stand outside
/// the limit (decision 049).
pub const INIT_PROCESSES: i64 = 2;

/// A host directory bind-mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// Absolute host path; must exist.
    pub host_path: PathBuf,
    /// Absolute path inside the container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// What [`create_and_start`] creates.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Image reference (a tag or an image ID `sha256:<hex>`).
    pub image: String,
    /// Optional container name.
    pub name: Option<String>,
    /// Labels set on the container.
    pub labels: HashMap<String, String>,
    /// Bind mounts (mount API, so paths with `:` or `,` are safe).
    pub binds: Vec<BindMount>,
    /// User for the init process, `uid[:gid]` or a name.
    pub user: Option<String>,
    /// Working directory of the init process.
    pub working_dir: Option<String>,
    /// Environment as `KEY=value`.
    pub env: Vec<String>,
    /// Memory limit in bytes (swap set equal, so no extra swap).
    pub memory_bytes: Option<i64>,
    /// Maximum number of processes.
    pub pids_limit: Option<i64>,
    /// CPU limit in billionths of a CPU.
    pub nano_cpus: Option<i64>,
    /// Init command; [`INIT_COMMAND`] when `None`.
    pub command: Option<Vec<String>>,
    /// Network mode; `none` when `None`. Sandbox containers always use
    /// `none`; only test-support containers ([`crate::testnet`]) join a
    /// network, one the test created, and allowlist instances join the
    /// provider's egress network (`crate::egress`).
    pub network_mode: Option<String>,
    /// `/etc/hosts` entries `name:address` written by the daemon.
    pub extra_hosts: Vec<String>,
    /// A fixed IPv4 address on the `network_mode` network (test-support
    /// listeners at a chosen address); the daemon's choice when `None`.
    pub ipv4_address: Option<String>,
}

/// Creates a container from `spec` with network mode `none` (unless
/// `spec.network_mode` names another),
/// `no-new-privileges`, every capability dropped and the given limits, and
/// starts it. On a start failure the container is removed again.
///
/// Returns the container ID.
///
/// # Errors
///
/// [`DaemonError::Docker`] for any daemon failure (a missing image is a 404).
pub async fn create_and_start(
    docker: &Docker,
    spec: &ContainerSpec,
) -> Result<String, DaemonError> {
    let mounts = spec
        .binds
        .iter()
        .map(|b| Mount {
            target: Some(b.container_path.clone()),
            source: Some(b.host_path.to_string_lossy().into_owned()),
            typ: Some(MountTypeEnum::BIND),
            read_only: Some(b.read_only),
            ..Default::default()
        })
        .collect();
    let command = spec
        .command
        .clone()
        .unwrap_or_else(|| INIT_COMMAND.iter().map(|s| s.to_string()).collect());
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(command),
        entrypoint: Some(Vec::new()),
        labels: Some(spec.labels.clone()),
        user: spec.user.clone(),
        working_dir: spec.working_dir.clone(),
        env: Some(spec.env.clone()),
        network_disabled: Some(false),
        stop_signal: Some("SIGTERM".into()),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            network_mode: Some(spec.network_mode.clone().unwrap_or_else(|| "none".into())),
            security_opt: Some(vec!["no-new-privileges".into()]),
            cap_drop: Some(vec!["ALL".into()]),
            memory: spec.memory_bytes,
            memory_swap: spec.memory_bytes,
            pids_limit: spec.pids_limit,
            nano_cpus: spec.nano_cpus,
            init: Some(false),
            extra_hosts: (!spec.extra_hosts.is_empty()).then(|| spec.extra_hosts.clone()),
            ..Default::default()
        }),
        networking_config: fixed_address(spec),
        ..Default::default()
    };
    let mut opts = CreateContainerOptionsBuilder::new();
    if let Some(name) = &spec.name {
        opts = opts.name(name);
    }
    let created = docker.create_container(Some(opts.build()), body).await?;
    if let Err(e) = docker
        .start_container(
            &created.id,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
    {
        let _ = remove_container(docker, &created.id).await;
        return Err(e.into());
    }
    Ok(created.id)
}

/// The endpoint settings that pin `spec.ipv4_address` on its network.
fn fixed_address(spec: &ContainerSpec) -> Option<NetworkingConfig> {
    let (network, ip) = (spec.network_mode.as_ref()?, spec.ipv4_address.as_ref()?);
    let endpoint = EndpointSettings {
        ipam_config: Some(EndpointIpamConfig {
            ipv4_address: Some(ip.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    Some(NetworkingConfig {
        endpoints_config: Some(HashMap::from([(network.clone(), endpoint)])),
    })
}

/// Inspects a container; `Ok(None)` when it does not exist.
///
/// # Errors
///
/// [`DaemonError::Docker`] for failures other than 404.
pub async fn inspect_container(
    docker: &Docker,
    id: &str,
) -> Result<Option<ContainerInspectResponse>, DaemonError> {
    match docker
        .inspect_container(
            id,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
    {
        Ok(c) => Ok(Some(c)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The apparent size in bytes of a container's writable layer (the
/// daemon's `SizeRw`: file sizes as `stat` reports them, holes of sparse
/// files included), which is what a commit writes into the image store.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures (a missing container
/// included); [`DaemonError::Unexpected`] when the daemon reports no size.
pub async fn writable_layer_bytes(docker: &Docker, id: &str) -> Result<u64, DaemonError> {
    let opts = bollard::query_parameters::InspectContainerOptionsBuilder::default()
        .size(true)
        .build();
    let c = docker.inspect_container(id, Some(opts)).await?;
    c.size_rw
        .map(|n| n.max(0) as u64)
        .ok_or_else(|| DaemonError::Unexpected(format!("no SizeRw for container {id}")))
}

/// The daemon's data root (`DockerRootDir`), where commits land.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn data_root(docker: &Docker) -> Result<Option<String>, DaemonError> {
    Ok(docker.info().await?.docker_root_dir)
}

/// Removes a container with force (killing it) and its anonymous volumes.
/// Idempotent: a missing container is success, and a removal already in
/// progress is waited for (bounded).
///
/// # Errors
///
/// [`DaemonError::Docker`] for other failures.
pub async fn remove_container(docker: &Docker, id: &str) -> Result<(), DaemonError> {
    let opts = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    for attempt in 0..50 {
        match docker.remove_container(id, Some(opts.clone())).await {
            Ok(()) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            // 409: "removal of container ... is already in progress".
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) if attempt < 49 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Commits a container's file system (not its memory, not its bind
/// mounts) to a new image with `labels`, pausing it while committing.
/// When `repo_tag` is `Some(("repo", "tag"))` the image is tagged.
///
/// Returns the new image ID (`sha256:<hex>`).
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn commit_container(
    docker: &Docker,
    container_id: &str,
    repo_tag: Option<(&str, &str)>,
    labels: &HashMap<String, String>,
) -> Result<String, DaemonError> {
    let mut opts = CommitContainerOptionsBuilder::new()
        .container(container_id)
        .pause(true);
    if let Some((repo, tag)) = repo_tag {
        opts = opts.repo(repo).tag(tag);
    }
    let config = ContainerConfig {
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let res = docker.commit_container(opts.build(), config).await?;
    if res.id.is_empty() {
        return Err(DaemonError::Unexpected(
            "commit returned no image id".into(),
        ));
    }
    Ok(res.id)
}

/// Removes an image (by ID or reference) and its untagged parents.
/// Idempotent: a missing image is success. Without `force`, an image in
/// use by a container is refused by the daemon (409).
///
/// # Errors
///
/// [`DaemonError::Docker`] for other failures.
pub async fn remove_image(docker: &Docker, image: &str, force: bool) -> Result<(), DaemonError> {
    let opts = RemoveImageOptionsBuilder::new().force(force).build();
    match docker
        .remove_image(image, Some(opts), None::<bollard::auth::DockerCredentials>)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn label_filters(labels: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    )])
}

/// Lists every container (running or not) carrying all of `labels`.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_containers_by_labels(
    docker: &Docker,
    labels: &[(&str, &str)],
) -> Result<Vec<ContainerSummary>, DaemonError> {
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&label_filters(labels))
        .build();
    Ok(docker.list_containers(Some(opts)).await?)
}

/// Lists every container (running or not) carrying the label `key`,
/// whatever its value.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_containers_by_label_key(
    docker: &Docker,
    key: &str,
) -> Result<Vec<ContainerSummary>, DaemonError> {
    let filters = HashMap::from([("label".to_string(), vec![key.to_string()])]);
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    Ok(docker.list_containers(Some(opts)).await?)
}

/// Lists every container (running or not) carrying all of `labels` and
/// created from `image` (a tag or id).
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_containers_from_image(
    docker: &Docker,
    image: &str,
    labels: &[(&str, &str)],
) -> Result<Vec<ContainerSummary>, DaemonError> {
    let mut filters = label_filters(labels);
    filters.insert("ancestor".to_string(), vec![image.to_string()]);
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    Ok(docker.list_containers(Some(opts)).await?)
}

/// Lists every image carrying all of `labels`.
///
/// # Errors
///
/// [`DaemonError::Docker`] for daemon failures.
pub async fn list_images_by_labels(
    docker: &Docker,
    labels: &[(&str, &str)],
) -> Result<Vec<ImageSummary>, DaemonError> {
    let opts = ListImagesOptionsBuilder::new()
        .all(false)
        .filters(&label_filters(labels))
        .build();
    Ok(docker.list_images(Some(opts)).await?)
}
