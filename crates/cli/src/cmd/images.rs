//! `checkfu sandbox image import`: fills the Linux provider's local OCI
//! image store from an OCI layout directory or a `docker save` tarball.

use std::path::PathBuf;
use std::process::ExitCode;

use super::backend::chain;
use super::fail::Failure;

/// Flags of `checkfu sandbox image`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox image import busybox.tar
  checkfu sandbox image import ./oci-layout-dir")]
pub struct ImageArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ImageCommand,
}

/// `checkfu sandbox image` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Import every named image of an OCI layout directory or a `docker save` tarball into the
    /// Linux provider's store, and print each pinned reference.
    #[command(
        after_help = "Blobs are verified against their digests; layers must be \
uncompressed tars (what `docker save` writes). Nothing is pulled. Each imported name prints as \
NAME@sha256:<manifest digest>, the reference `--image` takes.

Examples:
  docker save busybox:latest -o busybox.tar && checkfu sandbox image import busybox.tar
  checkfu sandbox image import ./oci-layout-dir

Exit status: 0; 125 when the source holds no importable image or the store cannot be written; \
141 when stdout was closed early."
    )]
    Import {
        /// An OCI layout directory or a `docker save` tarball.
        #[arg(value_name = "PATH")]
        source: PathBuf,
    },
}

/// Runs the command.
pub fn run(args: ImageArgs) -> ExitCode {
    match args.command {
        ImageCommand::Import { source } => {
            let store = checkfu_sandbox_linux::image::ImageStore::new(
                super::backend::linux_state_dir().join("images"),
            );
            match store.import(&source) {
                Ok(pinned) => {
                    for p in pinned {
                        if let Err(gone) = super::out::line(&p) {
                            return gone.exit();
                        }
                    }
                    ExitCode::SUCCESS
                }
                // A host-side failure of the Linux provider's store, not a
                // sandbox operation: one line naming the source.
                Err(e) => {
                    let message = chain(&e);
                    let shown = source.display().to_string();
                    if message.contains(&shown) {
                        Failure::checkfu(format!("image import: {message}")).report()
                    } else {
                        Failure::checkfu(format!("image import {shown}: {message}")).report()
                    }
                }
            }
        }
    }
}
