//! A [`DockerProvider`] with a unique scope and state directory behind the
//! runtime's [`Adapter`], swept and leak-checked on drop.

use std::path::PathBuf;
use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::egress::{EgressConfig, EgressSupport};
use checkfu_sandbox_docker::{daemon, DockerConfig, DockerProvider};
use checkfu_sandbox_docker::{host_platform, labels::LABEL_SCOPE};
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};
use sha2::Digest as _;

/// A provider under test.
pub struct ProviderEnv {
    pub provider: DockerProvider,
    pub adapter: Adapter,
    pub root_image: ImageReference,
    pub scope: String,
    pub state_dir: PathBuf,
}

impl ProviderEnv {
    /// Connects (or skips, see [`super::docker_or_skip`]) and builds the
    /// fixture; the provider keeps no warm pool.
    pub async fn new(test: &str) -> Option<ProviderEnv> {
        Self::with_pool(test, 0).await
    }

    /// As [`ProviderEnv::new`], with a warm pool of `pool_size` per shape.
    pub async fn with_pool(test: &str, pool_size: usize) -> Option<ProviderEnv> {
        let docker = super::docker_or_skip(test).await?;
        Some(Self::with_egress(test, docker, EgressConfig::default(), pool_size).await)
    }

    /// A provider whose allowlist instances join `egress.network` (the
    /// host's egress support probed as in production), with a warm pool of
    /// `pool_size` per shape.
    pub async fn with_egress(
        test: &str,
        docker: checkfu_sandbox_docker::Docker,
        egress: EgressConfig,
        pool_size: usize,
    ) -> ProviderEnv {
        Self::with_exec_path(test, docker, egress, pool_size, None).await
    }

    /// As [`ProviderEnv::with_egress`], with the exec path chosen (`None`:
    /// `CHECKFU_DOCKER_EXEC`, else the host path).
    pub async fn with_exec_path(
        test: &str,
        docker: checkfu_sandbox_docker::Docker,
        egress: EgressConfig,
        pool_size: usize,
        exec_path: Option<checkfu_sandbox_docker::ExecPath>,
    ) -> ProviderEnv {
        let pinned = super::fixture_ref(&docker).await;
        let (scope, state_dir) = checkfu_test_support::docker::scope_for(test);
        let provider = DockerProvider::with_egress(
            docker,
            DockerConfig {
                state_dir: state_dir.clone(),
                scope: scope.clone(),
                clock: Arc::new(SystemClock),
                pool_size,
                exec_path,
            },
            egress,
            EgressSupport::probe_cached(),
        )
        .expect("provider");
        let mut runtime = SandboxRuntime::new(Arc::new(SystemClock));
        runtime.register(Arc::new(provider.clone()));
        let adapter = runtime.adapter("docker").expect("adapter");
        ProviderEnv {
            provider,
            adapter,
            root_image: ImageReference::parse(&pinned).unwrap(),
            scope,
            state_dir,
        }
    }

    pub fn profile(&self, retention: RetentionMode) -> SandboxProfile {
        SandboxProfile {
            profile_id: "provider-test".into(),
            profile_version: 3,
            profile_digest: Digest::from_sha256_bytes(sha2::Sha256::digest(b"profile").into()),
            retention,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 120,
            resources: Resources {
                cpu_millis: Some(1000),
                memory_bytes: Some(256 << 20),
                pids: Some(256),
                disk_bytes: None,
            },
            packages: Vec::new(),
        }
    }

    pub fn request(
        &self,
        session: &str,
        retention: RetentionMode,
        mounts: &[(&str, MountAccess)],
        expires_in_seconds: i64,
    ) -> SandboxProvisionRequest {
        SandboxProvisionRequest {
            provider: "docker".into(),
            placement: Placement::Runner,
            workspace_id: "workspace-test".into(),
            session_id: session.into(),
            run_id: "run-1".into(),
            attempt_id: "attempt-1".into(),
            lease_id: "lease-1".into(),
            lease_epoch: 7,
            target: Tier::Container,
            profile: self.profile(retention),
            platform: host_platform(),
            root_image: self.root_image.clone(),
            mounts: mounts
                .iter()
                .map(|(p, a)| SandboxMount {
                    path: (*p).into(),
                    access: *a,
                })
                .collect(),
            expires_at: Timestamp::now().add_seconds(expires_in_seconds),
        }
    }

    /// Provisions, stages `files`, activates.
    pub async fn active(
        &self,
        request: SandboxProvisionRequest,
        files: &[(&str, &[u8])],
    ) -> SandboxInstance {
        let inst = self.adapter.provision(request).await.expect("provision");
        for (path, content) in files {
            self.adapter
                .write_file(&inst.instance_id, *path, content.to_vec())
                .await
                .expect("write_file");
        }
        self.adapter
            .activate(&inst.instance_id)
            .await
            .expect("activate")
    }

    /// Runs argv with defaults (60 s, 1 MiB).
    pub async fn run(&self, id: &str, argv: &[&str]) -> SandboxCommandResult {
        self.adapter
            .execute(id, command(argv))
            .await
            .unwrap_or_else(|e| panic!("execute {argv:?}: {e}"))
    }

    /// What remains of this scope at the daemon: (containers, images).
    pub async fn leftovers(&self) -> (usize, usize) {
        let docker = self.provider.docker();
        let label = [(LABEL_SCOPE, self.scope.as_str())];
        let c = daemon::list_containers_by_labels(docker, &label)
            .await
            .unwrap();
        let i = daemon::list_images_by_labels(docker, &label).await.unwrap();
        (c.len(), i.len())
    }
}

/// A probe command: working directory `/`, 60 s, 1 MiB per stream.
pub fn command(argv: &[&str]) -> SandboxCommand {
    SandboxCommand {
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|s| s.to_string()).collect(),
        working_directory: "/".into(),
        environment: Default::default(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    }
}

impl Drop for ProviderEnv {
    fn drop(&mut self) {
        checkfu_test_support::docker::sweep_scope_on_drop(
            self.provider.clone(),
            self.scope.clone(),
            self.state_dir.clone(),
        );
    }
}
