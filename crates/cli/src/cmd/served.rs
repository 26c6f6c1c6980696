//! A provider served over the wire for the partner commands (`verify`,
//! `add`): the connection, and what its evidence subject is.

use std::path::PathBuf;

use checkfu_sandbox_enroll::subject::{self, Code};
use checkfu_sandbox_wire::{WireClient, WireOptions};

use super::fail::Failure;

/// `--provider-cmd` or `--provider-socket`: exactly one.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServedFlags {
    /// Spawn the provider with its wire on stdin/stdout: CMD and its ARGS in one argument.
    #[arg(long = "provider-cmd", value_name = "'CMD [ARGS]'")]
    pub provider_cmd: Option<String>,
    /// Connect to a provider served on the Unix socket at PATH.
    #[arg(long = "provider-socket", value_name = "PATH")]
    pub provider_socket: Option<PathBuf>,
}

/// How an enrolled or given provider is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// Program and arguments.
    Command(Vec<String>),
    /// A Unix socket.
    Socket(PathBuf),
}

impl ServedFlags {
    /// The provider these flags name.
    ///
    /// # Errors
    /// A usage failure for none or both, or an empty command.
    pub fn served(&self) -> Result<Served, Failure> {
        match (&self.provider_cmd, &self.provider_socket) {
            (Some(line), None) => {
                let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
                if argv.is_empty() {
                    return Err(Failure::usage(format!(
                        "--provider-cmd: expected a command and its arguments, actual {line:?}"
                    )));
                }
                Ok(Served::Command(argv))
            }
            (None, Some(path)) => Ok(Served::Socket(path.clone())),
            (Some(_), Some(_)) => Err(Failure::usage(
                "--provider-cmd and --provider-socket each name the provider; expected one of them, actual both",
            )),
            (None, None) => Err(Failure::usage(
                "expected --provider-cmd or --provider-socket naming the provider",
            )),
        }
    }
}

/// The evidence subject of the provider's code: the SHA-256 of the
/// executable a command starts, or none for a socket.
///
/// # Errors
/// 125 when the executable cannot be found or read.
pub fn code(served: &Served) -> Result<Code, Failure> {
    match served {
        Served::Command(argv) => {
            let exe = subject::resolve_executable(&argv[0])
                .map_err(|e| Failure::checkfu(format!("--provider-cmd: {e}")))?;
            let hex = subject::sha256_file(&exe)
                .map_err(|e| Failure::checkfu(format!("--provider-cmd: {e}")))?;
            Ok(Code::Executable(hex))
        }
        Served::Socket(_) => Ok(Code::Socket),
    }
}

/// Spawns or connects to the provider and initializes.
///
/// # Errors
/// 125 naming the command or socket and the closed error.
pub async fn connect(served: &Served) -> Result<WireClient, Failure> {
    let opened = match served {
        Served::Command(argv) => {
            let mut command = tokio::process::Command::new(&argv[0]);
            command.args(&argv[1..]).process_group(0);
            WireClient::spawn(command, WireOptions::default()).await
        }
        Served::Socket(path) => WireClient::connect_unix(path, WireOptions::default()).await,
    };
    opened.map_err(|e| Failure::checkfu(format!("{}: {}: {e}", describe(served), e.tag())))
}

/// `--provider-cmd '<words>'` or `--provider-socket <path>`, for messages.
pub fn describe(served: &Served) -> String {
    match served {
        Served::Command(argv) => format!("--provider-cmd {:?}", argv.join(" ")),
        Served::Socket(p) => format!("--provider-socket {}", p.display()),
    }
}
