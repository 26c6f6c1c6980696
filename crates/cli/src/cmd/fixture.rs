//! `checkfu sandbox fixture`: builds the offline Docker fixture image when
//! it is missing (or, with `--provider linux`, writes it into the Linux
//! provider's image store) and prints its pinned reference.

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
progress goes to stderr; the image ID `sha256:<64 hex>` is the last line of stdout. The Docker \
CLI reads it as that local image (`docker run --pull never sha256:<hex> ...`), and checkfu's \
`--image` accepts it as the pinned reference `checkfu-fixture@sha256:<hex>` (the same hex), \
which it also accepts as given.

With `--provider linux` the same root file system is written as an OCI image (one uncompressed \
layer) into the Linux provider's store; the pinned reference is `checkfu-fixture@sha256:<manifest \
digest>`, the same for the same busybox.

Examples:
  checkfu sandbox fixture
  IMAGE=$(checkfu sandbox fixture | tail -n1)
  checkfu sandbox run --provider docker --image \"$IMAGE\" -- sh -c 'exit 42'
  checkfu sandbox fixture --provider linux

Exit status: 0; 125 when the daemon or the build failed, or a --busybox given does not exist; \
141 when stdout was closed early."
)]
pub struct FixtureArgs {
    /// A statically linked busybox binary (it must exist when given; without the flag
    /// /bin/busybox, else Debian's busybox-static fetched into the cache).
    #[arg(long, value_name = "PATH")]
    pub busybox: Option<PathBuf>,
    /// Where the fixture goes: the Docker daemon or the Linux provider's image store.
    #[arg(long, value_name = "docker|linux", default_value = "docker")]
    pub provider: FixtureProvider,
}

/// Where `checkfu sandbox fixture` puts the fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FixtureProvider {
    /// An image of the local Docker daemon.
    Docker,
    /// The Linux provider's OCI image store.
    Linux,
}

/// Writes the fixture into the Linux provider's store; its pinned
/// reference.
async fn linux_fixture(busybox: &std::path::Path) -> Result<String, Failure> {
    let failed = |m: String| {
        Failure::from(SandboxError::failed(
            Operation::Fixture,
            FailureReason::ProviderError,
            m,
        ))
    };
    let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
    let path = checkfu_sandbox_hostfs::busybox::locate_busybox(busybox, &mut progress)
        .await
        .map_err(|e| failed(chain(&e)))?;
    let bb = checkfu_sandbox_hostfs::rootfs::load_busybox(&path)
        .await
        .map_err(|e| failed(chain(&e)))?;
    let store = checkfu_sandbox_linux::image::ImageStore::new(
        super::backend::linux_state_dir().join("images"),
    );
    tokio::task::spawn_blocking(move || store.write_fixture(&bb))
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(chain(&e)))
}

/// The image ID `sha256:<hex>` of a pinned Docker reference
/// `name@sha256:<hex>` (the Docker provider pins by image ID).
fn image_id(pinned: &str) -> String {
    match pinned.rsplit_once('@') {
        Some((_, digest)) => digest.to_owned(),
        None => pinned.to_owned(),
    }
}

/// Runs the command.
pub fn run(args: FixtureArgs) -> ExitCode {
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // A path given on purpose is used or refused, never replaced by the
    // fallback the default path has.
    let busybox = match args.busybox {
        Some(path) => match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => path,
            Ok(_) => {
                return Failure::checkfu(format!(
                    "--busybox {}: not a regular file",
                    path.display()
                ))
                .report()
            }
            Err(e) => {
                return Failure::checkfu(format!("--busybox {}: {e}", path.display())).report()
            }
        },
        None => PathBuf::from(fixture::DEFAULT_BUSYBOX_PATH),
    };
    runtime.block_on(async move {
        if args.provider == FixtureProvider::Linux {
            return match linux_fixture(&busybox).await {
                Ok(pinned) => match super::out::line(&pinned) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(gone) => gone.exit(),
                },
                Err(f) => f.report(),
            };
        }
        let docker = match daemon::connect().await {
            Ok(d) => d,
            Err(e) => return super::backend::connect_failure(&e).report(),
        };
        let mut progress = |line: &str| eprintln!("checkfu: fixture: {line}");
        match fixture::ensure_fixture(&docker, &busybox, &mut progress).await {
            // `name@sha256:<id>` is a registry digest to the Docker CLI,
            // which would try to pull it: print the ID itself.
            Ok(pinned) => match super::out::line(&image_id(&pinned)) {
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
