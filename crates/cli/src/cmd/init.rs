//! `checkfu sandbox init`: a provider project to start from.

use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_enroll::scaffold::{self, Lang};

use super::fail::Failure;

/// Scaffold languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LangArg {
    /// Python 3, standard library only.
    Python,
    /// Rust, with serde_json.
    Rust,
}

/// Flags of `checkfu sandbox init`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The scaffold speaks the wire protocol (a copy of the author kit's \
PROTOCOL.md goes with it), answers every member with the typed refusal the contract names for a \
provider that has allocated nothing, advertises a minimal envelope and declares no conformance \
token, so `checkfu sandbox test --provider-cmd` runs at once: nine recorded skips, none failed. \
The provider id is DIR's name. No existing file is overwritten.

Examples:
  checkfu sandbox init --lang python acme-provider
  checkfu sandbox test --provider-cmd acme-provider/provider.py

Exit status: 0; 1 when a file exists (nothing is overwritten); 2 on usage errors; 125 when a
file cannot be written."
)]
pub struct InitArgs {
    /// The provider's language.
    #[arg(long, value_enum)]
    pub lang: LangArg,
    /// The project directory (created when missing).
    pub dir: PathBuf,
}

/// Runs the command.
pub fn run(args: InitArgs) -> ExitCode {
    let lang = match args.lang {
        LangArg::Python => Lang::Python,
        LangArg::Rust => Lang::Rust,
    };
    match scaffold::write(lang, &args.dir) {
        Ok(files) => {
            let id = scaffold::id_for(&args.dir);
            let mut text = String::new();
            for f in files {
                text.push_str(&format!("wrote {}\n", f.display()));
            }
            let entry = scaffold::entry_point(lang, &args.dir, &id);
            if lang == Lang::Rust {
                text.push_str(&format!(
                    "next: (cd {} && cargo build) && checkfu sandbox test --provider-cmd {}\n",
                    args.dir.display(),
                    entry.display()
                ));
            } else {
                text.push_str(&format!(
                    "next: checkfu sandbox test --provider-cmd {}\n",
                    entry.display()
                ));
            }
            match super::out::print(&text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            }
        }
        // An existing file is refused (exit 1), never overwritten.
        Err(e @ checkfu_sandbox_enroll::EnrollError::Exists { .. }) => {
            Failure::refused(format!("init: {e}")).report()
        }
        Err(e) => Failure::checkfu(format!("init: {e}")).report(),
    }
}
