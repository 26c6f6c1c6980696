//! `checkfu sandbox keygen`: an ed25519 key pair for signing evidence.

use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_enroll::keys;

use super::fail::Failure;

/// Flags of `checkfu sandbox keygen`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes DIR/checkfu-signing.key.pem (PKCS#8 PEM, mode 0600) and \
DIR/checkfu-signing.pub.pem (SPKI PEM), creating DIR when missing; an existing key file is never \
overwritten. Prints the key id (sha256 of the public key's DER).

Examples:
  checkfu sandbox keygen --out keys

Exit status: 0; 1 when a file exists (nothing is overwritten); 2 on usage errors; 125 when a
file cannot be written."
)]
pub struct KeygenArgs {
    /// Directory to write the key pair into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs the command.
pub fn run(args: KeygenArgs) -> ExitCode {
    match keys::generate(&args.out) {
        Ok(files) => {
            let text = format!(
                "private key: {}\npublic key:  {}\nkey id:      {}\n",
                files.private.display(),
                files.public.display(),
                files.key_id
            );
            match super::out::print(&text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            }
        }
        // An existing file is refused (exit 1), never overwritten.
        Err(e @ checkfu_sandbox_enroll::EnrollError::Exists { .. }) => {
            Failure::refused(format!("keygen: {e}")).report()
        }
        Err(e) => Failure::checkfu(format!("keygen: {e}")).report(),
    }
}
