//! Test-support networking for the egress conformance cases: a private
//! bridge network, token listeners on it, and a control dialer.
//!
//! Traffic only ever goes to listeners started here, on a network created
//! here: the network is `internal` (no route off the host), a listener is a
//! fixture container running busybox `nc -ll -p PORT -e printf TOKEN` (a
//! persistent server that writes the token to every accepted connection),
//! and the control probe is a short-lived fixture container on the same
//! network that dials it with `nc -w 3 HOST PORT`. Sandbox instances never
//! join this network (they run with network mode `none`), which is what the
//! none-egress case proves.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::Docker;

use crate::daemon::{self, ContainerSpec, DaemonError, ExecOutcome, ExecRequest};

/// Address plan of a test network: the daemon's choice unless set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkOptions {
    /// IPv4 subnet in CIDR form, for example `169.254.169.0/24`.
    pub ipv4_subnet: Option<String>,
    /// IPv6 subnet in CIDR form (a unique-local one, for example
    /// `fd5e:c0f::/64`); when set, the network is dual-stack.
    pub ipv6_subnet: Option<String>,
}

/// Creates an internal bridge network named `name` with `labels`.
/// Returns its id.
///
/// # Errors
///
/// [`DaemonError::Docker`] when the daemon refuses.
pub async fn create_network(
    docker: &Docker,
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<String, DaemonError> {
    create_network_with(docker, name, labels, &NetworkOptions::default()).await
}

/// [`create_network`] with an address plan: still `internal` (no route off
/// the host), dual-stack when `options.ipv6_subnet` is set.
///
/// # Errors
///
/// [`DaemonError::Docker`] when the daemon refuses (for example a subnet
/// that overlaps another network's).
pub async fn create_network_with(
    docker: &Docker,
    name: &str,
    labels: &HashMap<String, String>,
    options: &NetworkOptions,
) -> Result<String, DaemonError> {
    let subnets: Vec<IpamConfig> = [&options.ipv4_subnet, &options.ipv6_subnet]
        .into_iter()
        .flatten()
        .map(|s| IpamConfig {
            subnet: Some(s.clone()),
            ..Default::default()
        })
        .collect();
    let res = docker
        .create_network(NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".into()),
            internal: Some(true),
            attachable: Some(false),
            enable_ipv6: Some(options.ipv6_subnet.is_some()),
            ipam: (!subnets.is_empty()).then(|| Ipam {
                config: Some(subnets),
                ..Default::default()
            }),
            labels: Some(labels.clone()),
            ..Default::default()
        })
        .await?;
    Ok(res.id)
}

/// Removes a network; a missing one is success.
///
/// # Errors
///
/// [`DaemonError::Docker`] for other failures (for example containers
/// still attached).
pub async fn remove_network(docker: &Docker, name: &str) -> Result<(), DaemonError> {
    match docker.remove_network(name).await {
        Ok(()) => Ok(()),
        Err(e) if daemon::is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A started listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestListener {
    /// Its container.
    pub container_id: String,
    /// Its address on the network.
    pub ip: String,
    /// Its IPv6 address on a dual-stack network.
    pub ipv6: Option<String>,
    /// The port it listens on.
    pub port: u16,
}

/// A container's IPv4 address and (on a dual-stack network) IPv6 address
/// on `network`.
///
/// # Errors
///
/// [`DaemonError`] when the container is gone or has no IPv4 address there.
pub async fn container_ips(
    docker: &Docker,
    id: &str,
    network: &str,
) -> Result<(String, Option<String>), DaemonError> {
    let info = daemon::inspect_container(docker, id)
        .await?
        .ok_or_else(|| DaemonError::Unexpected(format!("container {id} vanished")))?;
    let endpoint = info
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|mut n| n.remove(network));
    let v6 = endpoint
        .as_ref()
        .and_then(|e| e.global_ipv6_address.clone())
        .filter(|ip| !ip.is_empty());
    let v4 = endpoint
        .and_then(|e| e.ip_address)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| {
            DaemonError::Unexpected(format!("container {id} has no address on {network}"))
        })?;
    Ok((v4, v6))
}

/// Starts a listener container from `image` (a fixture image) on
/// `network`, writing `token` to every connection on `port`, and waits
/// until it answers (dialled from inside its own container, on loopback).
///
/// # Errors
///
/// [`DaemonError`] when the container cannot be started or never answers
/// with the token (it is removed again).
pub async fn start_listener(
    docker: &Docker,
    image: &str,
    network: &str,
    labels: &HashMap<String, String>,
    port: u16,
    token: &str,
) -> Result<TestListener, DaemonError> {
    start_listener_at(docker, image, network, labels, port, token, None).await
}

/// [`start_listener`] at a chosen IPv4 address on `network` (inside its
/// subnet), or the daemon's choice when `ipv4` is `None`.
///
/// # Errors
///
/// As [`start_listener`]; the daemon refuses an address outside the subnet
/// or already taken.
pub async fn start_listener_at(
    docker: &Docker,
    image: &str,
    network: &str,
    labels: &HashMap<String, String>,
    port: u16,
    token: &str,
    ipv4: Option<&str>,
) -> Result<TestListener, DaemonError> {
    let spec = ContainerSpec {
        ipv4_address: ipv4.map(str::to_owned),
        image: image.to_owned(),
        labels: labels.clone(),
        network_mode: Some(network.to_owned()),
        memory_bytes: Some(64 << 20),
        pids_limit: Some(64),
        command: Some(
            ["nc", "-ll", "-p", &port.to_string(), "-e", "printf", token]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
        ..Default::default()
    };
    let id = daemon::create_and_start(docker, &spec).await?;
    let ready = async {
        let ips = container_ips(docker, &id, network).await?;
        for _ in 0..50 {
            let mut probe = ExecRequest::new(&["nc", "-w", "1", "127.0.0.1", &port.to_string()]);
            probe.timeout = Duration::from_secs(5);
            let report = daemon::exec_bounded(docker, &id, &probe).await?;
            if let ExecOutcome::Exited { stdout, .. } = &report.outcome {
                if stdout == token.as_bytes() {
                    return Ok(ips);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(DaemonError::Unexpected(format!(
            "listener {id} did not answer on port {port}"
        )))
    }
    .await;
    match ready {
        Ok((ip, ipv6)) => Ok(TestListener {
            container_id: id,
            ip,
            ipv6,
            port,
        }),
        Err(e) => {
            let _ = daemon::remove_container(docker, &id).await;
            Err(e)
        }
    }
}

/// Dials `host:port` from a short-lived container of `image` on `network`
/// and returns what the listener sent (`nc -w 3`, stdin closed). The
/// container is removed afterwards.
///
/// # Errors
///
/// [`DaemonError`] when the dialer cannot be started or the dial does not
/// settle.
pub async fn dial(
    docker: &Docker,
    image: &str,
    network: &str,
    labels: &HashMap<String, String>,
    host: &str,
    port: u16,
) -> Result<Vec<u8>, DaemonError> {
    let argv = ["nc", "-w", "3", host, &port.to_string()];
    run_support(
        docker,
        image,
        network,
        labels,
        &argv,
        Duration::from_secs(10),
    )
    .await
}

/// Runs `argv` in a short-lived container of `image` on `network` (the
/// control vantage point: the same network as the instance, no rules) and
/// returns its stdout, whatever its exit code. The container is removed
/// afterwards.
///
/// # Errors
///
/// [`DaemonError`] when the container cannot be started or the command
/// does not end within `timeout`.
pub async fn run_support(
    docker: &Docker,
    image: &str,
    network: &str,
    labels: &HashMap<String, String>,
    argv: &[&str],
    timeout: Duration,
) -> Result<Vec<u8>, DaemonError> {
    let spec = ContainerSpec {
        image: image.to_owned(),
        labels: labels.clone(),
        network_mode: Some(network.to_owned()),
        memory_bytes: Some(64 << 20),
        pids_limit: Some(64),
        ..Default::default()
    };
    let id = daemon::create_and_start(docker, &spec).await?;
    let mut probe = ExecRequest::new(argv);
    probe.timeout = timeout;
    let report = daemon::exec_bounded(docker, &id, &probe).await;
    let removed = daemon::remove_container(docker, &id).await;
    let report = report?;
    removed?;
    match report.outcome {
        ExecOutcome::Exited { stdout, .. } => Ok(stdout),
        other => Err(DaemonError::Unexpected(format!("{argv:?} ended {other:?}"))),
    }
}
