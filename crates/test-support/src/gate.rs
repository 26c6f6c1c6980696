//! The gate for tests that need something of the host (a Docker daemon,
//! root and cgroups): run when it is there; otherwise print a `SKIP` line
//! and return, except under `CI=true`, where its absence fails the test.

#[cfg(feature = "docker")]
use bollard::Docker;
#[cfg(feature = "docker")]
use checkfu_sandbox_docker::daemon;

/// Whether the environment variable `CI` is exactly `true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips test `test` because of `why`: prints `SKIP <test>: <why>` and
/// returns `false`. Under `CI=true` it panics with `why` instead.
pub fn skip_or_fail(test: &str, why: &str) -> bool {
    if in_ci() {
        panic!("{test}: CI=true and {why}");
    }
    // Written to the real stderr, not through the test harness's capture,
    // so the skip shows in a normal `cargo test` run.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: {why} (set CI=true to make this a failure)"
    );
    false
}

#[cfg(feature = "docker")]
/// Connects to the local Docker daemon and pings it; the error says why
/// no daemon answered.
pub async fn docker_answers() -> Result<Docker, String> {
    match daemon::connect().await {
        Ok(d) => match d.ping().await {
            Ok(_) => Ok(d),
            Err(e) => Err(format!("daemon ping failed: {e}")),
        },
        Err(e) => Err(format!("no daemon: {e}")),
    }
}

#[cfg(feature = "docker")]
/// The daemon's client for test `test`, or `None` after a `SKIP` line when
/// no daemon answers (a panic under `CI=true`).
pub async fn docker_or_skip(test: &str) -> Option<Docker> {
    match docker_answers().await {
        Ok(d) => Some(d),
        Err(why) => {
            skip_or_fail(test, &why);
            None
        }
    }
}

#[cfg(feature = "docker")]
/// [`docker_or_skip`] for a test without an async runtime (or inside
/// one): `true` when a daemon answers. The check runs on a thread of its
/// own with a current-thread runtime.
pub fn docker_gate(test: &str) -> bool {
    let answered = std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime for the daemon check: {e}"))?
            .block_on(docker_answers())
            .map(drop)
    })
    .join()
    .expect("daemon check thread");
    match answered {
        Ok(()) => true,
        Err(why) => skip_or_fail(test, &why),
    }
}
