//! An instance as a host-side provider returns it ([`instance_of`]) and the
//! provider-side admission of a provision request ([`admit`]).

use checkfu_sandbox_contract::bounds::{MAX_MOUNTS, OUTPUT_PATH};
use checkfu_sandbox_contract::{
    InstanceState, Materialization, NetworkPolicy, Operation, Platform, Requirement, SandboxError,
    SandboxInstance, SandboxProvisionRequest, Tier,
};

/// What a host-side provider is: its id, the host platform it runs, and
/// the revisions its materializations carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostProviderIdentity {
    /// The provider id requests must name.
    pub provider_id: &'static str,
    /// `materialization.provider_revision` of every instance.
    pub provider_revision: &'static str,
    /// `materialization.materialization_revision` of every instance.
    pub materialization_revision: &'static str,
}

/// The instance `id` made from `request`, in `state`: every field echoes
/// the request, the output tree is [`OUTPUT_PATH`], and the
/// materialization names the profile, the image and `identity`'s
/// revisions.
pub fn instance_of(
    identity: &HostProviderIdentity,
    request: &SandboxProvisionRequest,
    id: &str,
    state: InstanceState,
) -> SandboxInstance {
    SandboxInstance {
        instance_id: id.to_owned(),
        provider: request.provider.clone(),
        placement: request.placement,
        state,
        workspace_id: request.workspace_id.clone(),
        session_id: request.session_id.clone(),
        run_id: request.run_id.clone(),
        attempt_id: request.attempt_id.clone(),
        lease_id: request.lease_id.clone(),
        lease_epoch: request.lease_epoch,
        target: request.target,
        profile: request.profile.clone(),
        platform: request.platform,
        root_image: request.root_image.clone(),
        mounts: request.mounts.clone(),
        output_path: OUTPUT_PATH.to_owned(),
        expires_at: request.expires_at,
        materialization: Materialization {
            profile_digest: request.profile.profile_digest.clone(),
            image_reference: request.root_image.clone(),
            image_digest: request.root_image.digest(),
            provider_revision: identity.provider_revision.to_owned(),
            materialization_revision: identity.materialization_revision.to_owned(),
        },
    }
}

/// The smallest memory limit a host-side provider accepts, in bytes
/// (6 MiB): the Docker daemon refuses less at create, and every host-side
/// provider answers the same (below about 256 KiB not even a shell's
/// `execve` fits on the Linux provider).
pub const MIN_MEMORY_BYTES: u64 = 6 << 20;

/// The largest pids limit a Linux kernel holds (`PID_MAX_LIMIT` on 64-bit
/// kernels; `pids.max` refuses more), in processes.
pub const MAX_PIDS: u32 = 4_194_304;

/// The provider-side admission of `request` (the runtime checks first;
/// this refuses what a host-side provider cannot do even if called
/// directly), in this order: the provider id, the `container` tier, the
/// `host` platform, no packages, the network policy (`admit_network`, the
/// provider's own), no disk limit, a memory limit of at least
/// [`MIN_MEMORY_BYTES`], a pids limit the kernel can hold (at most
/// [`MAX_PIDS`]), at most [`MAX_MOUNTS`] mounts.
///
/// # Errors
///
/// `InvalidRequest` naming `provider`, `profile.resources.memory_bytes`
/// or `profile.resources.pids` with both values; `Unavailable` of the first requirement the request asks
/// for and the provider lacks; the error of `admit_network`.
pub fn admit(
    identity: &HostProviderIdentity,
    host: Platform,
    operation: Operation,
    request: &SandboxProvisionRequest,
    admit_network: impl FnOnce(&NetworkPolicy) -> Result<(), SandboxError>,
) -> Result<(), SandboxError> {
    let provider_id = identity.provider_id;
    if request.provider != provider_id {
        return Err(SandboxError::invalid_request(
            operation,
            "provider",
            provider_id,
            &request.provider,
        ));
    }
    if request.target != Tier::Container {
        return Err(SandboxError::unavailable(
            Requirement::Tier,
            "only container",
        ));
    }
    if request.platform != host {
        return Err(SandboxError::unavailable(
            Requirement::Platform,
            format!("only {host:?}"),
        ));
    }
    if !request.profile.packages.is_empty() {
        return Err(SandboxError::unavailable(
            Requirement::Packages,
            "no package manager is offered",
        ));
    }
    admit_network(&request.profile.network_policy)?;
    if request.profile.resources.disk_bytes.is_some() {
        return Err(SandboxError::unavailable(
            Requirement::Resources,
            "disk limits are not enforced",
        ));
    }
    if let Some(m) = request
        .profile
        .resources
        .memory_bytes
        .filter(|&m| m < MIN_MEMORY_BYTES)
    {
        return Err(SandboxError::invalid_request(
            operation,
            "profile.resources.memory_bytes",
            format!("at least {MIN_MEMORY_BYTES} (6 MiB)"),
            m.to_string(),
        ));
    }
    if let Some(n) = request.profile.resources.pids.filter(|&n| n > MAX_PIDS) {
        return Err(SandboxError::invalid_request(
            operation,
            "profile.resources.pids",
            format!("at most {MAX_PIDS} (the kernel's largest pids limit)"),
            n.to_string(),
        ));
    }
    if request.mounts.len() > usize::from(MAX_MOUNTS) {
        return Err(SandboxError::unavailable(
            Requirement::Mounts,
            format!("at most {MAX_MOUNTS} mounts"),
        ));
    }
    Ok(())
}
