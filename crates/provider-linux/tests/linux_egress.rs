//! Allowlist egress on the real kernel: each destination the allowlist must
//! deny gets its own test, then a root workload against the rules, resume,
//! and what release leaves (nothing).
//!
//! Every test starts its own listeners and receivers on the gateway
//! address of its scope's bridge (the host's address there) and sends
//! traffic only to them. Each denial comes with two controls: the
//! destination answers the host (so it is really there), and the same
//! probe from the same instance gets through once the rules are deleted
//! from its namespace (what a provider ignoring the allowlist would hand
//! out), so a probe that cannot fail proves nothing here.
//!
//! Not probed at run time: ICMP (a workload without `CAP_NET_RAW` and with
//! the namespace's default `ping_group_range` cannot send it, rules or
//! not, so no control could pass) and the link-local metadata address (the
//! test would have to give the host that address); both fall to the
//! chains' drop policy that `rules_are_read_back_and_survive_a_root_workload`
//! reads back.
//!
//! Gate: without root each test prints a `SKIP` line and returns, except
//! under `CI=true`, where it fails; where the host cannot enforce
//! allowlists the tests check that it is not offered.

// The tests read /sys and /proc by path from outside.
#![allow(clippy::disallowed_methods)]

mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use checkfu_sandbox_conformance::ConformanceTarget;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_linux::conformance::LinuxTarget;
use checkfu_sandbox_linux::WorkloadUser;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long a receiver waits for a datagram that must not arrive (a bound
/// on the wait, not a timing assertion).
const QUIET: Duration = Duration::from_secs(3);

struct Lab {
    target: LinuxTarget,
    gateway: Ipv4Addr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// A TCP listener on the gateway that sends `token` to every connection.
struct Tcp {
    port: u16,
    token: String,
}

impl Lab {
    async fn new(test: &str, user: WorkloadUser) -> Option<Lab> {
        if !common::available_or_skip(test) {
            return None;
        }
        let target = LinuxTarget::with_user(&common::busybox(), user, &mut |l| eprintln!("{l}"))
            .await
            .expect("target");
        let p = target.linux_provider();
        if !p.egress_support().is_enforced() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and allowlist egress is not enforceable: {:?}",
                p.egress_support()
            );
            assert!(!p
                .capabilities()
                .network_modes
                .contains(&NetworkMode::Allowlist));
            eprintln!("SKIP {test}: {:?}", p.egress_support());
            target.close().await.expect("close");
            return None;
        }
        let gateway = p.egress_gateway().await.expect("bridge");
        Some(Lab {
            target,
            gateway,
            tasks: Vec::new(),
        })
    }

    async fn listener(&mut self, token: &str) -> Tcp {
        let socket = tokio::net::TcpListener::bind((self.gateway, 0))
            .await
            .expect("bind");
        let port = socket.local_addr().unwrap().port();
        let sent = token.to_owned();
        self.tasks.push(tokio::spawn(async move {
            while let Ok((mut c, _)) = socket.accept().await {
                let _ = c.write_all(sent.as_bytes()).await;
                let _ = c.shutdown().await;
            }
        }));
        Tcp {
            port,
            token: token.to_owned(),
        }
    }

    /// What the host reads from `port` on the gateway (the control).
    async fn host_dial(&self, port: u16) -> String {
        let mut c = tokio::net::TcpStream::connect((self.gateway, port))
            .await
            .expect("host dial");
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.expect("read");
        String::from_utf8_lossy(&got).into_owned()
    }

    fn provider(&self) -> &checkfu_sandbox_linux::LinuxProvider {
        self.target.linux_provider()
    }

    fn request(
        &self,
        retention: RetentionMode,
        destinations: &[(String, u16)],
    ) -> SandboxProvisionRequest {
        let mut r = common::sandbox::request(self.target.root_image());
        r.profile.profile_digest = Digest::parse(&format!("sha256:{}", "c".repeat(64))).unwrap();
        r.profile.retention = retention;
        r.profile.network_policy = NetworkPolicy::Allowlist {
            destinations: destinations
                .iter()
                .map(|(host, port)| NetworkDestination {
                    host: host.clone(),
                    port: *port,
                })
                .collect(),
        };
        r
    }

    /// An active instance allowing TCP to each `port` on the gateway.
    async fn active(&self, retention: RetentionMode, ports: &[u16]) -> String {
        let dests: Vec<(String, u16)> = ports
            .iter()
            .map(|p| (self.gateway.to_string(), *p))
            .collect();
        let p = self.provider();
        let id = p
            .provision(self.request(retention, &dests))
            .await
            .expect("provision")
            .value
            .instance_id;
        p.activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .expect("activate");
        id
    }

    /// `sh -c script` inside; (exit code, stdout).
    async fn sh(&self, id: &str, script: &str) -> (u8, String) {
        let r = self
            .provider()
            .execute(ExecuteRequest {
                instance_id: id.to_owned(),
                command: SandboxCommand {
                    executable: "sh".into(),
                    arguments: vec!["-c".into(), script.into()],
                    working_directory: "/".into(),
                    environment: Default::default(),
                    stdin_base64: None,
                    timeout_seconds: 30,
                    output_limit_bytes: 1 << 20,
                },
            })
            .await
            .expect("execute");
        let ExitCause::ExitCode(code) = r.exit else {
            panic!("{script}: {:?}", r.exit)
        };
        (
            code,
            String::from_utf8_lossy(&r.stdout_base64.0).into_owned(),
        )
    }

    /// What the workload reads dialling `port` on the gateway.
    async fn dial(&self, id: &str, port: u16) -> String {
        self.sh(id, &format!("nc -w 3 {} {port} 2>/dev/null", self.gateway))
            .await
            .1
    }

    /// Deletes the allowlist table from the instance's namespace, from the
    /// host: what a provider ignoring the allowlist would hand out.
    fn drop_rules(&self, id: &str) {
        let pid = self.provider().init_pid(id).expect("init");
        let out = std::process::Command::new("nsenter")
            .args([&format!("--target={pid}"), "--net", "--"])
            .args(["nft", "delete", "table", "inet", "checkfu_egress"])
            .output()
            .expect("nsenter");
        assert!(out.status.success(), "{out:?}");
    }

    async fn release(&self, id: &str) {
        self.provider()
            .release(ReleaseRequest {
                instance_id: id.to_owned(),
                snapshot_expires_at: None,
            })
            .await
            .expect("release");
    }

    /// Closes the target and checks that nothing of the scope is left.
    async fn close(self) {
        for t in &self.tasks {
            t.abort();
        }
        let scope = self.target.scope().to_owned();
        self.target.close().await.expect("nothing left");
        assert_eq!(common::scope_links(&scope), Vec::<String>::new());
        assert_eq!(common::processes_in_scope(&scope), Vec::<i32>::new());
        assert!(common::scope_cgroups(&scope).is_empty());
    }
}

/// A UDP receiver on the gateway: whether a datagram containing a token
/// arrives.
struct Udp(UdpSocket);

impl Udp {
    fn bind(addr: SocketAddr) -> Udp {
        let s = UdpSocket::bind(addr).expect("bind udp");
        s.set_read_timeout(Some(QUIET)).unwrap();
        Udp(s)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    /// Waits up to [`QUIET`] for a datagram containing `token`.
    fn saw(&self, token: &str) -> bool {
        let mut buf = [0u8; 2048];
        let deadline = std::time::Instant::now() + QUIET;
        while std::time::Instant::now() < deadline {
            match self.0.recv_from(&mut buf) {
                Ok((n, _)) => {
                    if buf[..n].windows(token.len()).any(|w| w == token.as_bytes()) {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_to_an_unlisted_port_is_denied() {
    let Some(mut lab) = Lab::new("tcp_to_an_unlisted_port_is_denied", WorkloadUser::Checkfu).await
    else {
        return;
    };
    let allowed = lab.listener("token-allowed").await;
    let other = lab.listener("token-other").await;
    assert_eq!(
        lab.host_dial(other.port).await,
        other.token,
        "control: host"
    );
    let id = lab
        .active(RetentionMode::EphemeralZdr, &[allowed.port])
        .await;
    assert_eq!(lab.dial(&id, allowed.port).await, allowed.token);
    assert!(!lab.dial(&id, other.port).await.contains(&other.token));
    lab.drop_rules(&id);
    assert_eq!(
        lab.dial(&id, other.port).await,
        other.token,
        "control: without the rules the instance reaches the other port"
    );
    lab.release(&id).await;
    lab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_and_dns_are_denied_even_to_the_listed_host() {
    let Some(mut lab) = Lab::new(
        "udp_and_dns_are_denied_even_to_the_listed_host",
        WorkloadUser::Checkfu,
    )
    .await
    else {
        return;
    };
    let allowed = lab.listener("token-allowed").await;
    // A datagram receiver on the listed TCP port, and a resolver's port.
    let same = Udp::bind(SocketAddr::new(lab.gateway.into(), allowed.port));
    let dns = Udp::bind(SocketAddr::new(lab.gateway.into(), 53));
    let host = UdpSocket::bind((lab.gateway, 0)).unwrap();
    host.send_to(b"control-udp", (lab.gateway, same.port()))
        .unwrap();
    assert!(same.saw("control-udp"), "control: the receiver is there");
    let id = lab
        .active(RetentionMode::EphemeralZdr, &[allowed.port])
        .await;
    assert_eq!(lab.dial(&id, allowed.port).await, allowed.token);
    let gw = lab.gateway;
    let tftp = |token: &str| {
        format!(
            "tftp -g -r {token} -l /dev/null {gw} {} >/dev/null 2>&1",
            allowed.port
        )
    };
    let lookup = |token: &str| format!("nslookup {token}.test {gw} >/dev/null 2>&1");
    lab.sh(&id, &tftp("sandboxudp")).await;
    assert!(
        !same.saw("sandboxudp"),
        "UDP to the listed TCP port arrived"
    );
    lab.sh(&id, &lookup("sandboxdns")).await;
    assert!(!dns.saw("sandboxdns"), "a DNS query arrived");
    lab.drop_rules(&id);
    lab.sh(&id, &tftp("openudp")).await;
    assert!(
        same.saw("openudp"),
        "control: UDP arrives without the rules"
    );
    lab.sh(&id, &lookup("opendns")).await;
    assert!(dns.saw("opendns"), "control: DNS arrives without the rules");
    lab.release(&id).await;
    lab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_read_back_and_survive_a_root_workload() {
    let Some(mut lab) = Lab::new(
        "rules_are_read_back_and_survive_a_root_workload",
        WorkloadUser::Root,
    )
    .await
    else {
        return;
    };
    let allowed = lab.listener("token-allowed").await;
    let other = lab.listener("token-other").await;
    let id = lab
        .active(RetentionMode::EphemeralZdr, &[allowed.port])
        .await;
    let before = lab.provider().egress_rules(&id).await.expect("rules");
    assert_eq!(before.matches("policy drop;").count(), 2, "{before}");
    assert!(
        before.contains(&format!(
            "ip daddr {} tcp dport {} accept",
            lab.gateway, allowed.port
        )),
        "{before}"
    );
    // uid 0 inside without CAP_NET_ADMIN: no link, address or route change.
    for script in [
        "ip link set eth0 down",
        "ip addr add 100.64.0.9/32 dev eth0",
        "ip route del default",
        "ip link add x type dummy",
    ] {
        let (code, _) = lab.sh(&id, &format!("{script} 2>/dev/null")).await;
        assert_ne!(code, 0, "{script} succeeded as root inside");
    }
    let (_, hosts) = lab.sh(&id, "cat /etc/hosts").await;
    assert!(hosts.starts_with("127.0.0.1\tlocalhost\n"), "{hosts}");
    assert_eq!(lab.provider().egress_rules(&id).await.unwrap(), before);
    assert_eq!(lab.dial(&id, allowed.port).await, allowed.token);
    assert!(!lab.dial(&id, other.port).await.contains(&other.token));
    lab.release(&id).await;
    lab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_instance_gets_its_rules_again_and_release_leaves_no_link() {
    let Some(mut lab) = Lab::new(
        "a_resumed_instance_gets_its_rules_again_and_release_leaves_no_link",
        WorkloadUser::Checkfu,
    )
    .await
    else {
        return;
    };
    let allowed = lab.listener("token-allowed").await;
    let other = lab.listener("token-other").await;
    let id = lab.active(RetentionMode::Durable, &[allowed.port]).await;
    let scope = lab.target.scope().to_owned();
    assert_eq!(
        common::scope_links(&scope).len(),
        2,
        "the bridge and one host end"
    );
    let p = lab.provider().clone();
    let released = p
        .release(ReleaseRequest {
            instance_id: id.clone(),
            snapshot_expires_at: Some(SystemClock.now().add_seconds(3600)),
        })
        .await
        .expect("release")
        .value;
    let ReleaseDisposition::Released { snapshot } = released else {
        panic!("{released:?}")
    };
    // The last allowlist instance took the bridge with it.
    assert_eq!(common::scope_links(&scope), Vec::<String>::new());
    let resumed = p
        .resume(ResumeRequest {
            request: lab.request(
                RetentionMode::Durable,
                &[(lab.gateway.to_string(), allowed.port)],
            ),
            snapshot,
        })
        .await
        .expect("resume")
        .value
        .instance_id;
    assert_eq!(lab.dial(&resumed, allowed.port).await, allowed.token);
    assert!(!lab.dial(&resumed, other.port).await.contains(&other.token));
    p.destroy(DestroyRequest {
        instance_id: resumed,
    })
    .await
    .expect("destroy");
    assert_eq!(common::scope_links(&scope), Vec::<String>::new());
    lab.close().await;
}
