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

use bollard::models::NetworkCreateRequest;
use bollard::Docker;

use crate::daemon::{self, ContainerSpec, DaemonError, ExecOutcome, ExecRequest};

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
    let res = docker
        .create_network(NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".into()),
            internal: Some(true),
            attachable: Some(false),
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
    /// The port it listens on.
    pub port: u16,
}

async fn container_ip(docker: &Docker, id: &str, network: &str) -> Result<String, DaemonError> {
    let info = daemon::inspect_container(docker, id)
        .await?
        .ok_or_else(|| DaemonError::Unexpected(format!("container {id} vanished")))?;
    info.network_settings
        .and_then(|n| n.networks)
        .and_then(|mut n| n.remove(network))
        .and_then(|e| e.ip_address)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| {
            DaemonError::Unexpected(format!("container {id} has no address on {network}"))
        })
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
    let spec = ContainerSpec {
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
        let ip = container_ip(docker, &id, network).await?;
        for _ in 0..50 {
            let mut probe = ExecRequest::new(&["nc", "-w", "1", "127.0.0.1", &port.to_string()]);
            probe.timeout = Duration::from_secs(5);
            let report = daemon::exec_bounded(docker, &id, &probe).await?;
            if let ExecOutcome::Exited { stdout, .. } = &report.outcome {
                if stdout == token.as_bytes() {
                    return Ok(ip);
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
        Ok(ip) => Ok(TestListener {
            container_id: id,
            ip,
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
    let spec = ContainerSpec {
        image: image.to_owned(),
        labels: labels.clone(),
        network_mode: Some(network.to_owned()),
        memory_bytes: Some(64 << 20),
        pids_limit: Some(64),
        ..Default::default()
    };
    let id = daemon::create_and_start(docker, &spec).await?;
    let mut probe = ExecRequest::new(&["nc", "-w", "3", host, &port.to_string()]);
    probe.timeout = Duration::from_secs(10);
    let report = daemon::exec_bounded(docker, &id, &probe).await;
    let removed = daemon::remove_container(docker, &id).await;
    let report = report?;
    removed?;
    match report.outcome {
        ExecOutcome::Exited { stdout, .. } => Ok(stdout),
        other => Err(DaemonError::Unexpected(format!("dial ended {other:?}"))),
    }
}
