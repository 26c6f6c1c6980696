//! An active instance for tests that probe it from inside.

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_linux::conformance::LinuxTarget;
use checkfu_sandbox_linux::{LinuxProvider, WorkloadUser};

/// One active instance of a fresh target whose workload user is root
/// (uid 0 without capabilities), with a read-only mount `/src` holding
/// `data.txt` and a writable `/work`.
pub struct Sandbox {
    /// The target (provider, scope, state directory).
    pub target: LinuxTarget,
    /// The instance.
    pub id: String,
}

impl Sandbox {
    /// Starts it, or `None` (a SKIP line) where the provider cannot run.
    pub async fn start(name: &str) -> Option<Sandbox> {
        if !super::available_or_skip(name) {
            return None;
        }
        let target = LinuxTarget::with_user(&super::busybox(), WorkloadUser::Root, &mut |l| {
            eprintln!("{l}")
        })
        .await
        .expect("target");
        let id = Self::activate_one(&target).await;
        Some(Sandbox { target, id })
    }

    /// Provisions, stages and activates one more instance of `target`.
    pub async fn activate_one(target: &LinuxTarget) -> String {
        let p = target.linux_provider();
        let mut request = request(target.root_image());
        request.profile.resources = Resources {
            pids: Some(64),
            memory_bytes: Some(128 << 20),
            ..Resources::default()
        };
        request.mounts = vec![
            SandboxMount {
                path: "/src".into(),
                access: MountAccess::ReadOnly,
            },
            SandboxMount {
                path: "/work".into(),
                access: MountAccess::ReadWrite,
            },
        ];
        let id = provision(p, request).await;
        p.write_file(WriteFileRequest {
            instance_id: id.clone(),
            path: "/src/data.txt".into(),
            content_base64: Bytes(b"read-only data".to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .expect("stage");
        p.activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .expect("activate");
        id
    }

    /// Runs `sh -c script` inside; (exit code, stdout, stderr).
    pub async fn sh(&self, script: &str) -> (u8, String, String) {
        self.sh_through(self.target.linux_provider(), script).await
    }

    /// Runs `sh -c script` in instance `id` of the target.
    pub async fn sh_in(&self, id: &str, script: &str) -> (u8, String, String) {
        self.run(self.target.linux_provider(), id, script).await
    }

    /// As [`Sandbox::sh`], executed through `provider` (another provider
    /// over the same state directory and scope, say).
    pub async fn sh_through(&self, provider: &LinuxProvider, script: &str) -> (u8, String, String) {
        self.run(provider, &self.id, script).await
    }

    async fn run(&self, provider: &LinuxProvider, id: &str, script: &str) -> (u8, String, String) {
        let r = provider
            .execute(sh_command(id, script, None))
            .await
            .expect("execute");
        let ExitCause::ExitCode(code) = r.exit else {
            panic!("{script}: {:?}", r.exit)
        };
        (
            code,
            String::from_utf8_lossy(&r.stdout_base64.0).into_owned(),
            String::from_utf8_lossy(&r.stderr_base64.0).into_owned(),
        )
    }

    /// A second provider over the target's state directory and scope: it
    /// did not start the instance's init, so its commands enter from the
    /// host (decision 046).
    pub fn other_provider(&self) -> LinuxProvider {
        LinuxProvider::new(checkfu_sandbox_linux::LinuxConfig {
            state_dir: self.target.state_dir().to_path_buf(),
            scope: self.target.scope().to_owned(),
            clock: std::sync::Arc::new(SystemClock),
            workload_user: WorkloadUser::Root,
        })
        .expect("a second provider")
    }

    /// Copies the host file `probe` to `/tmp/<its name>` inside, mode
    /// 755, through a command's stdin (writeFile is for instances not yet
    /// active).
    pub async fn stage(&self, probe: &std::path::Path) {
        let name = probe.file_name().unwrap().to_str().unwrap();
        let staged = self
            .target
            .linux_provider()
            .execute(sh_command(
                &self.id,
                &format!("cat > /tmp/{name} && chmod 755 /tmp/{name}"),
                Some(std::fs::read(probe).unwrap()),
            ))
            .await
            .expect("stage the probe");
        assert_eq!(staged.exit, ExitCause::ExitCode(0), "{staged:?}");
    }

    /// Closes the target and checks that nothing of its scope is left.
    pub async fn close(self) {
        let scope = self.target.scope().to_owned();
        self.target.close().await.expect("nothing left");
        assert_eq!(super::processes_in_scope(&scope), Vec::<i32>::new());
        assert!(super::scope_cgroups(&scope).is_empty());
    }
}

/// A provision request of `root_image`: ephemeral, network `none`, no
/// limits, no mounts.
pub fn request(root_image: ImageReference) -> SandboxProvisionRequest {
    let env = checkfu_sandbox_linux::envelope();
    SandboxProvisionRequest {
        provider: "linux".into(),
        placement: env.placement,
        workspace_id: "w".into(),
        session_id: "s".into(),
        run_id: "r".into(),
        attempt_id: "a".into(),
        lease_id: "l".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "p".into(),
            profile_version: 1,
            profile_digest: Digest::parse(&format!("sha256:{}", "b".repeat(64))).unwrap(),
            retention: RetentionMode::EphemeralZdr,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 600,
            resources: Resources::default(),
            packages: vec![],
        },
        platform: env.platforms[0],
        root_image,
        mounts: vec![],
        expires_at: SystemClock.now().add_seconds(3600),
    }
}

/// `sh -c script` in instance `id`, from `/`, with `stdin`; 120 s, 1 MiB
/// per stream.
pub fn sh_command(id: &str, script: &str, stdin: Option<Vec<u8>>) -> ExecuteRequest {
    ExecuteRequest {
        instance_id: id.to_owned(),
        command: SandboxCommand {
            executable: "sh".into(),
            arguments: vec!["-c".into(), script.into()],
            working_directory: "/".into(),
            environment: Default::default(),
            stdin_base64: stdin.map(Bytes),
            timeout_seconds: 120,
            output_limit_bytes: 1 << 20,
        },
    }
}

/// `tests/probes/<name>.c`, built static with `cc` (the compiler Rust
/// links with) into `dir`; its path.
pub fn c_probe(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/probes/{name}.c"));
    let out = dir.join(name);
    let built = std::process::Command::new("cc")
        .args(["-static", "-pthread", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(
        built.status.success(),
        "building the probe: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// Provisions `request` on `p`: the new instance's id.
pub async fn provision(p: &LinuxProvider, request: SandboxProvisionRequest) -> String {
    p.provision(request)
        .await
        .expect("provision")
        .value
        .instance_id
}

/// A fresh target with the default workload user, or `None` (a SKIP
/// line) where the provider cannot run.
pub async fn fresh_target(test: &str) -> Option<LinuxTarget> {
    if !super::available_or_skip(test) {
        return None;
    }
    Some(
        LinuxTarget::new(&super::busybox(), &mut |l| eprintln!("{l}"))
            .await
            .expect("target"),
    )
}

/// Activates instance `id` of `p`.
pub async fn activate(
    p: &LinuxProvider,
    id: &str,
) -> Result<Handoff<SandboxInstance>, SandboxError> {
    p.activate(ActivateRequest {
        instance_id: id.to_owned(),
    })
    .await
}

/// Runs `sh -c script` in instance `id` of `p` and asserts it printed
/// exactly `ok` (`context` names the case in the failure).
pub async fn assert_prints_ok(p: &LinuxProvider, id: &str, script: &str, context: &str) {
    let r = p
        .execute(sh_command(id, script, None))
        .await
        .unwrap_or_else(|e| panic!("{context}: execute: {e}"));
    assert_eq!(r.stdout_base64.0, b"ok\n", "{context}: {r:?}");
}
