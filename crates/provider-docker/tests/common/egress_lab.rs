//! An egress lab: an internal test network the test creates (IPv4 or
//! dual-stack, at a chosen subnet), token listeners on it, and a Docker
//! provider whose allowlist instances join that network. Traffic only goes
//! to the lab's own listeners and receivers; the network has no route off
//! the host, so even a broken rule set could reach nothing else.
//!
//! Dropping the lab destroys the provider's instances (and checks the
//! scope is empty), then the listeners, then the network (and checks it is
//! gone), also when the test panics.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::daemon::{self, ExecOutcome, ExecRequest};
use checkfu_sandbox_docker::egress::{self, EgressConfig, EgressSupport};
use checkfu_sandbox_docker::testnet::{self, NetworkOptions, TestListener};
use checkfu_sandbox_docker::Docker;

use super::provider_env::ProviderEnv;
use super::Cleanup;

/// The port every lab listener serves its token on.
pub const PORT: u16 = 7000;

/// A listener and the token it sends.
#[derive(Debug, Clone)]
pub struct Token {
    pub listener: TestListener,
    pub token: String,
}

/// Removes the network on drop and checks that it is gone.
struct NetworkGuard {
    name: String,
}

impl Drop for NetworkGuard {
    fn drop(&mut self) {
        let name = self.name.clone();
        let res = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let docker = daemon::connect().await.map_err(|e| e.to_string())?;
                    testnet::remove_network(&docker, &name)
                        .await
                        .map_err(|e| e.to_string())?;
                    match docker
                        .inspect_network(
                            &name,
                            None::<checkfu_sandbox_docker::bollard::query_parameters::InspectNetworkOptions>,
                        )
                        .await
                    {
                        Err(e) if daemon::is_not_found(&e) => Ok(()),
                        Ok(_) => Err(format!("network {name} left")),
                        Err(e) => Err(e.to_string()),
                    }
                })
        })
        .join()
        .expect("network sweep thread");
        if !std::thread::panicking() {
            res.expect("network removed");
        } else if let Err(e) = res {
            eprintln!("network sweep after panic: {e}");
        }
    }
}

/// The network and its listeners, before the provider exists.
pub struct LabNet {
    pub docker: Docker,
    /// `sha256:<id>` of the fixture image.
    pub image: String,
    pub test: String,
    // Field order is drop order: listeners and support containers, then
    // the network.
    cleanup: Cleanup,
    network: NetworkGuard,
}

impl LabNet {
    /// Creates the lab network (or skips, see [`super::docker_or_skip`]).
    /// Without host support for allowlist egress (nft, nsenter, root) the
    /// test is skipped the same way, and fails under `CI=true`.
    pub async fn new(test: &str, options: NetworkOptions) -> Option<LabNet> {
        let docker = super::docker_or_skip(test).await?;
        if let EgressSupport::Unavailable(why) = EgressSupport::probe_cached() {
            super::skip_or_fail(test, &format!("allowlist egress unavailable: {why}"))?;
        }
        let pinned = super::fixture_ref(&docker).await;
        let image = format!("sha256:{}", pinned.split_once("@sha256:").unwrap().1);
        let cleanup = Cleanup::new(test);
        let name = format!(
            "checkfu-lab-{}",
            &checkfu_sandbox_docker::fixture::hex(&<sha2::Sha256 as sha2::Digest>::digest(
                cleanup.value.as_bytes()
            ))[..16]
        );
        testnet::create_network_with(&docker, &name, &cleanup.labels(), &options)
            .await
            .expect("lab network");
        Some(LabNet {
            docker,
            image,
            test: test.to_owned(),
            cleanup,
            network: NetworkGuard { name },
        })
    }

    /// The network's name.
    pub fn network(&self) -> &str {
        &self.network.name
    }

    /// Starts a token listener on [`PORT`] (at `ipv4` when given).
    pub async fn listener(&self, ipv4: Option<&str>) -> Token {
        let token = format!(
            "lab-token-{}",
            &checkfu_sandbox_docker::fixture::hex(&<sha2::Sha256 as sha2::Digest>::digest(
                format!("{}-{:?}-{}", self.cleanup.value, ipv4, unique_counter()).as_bytes()
            ))[..12]
        );
        let listener = testnet::start_listener_at(
            &self.docker,
            &self.image,
            self.network(),
            &self.cleanup.labels(),
            PORT,
            &token,
            ipv4,
        )
        .await
        .expect("listener");
        Token { listener, token }
    }

    /// Runs `argv` from a fresh container on the lab network, with no
    /// rules: the control vantage point. Returns stdout.
    pub async fn control(&self, argv: &[&str]) -> Vec<u8> {
        testnet::run_support(
            &self.docker,
            &self.image,
            self.network(),
            &self.cleanup.labels(),
            argv,
            Duration::from_secs(40),
        )
        .await
        .unwrap_or_else(|e| panic!("control {argv:?}: {e}"))
    }

    /// Dials `host:PORT` from the control vantage point.
    pub async fn control_dial(&self, host: &str) -> String {
        text(
            &self
                .control(&["nc", "-w", "3", host, &PORT.to_string()])
                .await,
        )
    }

    /// The lab with a provider whose allowlist instances join the lab
    /// network and resolve `static_hosts` themselves.
    pub async fn with_provider(self, static_hosts: &[(&str, &str)]) -> EgressLab {
        let mut hosts: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for (name, ip) in static_hosts {
            hosts
                .entry((*name).to_owned())
                .or_default()
                .push(ip.parse().unwrap());
        }
        let env = ProviderEnv::with_egress(
            &self.test,
            self.docker.clone(),
            EgressConfig {
                network: self.network().to_owned(),
                static_hosts: hosts,
            },
            0,
        )
        .await;
        assert!(
            env.provider.egress_support().is_enforced(),
            "this machine kind enforces allowlist egress: {:?}",
            env.provider.egress_support()
        );
        EgressLab { env, net: self }
    }
}

fn unique_counter() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// Lossy text of bytes.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The lab with its provider.
pub struct EgressLab {
    // Field order is drop order: the provider's instances first.
    pub env: ProviderEnv,
    pub net: LabNet,
}

impl EgressLab {
    /// An allowlist profile of `destinations` with `retention`.
    pub fn request(
        &self,
        session: &str,
        retention: RetentionMode,
        destinations: &[(&str, u16)],
    ) -> SandboxProvisionRequest {
        let mut r = self.env.request(session, retention, &[], 3600);
        r.profile.network_policy = NetworkPolicy::Allowlist {
            destinations: destinations
                .iter()
                .map(|(host, port)| NetworkDestination {
                    host: (*host).to_owned(),
                    port: *port,
                })
                .collect(),
        };
        r
    }

    /// Provisions and activates an ephemeral instance allowing
    /// `destinations`, through the runtime.
    pub async fn active(&self, destinations: &[(&str, u16)]) -> SandboxInstance {
        let r = self.request("session-egress", RetentionMode::EphemeralZdr, destinations);
        self.env.active(r, &[]).await
    }

    /// What the workload gets dialling `host:PORT` (`nc -w 3`).
    pub async fn dial(&self, id: &str, host: &str) -> String {
        let r = self
            .env
            .run(id, &["nc", "-w", "3", host, &PORT.to_string()])
            .await;
        text(&r.stdout_base64.0)
    }

    /// The host pid of the instance container's init.
    pub async fn pid(&self, id: &str) -> u32 {
        let info = daemon::inspect_container(&self.net.docker, &format!("checkfu-{id}"))
            .await
            .expect("inspect")
            .expect("the instance's container");
        u32::try_from(info.state.and_then(|s| s.pid).expect("pid")).unwrap()
    }

    /// `nsenter` and `nft` of the provider's probe.
    pub fn tools(&self) -> (std::path::PathBuf, std::path::PathBuf) {
        match self.env.provider.egress_support() {
            EgressSupport::Enforced { nsenter, nft } => (nsenter.clone(), nft.clone()),
            EgressSupport::Unavailable(why) => panic!("egress unavailable: {why}"),
        }
    }

    /// The allowlist table as `nft list table` prints it in the instance's
    /// namespace.
    pub async fn rules(&self, id: &str) -> String {
        let (nsenter, nft) = self.tools();
        egress::list(&nsenter, &nft, self.pid(id).await)
            .await
            .expect("list rules")
    }

    /// Deletes the allowlist table from the instance's namespace with the
    /// host's privileges: the instance is then what a provider that ignored
    /// the allowlist would hand out. Used to show that a probe fails for
    /// such a provider.
    pub async fn drop_rules(&self, id: &str) {
        let (nsenter, nft) = self.tools();
        let pid = self.pid(id).await;
        let out = tokio::process::Command::new(nsenter)
            .arg(format!("--target={pid}"))
            .arg("--net")
            .arg("--")
            .arg(nft)
            .args(["delete", "table", "inet", "checkfu_egress"])
            .output()
            .await
            .expect("nsenter");
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    /// Runs `argv` in the instance's container as uid 0 (the workload at
    /// its most privileged), returning (exit code, stdout, stderr).
    pub async fn as_root(&self, id: &str, argv: &[&str]) -> (i64, String, String) {
        let mut req = ExecRequest::new(argv);
        req.user = Some("0:0".into());
        req.timeout = Duration::from_secs(30);
        let report = daemon::exec_bounded(&self.net.docker, &format!("checkfu-{id}"), &req)
            .await
            .expect("exec as root");
        match report.outcome {
            ExecOutcome::Exited {
                code,
                stdout,
                stderr,
                ..
            } => (code, text(&stdout), text(&stderr)),
            other => panic!("{argv:?} as root ended {other:?}"),
        }
    }

    /// Releases (destroys) an ephemeral instance.
    pub async fn release(&self, id: &str) {
        self.env.adapter.release(id, None).await.expect("release");
    }
}

/// A UDP receiver bound inside a container's network namespace (a listener
/// the test starts in a container it created): the socket is created on a
/// thread that entered the namespace, then read from anywhere.
pub struct UdpReceiver {
    socket: UdpSocket,
}

impl UdpReceiver {
    /// Binds `addr` in the network namespace of process `pid`.
    pub fn bind_in(pid: u32, addr: SocketAddr) -> UdpReceiver {
        let socket = std::thread::spawn(move || {
            use std::os::fd::AsFd as _;
            let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).expect("netns");
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .expect("setns");
            UdpSocket::bind(addr).expect("bind in the namespace")
        })
        .join()
        .expect("setns thread");
        socket
            .set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        UdpReceiver { socket }
    }

    /// Whether a datagram containing `needle` arrives within `wait` (reads
    /// every datagram until then; a bound, not a timing assertion).
    pub fn saw(&self, needle: &str, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline {
            if let Ok((n, _)) = self.socket.recv_from(&mut buf) {
                if buf[..n]
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes())
                {
                    return true;
                }
            }
        }
        false
    }
}

/// The pid of a lab listener's container.
pub async fn listener_pid(docker: &Docker, t: &Token) -> u32 {
    let info = daemon::inspect_container(docker, &t.listener.container_id)
        .await
        .expect("inspect")
        .expect("listener");
    u32::try_from(info.state.and_then(|s| s.pid).expect("pid")).unwrap()
}
