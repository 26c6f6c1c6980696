//! The provider `verify` and `add` are about: `--provider-cmd` or
//! `--provider-socket` (exactly one), and what its evidence subject is.

use std::path::PathBuf;

use checkfu_sandbox_enroll::subject::{self, Code};
use checkfu_sandbox_wire::WireClient;

use super::fail::Failure;
use super::ProviderChoice;

/// `--provider-cmd` or `--provider-socket`: exactly one.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServedFlags {
    /// Spawn the provider with its wire on stdin/stdout: CMD and its ARGS in one argument, split by shell quoting rules; CMD is looked up in PATH.
    #[arg(long = "provider-cmd", value_name = "'CMD [ARGS]'")]
    pub provider_cmd: Option<String>,
    /// Connect to a provider served on the Unix socket at PATH.
    #[arg(long = "provider-socket", value_name = "PATH")]
    pub provider_socket: Option<PathBuf>,
    /// Start a provider shipped as a local OCI image NAME@sha256:HEX (never pulled).
    #[arg(long = "provider-image", value_name = "NAME@sha256:HEX")]
    pub provider_image: Option<String>,
}

impl ServedFlags {
    /// The provider these flags name: [`ProviderChoice::Command`] or
    /// [`ProviderChoice::Socket`].
    ///
    /// # Errors
    /// A usage failure for none or both, or a command line that does not
    /// split into at least one word.
    pub fn choice(&self) -> Result<ProviderChoice, Failure> {
        if self.provider_cmd.is_none()
            && self.provider_socket.is_none()
            && self.provider_image.is_none()
        {
            return Err(Failure::usage(
                "expected --provider-cmd, --provider-socket or --provider-image naming the provider, actual none",
            ));
        }
        super::ProviderFlags {
            provider_cmd: self.provider_cmd.clone(),
            provider_socket: self.provider_socket.clone(),
            provider_image: self.provider_image.clone(),
            ..Default::default()
        }
        .choice()
        .map_err(|e| Failure::usage(e.to_string()))
    }
}

/// The evidence subject of a served provider's code: the SHA-256 of the
/// executable a command starts (re-hashed now), none for a socket.
///
/// # Errors
/// 125 when the executable cannot be found or read; a usage failure for a
/// built-in or enrolled choice.
pub fn code(choice: &ProviderChoice) -> Result<Code, Failure> {
    match choice {
        ProviderChoice::Command { argv, .. } => {
            let exe = super::backend::resolve(&argv[0])?;
            let hex = subject::sha256_file(&exe)
                .map_err(|e| Failure::checkfu(format!("--provider-cmd: {e}")))?;
            Ok(Code::Executable(hex))
        }
        ProviderChoice::Socket(_) => Ok(Code::Socket),
        ProviderChoice::Image { hex, .. } => Ok(Code::Image(hex.clone())),
        _ => Err(Failure::usage(
            "expected --provider-cmd or --provider-socket",
        )),
    }
}

/// Connects, reads the envelope the provider answers with now, and ends
/// the connection.
///
/// # Errors
/// Those of `backend::wire`.
pub async fn envelope(
    choice: &ProviderChoice,
) -> Result<checkfu_sandbox_contract::SandboxProviderCapabilities, Failure> {
    use checkfu_sandbox_contract::SandboxProvider;
    let client: WireClient = super::backend::wire(choice).await?;
    let envelope = client.capabilities();
    client.close().await;
    Ok(envelope)
}
