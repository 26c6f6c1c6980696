//! Allowlist egress on the real daemon: each destination the allowlist
//! must deny gets its own test, then a root workload, resume, the honest
//! envelope without support, and cleanup.
//!
//! Every test creates its own internal network (no route off the host),
//! starts its own listeners on it, and sends traffic only to them. Each
//! denial comes with two controls: the same destination answers from a
//! container on the same network without rules (so the listener is
//! really there), and the same probe from the same instance gets through
//! once the rules are deleted (what a provider ignoring the allowlist
//! would hand out), so a probe that cannot fail proves nothing here.
//!
//! Gate: without a daemon each test prints a `SKIP` line and returns,
//! except under `CI=true`, where it fails.

// Tests read /proc and the temporary directory by path from outside.
#![allow(clippy::disallowed_methods)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::egress::{EgressConfig, EgressSupport};
use checkfu_sandbox_docker::testnet::{self, NetworkOptions};
use checkfu_sandbox_docker::{daemon, DockerConfig, DockerProvider};
use checkfu_sandbox_runtime::SandboxRuntime;
use common::egress_lab::{listener_pid, text, LabNet, UdpReceiver, PORT};

/// How long a receiver waits for a datagram that must not arrive (a
/// bound on the wait, not a timing assertion).
const QUIET: Duration = Duration::from_secs(4);

/// busybox `tftp` reading file `token` from `ip:port`: one UDP datagram
/// carrying the token (the fixture's `nc` has no UDP).
fn tftp<'a>(ip: &'a str, token: &'a str, port: &'a str) -> [&'a str; 8] {
    ["tftp", "-g", "-r", token, "-l", "/dev/null", ip, port]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_to_a_non_listed_port_is_denied() {
    let Some(net) = LabNet::new("egress_udp", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let pid = listener_pid(&net.docker, &a).await;
    let ip = a.listener.ip.clone();
    // UDP receivers on the listed host: a port not on the list, and the
    // listed TCP port (destinations are TCP only).
    let other = UdpReceiver::bind_in(pid, SocketAddr::new(ip.parse().unwrap(), PORT + 1));
    let same = UdpReceiver::bind_in(pid, SocketAddr::new(ip.parse().unwrap(), PORT));
    let (listed, unlisted) = (PORT.to_string(), (PORT + 1).to_string());
    net.control(&tftp(&ip, "control-udp", &unlisted)).await;
    assert!(
        other.saw("control-udp", QUIET),
        "control: a datagram from the lab network reaches the receiver"
    );
    let lab = net.with_provider(&[]).await;
    let inst = lab.active(&[(&ip, PORT)]).await;
    let id = inst.instance_id.as_str();
    assert_eq!(
        lab.dial(id, &ip).await,
        a.token,
        "the listed TCP endpoint answers"
    );
    for (receiver, port, token) in [
        (&other, &unlisted, "sandbox-udp"),
        (&same, &listed, "sandbox-udp-listed"),
    ] {
        lab.env.run(id, &tftp(&ip, token, port)).await;
        assert!(
            !receiver.saw(token, QUIET),
            "UDP from the instance to {ip}:{port} arrived"
        );
    }
    lab.drop_rules(id).await;
    lab.env
        .run(id, &tftp(&ip, "sandbox-udp-open", &unlisted))
        .await;
    assert!(
        other.saw("sandbox-udp-open", QUIET),
        "without the rules the same datagram arrives: the probe can fail"
    );
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_is_denied() {
    let options = NetworkOptions {
        ipv4_subnet: None,
        ipv6_subnet: Some(format!("fd5e:c0f:{:x}::/64", std::process::id() & 0xffff)),
    };
    let Some(net) = LabNet::new("egress_ipv6", options).await else {
        return;
    };
    let a = net.listener(None).await;
    let v6 = a.listener.ipv6.clone().expect("a dual-stack listener");
    assert_eq!(net.control_dial(&v6).await, a.token, "control over IPv6");
    let lab = net.with_provider(&[]).await;
    // The same listener is listed by its IPv4 address only.
    let inst = lab.active(&[(&a.listener.ip, PORT)]).await;
    let id = inst.instance_id.as_str();
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    assert!(
        !lab.dial(id, &v6).await.contains(&a.token),
        "the listener's IPv6 address is not on the list"
    );
    lab.drop_rules(id).await;
    assert_eq!(lab.dial(id, &v6).await, a.token, "the probe can fail");
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_ip_literal_of_a_listed_names_neighbour_is_denied() {
    let Some(net) = LabNet::new("egress_literal", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let b = net.listener(None).await;
    assert_eq!(net.control_dial(&b.listener.ip).await, b.token);
    let lab = net
        .with_provider(&[("allowed.lab.test", &a.listener.ip)])
        .await;
    let inst = lab.active(&[("allowed.lab.test", PORT)]).await;
    let id = inst.instance_id.as_str();
    assert_eq!(lab.dial(id, "allowed.lab.test").await, a.token);
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    assert!(
        !lab.dial(id, &b.listener.ip).await.contains(&b.token),
        "the neighbour {} is reachable by its literal",
        b.listener.ip
    );
    lab.drop_rules(id).await;
    assert_eq!(
        lab.dial(id, &b.listener.ip).await,
        b.token,
        "the probe can fail"
    );
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_address_is_denied() {
    // A link-local network of the test's own, with a listener at the
    // metadata address.
    let options = NetworkOptions {
        ipv4_subnet: Some("169.254.169.0/24".into()),
        ipv6_subnet: None,
    };
    let Some(net) = LabNet::new("egress_metadata", options).await else {
        return;
    };
    let a = net.listener(None).await;
    let metadata = net.listener(Some("169.254.169.254")).await;
    assert_eq!(metadata.listener.ip, "169.254.169.254");
    assert_eq!(net.control_dial("169.254.169.254").await, metadata.token);
    let lab = net.with_provider(&[]).await;
    let inst = lab.active(&[(&a.listener.ip, PORT)]).await;
    let id = inst.instance_id.as_str();
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    assert!(!lab
        .dial(id, "169.254.169.254")
        .await
        .contains(&metadata.token));
    lab.drop_rules(id).await;
    assert_eq!(
        lab.dial(id, "169.254.169.254").await,
        metadata.token,
        "the probe can fail"
    );
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_not_on_the_list_is_denied() {
    let Some(net) = LabNet::new("egress_name", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let b = net.listener(None).await;
    assert_eq!(net.control_dial(&b.listener.ip).await, b.token);
    // The provider knows both names; only one is listed.
    let lab = net
        .with_provider(&[
            ("allowed.lab.test", &a.listener.ip),
            ("other.lab.test", &b.listener.ip),
        ])
        .await;
    let inst = lab.active(&[("allowed.lab.test", PORT)]).await;
    let id = inst.instance_id.as_str();
    let hosts = text(
        &lab.env
            .run(id, &["cat", "/etc/hosts"])
            .await
            .stdout_base64
            .0,
    );
    assert!(hosts.contains("allowed.lab.test"), "{hosts}");
    assert!(!hosts.contains("other.lab.test"), "{hosts}");
    assert_eq!(lab.dial(id, "allowed.lab.test").await, a.token);
    assert!(!lab.dial(id, "other.lab.test").await.contains(&b.token));
    // A workload that learns the address and names it itself (root may
    // edit /etc/hosts) is still held by the address rules.
    let (code, _, err) = lab
        .as_root(
            id,
            &[
                "sh",
                "-c",
                &format!("echo '{} other.lab.test' >> /etc/hosts", b.listener.ip),
            ],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(!lab.dial(id, "other.lab.test").await.contains(&b.token));
    lab.drop_rules(id).await;
    assert_eq!(
        lab.dial(id, "other.lab.test").await,
        b.token,
        "the probe can fail"
    );
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_to_a_non_provider_resolver_is_denied() {
    let Some(net) = LabNet::new("egress_dns", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let resolver = net.listener(None).await;
    let pid = listener_pid(&net.docker, &resolver).await;
    let dns = UdpReceiver::bind_in(
        pid,
        SocketAddr::new(resolver.listener.ip.parse().unwrap(), 53),
    );
    let rip = resolver.listener.ip.clone();
    net.control(&["nslookup", "control-dns.lab.test", &rip])
        .await;
    assert!(
        dns.saw("control-dns", QUIET),
        "control: the query reaches the resolver"
    );
    let lab = net.with_provider(&[]).await;
    let inst = lab.active(&[(&a.listener.ip, PORT)]).await;
    let id = inst.instance_id.as_str();
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    // Docker's embedded resolver answers the names of the lab network (the
    // instance's own container name: nothing is forwarded off the host).
    let name = format!("checkfu-{id}");
    let own_ip = testnet::container_ips(&lab.net.docker, &name, lab.net.network())
        .await
        .expect("instance address")
        .0;
    let embedded = text(&lab.net.control(&["nslookup", &name, "127.0.0.11"]).await);
    assert!(embedded.contains(&own_ip), "control: {embedded}");
    let mut c = common::provider_env::command(&["nslookup", "sandbox-dns.lab.test", &rip]);
    c.timeout_seconds = 40;
    lab.env.adapter.execute(id, c).await.expect("nslookup");
    assert!(
        !dns.saw("sandbox-dns", QUIET),
        "a DNS query to {rip} arrived"
    );
    let mut c = common::provider_env::command(&["nslookup", &name, "127.0.0.11"]);
    c.timeout_seconds = 40;
    let r = lab.env.adapter.execute(id, c).await.expect("nslookup");
    assert!(
        !text(&r.stdout_base64.0).contains(&own_ip),
        "Docker's embedded resolver answered: {}",
        text(&r.stdout_base64.0)
    );
    lab.drop_rules(id).await;
    lab.env
        .run(id, &["nslookup", "sandbox-dns-open.lab.test", &rip])
        .await;
    assert!(dns.saw("sandbox-dns-open", QUIET), "the probe can fail");
    let r = lab.env.run(id, &["nslookup", &name, "127.0.0.11"]).await;
    assert!(
        text(&r.stdout_base64.0).contains(&own_ip),
        "the embedded-resolver probe can fail: {}",
        text(&r.stdout_base64.0)
    );
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_workload_cannot_change_its_rules_routes_or_address() {
    let Some(net) = LabNet::new("egress_root", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let b = net.listener(None).await;
    let lab = net.with_provider(&[]).await;
    let inst = lab.active(&[(&a.listener.ip, PORT)]).await;
    let id = inst.instance_id.as_str();
    let before = lab.rules(id).await;
    let (_, status, _) = lab
        .as_root(id, &["grep", "^Cap", "/proc/self/status"])
        .await;
    for line in status.lines() {
        assert!(
            line.ends_with("0000000000000000"),
            "uid 0 holds a capability: {line}"
        );
    }
    let b_ip = b.listener.ip.as_str();
    let free_ip = {
        let mut octets: Vec<u8> = b_ip.split('.').map(|o| o.parse().unwrap()).collect();
        octets[3] = 200;
        format!("{}.{}.{}.{}", octets[0], octets[1], octets[2], octets[3])
    };
    for argv in [
        vec!["ip", "route", "del", "default"],
        vec!["ip", "route", "add", &format!("{b_ip}/32"), "dev", "eth0"],
        vec!["ip", "addr", "add", &format!("{free_ip}/24"), "dev", "eth0"],
        vec!["ip", "link", "set", "eth0", "down"],
        vec!["ip", "link", "set", "eth0", "address", "02:42:ac:11:00:99"],
    ] {
        let (code, out, err) = lab.as_root(id, &argv).await;
        assert_ne!(code, 0, "{argv:?} as root succeeded: {out}{err}");
        assert!(
            err.contains("not permitted"),
            "{argv:?} failed for another reason: {err}"
        );
    }
    // nft itself, as uid 0 with the container's (empty) capability set, in
    // the instance's namespace: the host's binary, since the image has none.
    let (nsenter, nft) = lab.tools();
    let pid = lab.pid(id).await;
    for args in [
        &["flush", "ruleset"][..],
        &["delete", "table", "inet", "checkfu_egress"][..],
        &["add", "rule", "inet", "checkfu_egress", "output", "accept"][..],
    ] {
        let out = tokio::process::Command::new(&nsenter)
            .arg(format!("--target={pid}"))
            .arg("--net")
            .args([
                "--",
                "setpriv",
                "--reuid=0",
                "--bounding-set=-all",
                "--inh-caps=-all",
            ])
            .arg(&nft)
            .args(args)
            .output()
            .await
            .expect("nsenter");
        assert!(
            !out.status.success(),
            "nft {args:?} without capabilities succeeded"
        );
        assert!(
            text(&out.stderr).contains("Operation not permitted"),
            "nft {args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(lab.rules(id).await, before, "the rules changed");
    let routes = lab.as_root(id, &["ip", "route"]).await.1;
    assert!(routes.contains("default via"), "{routes}");
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    assert!(!lab.dial(id, b_ip).await.contains(&b.token));
    // With the privilege the workload lacks, the same change goes through
    // and the neighbour answers: the checks above can fail.
    lab.drop_rules(id).await;
    assert_eq!(lab.dial(id, b_ip).await, b.token);
    lab.release(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_policy_holds_after_resume_and_the_recheck_sees_it() {
    let Some(net) = LabNet::new("egress_resume", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let b = net.listener(None).await;
    let lab = net.with_provider(&[]).await;
    let request = lab.request(
        "session-durable",
        RetentionMode::Durable,
        &[(&a.listener.ip, PORT)],
    );
    let inst = lab.env.active(request.clone(), &[]).await;
    let rules = lab.rules(&inst.instance_id).await;
    let released = lab
        .env
        .adapter
        .release(&inst.instance_id, Some(Timestamp::now().add_seconds(3600)))
        .await
        .expect("release");
    let ReleaseDisposition::Released { snapshot } = released else {
        panic!("a durable release keeps a snapshot: {released:?}");
    };
    let resumed = lab
        .env
        .adapter
        .resume(request.clone(), snapshot.clone())
        .await
        .expect("resume");
    let id = resumed.instance_id.as_str();
    assert_eq!(lab.rules(id).await, rules, "the same rule set after resume");
    assert_eq!(lab.dial(id, &a.listener.ip).await, a.token);
    assert!(!lab.dial(id, &b.listener.ip).await.contains(&b.token));
    lab.env
        .adapter
        .release(id, Some(Timestamp::now().add_seconds(3600)))
        .await
        .expect("release resumed");

    // The runtime's re-check on resume: a provider over the same state
    // that cannot enforce an allowlist is refused before it is called.
    let weak = DockerProvider::with_egress(
        lab.net.docker.clone(),
        DockerConfig {
            state_dir: lab.env.state_dir.clone(),
            scope: lab.env.scope.clone(),
            clock: Arc::new(SystemClock),
            pool_size: 0,
            exec_path: None,
        },
        EgressConfig::default(),
        EgressSupport::Unavailable("nft is not installed on the host".into()),
    )
    .expect("provider");
    let mut runtime = SandboxRuntime::new(Arc::new(SystemClock));
    runtime.register(Arc::new(weak));
    let adapter = runtime.adapter("docker").expect("adapter");
    let err = adapter.resume(request, snapshot).await.unwrap_err();
    let err = err.error();
    assert!(
        matches!(
            err,
            SandboxError::SandboxCapabilityUnavailable {
                requirement: Requirement::NetworkPolicy,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_host_support_allowlist_is_not_offered_and_is_refused_by_name() {
    let Some(docker) = common::docker_or_skip("egress_unsupported").await else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let provider = DockerProvider::with_egress(
        docker,
        DockerConfig {
            state_dir: state.path().to_path_buf(),
            scope: "t-egress-unsupported".into(),
            clock: Arc::new(SystemClock),
            pool_size: 0,
            exec_path: None,
        },
        EgressConfig::default(),
        EgressSupport::Unavailable("nft (nftables) is not installed on the host".into()),
    )
    .expect("provider");
    let caps = provider.capabilities();
    assert_eq!(caps.network_modes, vec![NetworkMode::None]);
    assert_eq!(caps.egress_certification, EgressCertification::Unsupported);
    // Called directly (bypassing the runtime's selection), provision names
    // the reason.
    let pinned = common::fixture_ref(provider.docker()).await;
    let env_like = common::provider_env::ProviderEnv::new("egress_unsupported_req")
        .await
        .expect("env");
    let mut request = env_like.request("s", RetentionMode::EphemeralZdr, &[], 600);
    request.root_image = ImageReference::parse(&pinned).unwrap();
    request.profile.network_policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: "127.0.0.1".into(),
            port: 1,
        }],
    };
    let Err(err) = provider.provision(request).await else {
        panic!("an allowlist provision without host support was accepted");
    };
    match err {
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::NetworkPolicy,
            ref detail,
        } => assert!(
            detail.contains("nft (nftables) is not installed"),
            "{detail}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_an_allowlist_instance_is_left() {
    let Some(net) = LabNet::new("egress_leftovers", NetworkOptions::default()).await else {
        return;
    };
    let a = net.listener(None).await;
    let lab = net.with_provider(&[]).await;
    let inst = lab.active(&[(&a.listener.ip, PORT)]).await;
    let id = inst.instance_id.clone();
    let pid = lab.pid(&id).await;
    let netns = std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("netns");
    lab.release(&id).await;
    // The container is gone, and with it the only holder of the namespace
    // the rules lived in.
    assert!(
        daemon::inspect_container(&lab.net.docker, &format!("checkfu-{id}"))
            .await
            .unwrap()
            .is_none()
    );
    let holders: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| std::fs::read_link(e.path().join("ns/net")).is_ok_and(|l| l == netns))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        holders.is_empty(),
        "processes still in {netns:?}: {holders:?}"
    );
    // No nsenter or nft the provider started is still running.
    let me = std::process::id().to_string();
    let children: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
            after.split(' ').nth(1) == Some(me.as_str())
                && (stat.contains("(nsenter)") || stat.contains("(nft)"))
        })
        .collect();
    assert!(children.is_empty(), "{children:?}");
    let (containers, images) = lab.env.leftovers().await;
    assert_eq!((containers, images), (0, 0));
    // The lab's drop removes the listener and the network and checks both.
}
