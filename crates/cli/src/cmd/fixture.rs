//! `checkfu sandbox fixture`: builds the offline Docker fixture image when
//! it is missing and prints its pinned reference.

use checkfu_sandbox_contract::Operation;
use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_contract::{FailureReason, SandboxError};
use checkfu_sandbox_docker::{daemon, fixture};

use super::backend::chain;
use super::fail::Failure;

/// Flags of `checkfu sandbox fixture`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The image is `FROM scratch` with Debian's busybox-static and the sandbox \
layout; no registry is contacted. An image already built from the same busybox is reused. Build \
progress goes to stderr; the pinned reference `checkfu-fixture@sha256:<image id>` is the last \
line of stdout.

Examples:
  checkfu sandbox fixture
  IMAGE=$(checkfu sandbox fixture | tail -n1)
  checkfu sandbox run --provider docker --image \"$IMAGE\" -- sh -c 'exit 42'

Exit status: 0; 125 when the daemon or the build failed; 141 when stdout was closed early."
)]
pub struct FixtureArgs {
    /// A statically linked busybox binary.
    #[arg(long, value_name = "PATH", default_value = fixture::DEFAULT_BUSYBOX_PATH)]
    pub busybox: PathBuf,
}

/// Runs the command.
pub fn run(args: FixtureArgs) -> ExitCode {
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let docker = match daemon::connect().await {
            Ok(d) => d,
            Err(e) => return super::backend::connect_failure(&e).report(),
        };
        let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
        match fixture::ensure_fixture(&docker, &args.busybox, &mut progress).await {
            Ok(pinned) => match super::out::line(&pinned) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            },
            Err(e) => Failure::from(SandboxError::failed(
                Operation::Fixture,
                FailureReason::ProviderError,
                chain(&e),
            ))
            .report(),
        }
    })
}
