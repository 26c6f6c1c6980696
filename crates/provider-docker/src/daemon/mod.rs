//! Thin helpers over bollard for what the Docker provider asks of the
//! local daemon: containers, bounded and streaming execs, commits, label
//! sweeps. (Snapshot archives of host directories are a module of their own.)
//!
//! Nothing here knows the contract's types; the provider maps these
//! results onto them.
//!

use std::io;

use bollard::Docker;
use checkfu_sandbox_contained::ContainedError;

mod containers;
mod exec;
mod proctree;
mod start_failure;
mod streaming;

pub use containers::*;
pub use exec::*;
pub use proctree::*;
pub use start_failure::*;
pub use streaming::*;

/// Failure of a daemon helper.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A daemon call failed.
    #[error("daemon call failed")]
    Docker(#[from] bollard::errors::Error),
    /// The daemon answered something this module cannot use.
    #[error("daemon answered unexpectedly: {0}")]
    Unexpected(String),
    /// The exec's process cannot be signalled from here (see the module
    /// documentation).
    #[error("cannot signal exec {exec_id}: {reason}")]
    KillUnavailable {
        /// The exec.
        exec_id: String,
        /// Why the host PID is unusable.
        reason: String,
    },
    /// Signalling the process group failed.
    #[error("cannot signal process group {pgid}")]
    Signal {
        /// Host process group ID.
        pgid: i32,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
    /// A contained host-directory operation failed.
    #[error(transparent)]
    Contained(#[from] ContainedError),
    /// A local i/o operation failed.
    #[error("i/o failure: {context}")]
    Io {
        /// What was being done.
        context: String,
        /// Underlying failure.
        #[source]
        source: io::Error,
    },
}

/// Whether a bollard error is the daemon's 404.
pub fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// Connects to the local daemon (`DOCKER_HOST` when it names a
/// `unix://` socket, else the default socket) and negotiates the API version
/// down to what the server speaks (bollard 0.19 defaults to 1.49; Docker
/// 20.10 speaks 1.41).
///
/// The provider bind-mounts host directories and reads them directly, so
/// it only works with a daemon on this machine: a `DOCKER_HOST` naming any
/// other transport, or a `DOCKER_CONTEXT` other than `default`, is refused
/// rather than silently replaced by the local socket.
///
/// # Errors
///
/// [`DaemonError::Unexpected`] for a non-local `DOCKER_HOST` or a
/// `DOCKER_CONTEXT`; [`DaemonError::Docker`] when no daemon answers.
pub async fn connect() -> Result<Docker, DaemonError> {
    check_local_daemon_env(
        std::env::var("DOCKER_HOST").ok().as_deref(),
        std::env::var("DOCKER_CONTEXT").ok().as_deref(),
    )?;
    let docker = Docker::connect_with_local_defaults()?;
    Ok(docker.negotiate_version().await?)
}

/// Refuses daemon settings that [`connect`] could not honour.
fn check_local_daemon_env(host: Option<&str>, context: Option<&str>) -> Result<(), DaemonError> {
    if let Some(host) = host.filter(|h| !h.is_empty() && !h.starts_with("unix://")) {
        return Err(DaemonError::Unexpected(format!(
            "DOCKER_HOST={host:?} is not a local unix:// socket; the Docker provider needs the \
             daemon on this machine (it bind-mounts and reads host directories)"
        )));
    }
    if let Some(context) = context.filter(|c| !c.is_empty() && *c != "default") {
        return Err(DaemonError::Unexpected(format!(
            "DOCKER_CONTEXT={context:?} is not supported; unset it, or set DOCKER_HOST=unix:///path/to/docker.sock"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod env_tests {
    use super::check_local_daemon_env;

    #[test]
    fn only_local_unix_sockets_are_accepted() {
        assert!(check_local_daemon_env(None, None).is_ok());
        assert!(check_local_daemon_env(Some("unix:///var/run/docker.sock"), None).is_ok());
        assert!(check_local_daemon_env(Some(""), Some("default")).is_ok());
        for host in [
            "tcp://127.0.0.1:1",
            "ssh://nobody@127.0.0.1",
            "garbage",
            "npipe:////./pipe/docker",
        ] {
            let e = check_local_daemon_env(Some(host), None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(host), "{e}");
        }
        let e = check_local_daemon_env(None, Some("nosuch"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nosuch"), "{e}");
    }
}
