//! `checkfu sandbox schema`: write or check the author kit. A thin layer
//! over `checkfu_sandbox_kit`.

use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_kit as kit;

/// Flags of `checkfu sandbox schema`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The kit is JSON Schema 2020-12 of every boundary type (schema/), golden \
vectors (vectors/valid, vectors/invalid) and a README, generated from the contract's Rust types at \
wire revision checkfu.sandbox/v1. Writing removes stale .json files under schema/ and vectors/ only, and refuses a non-empty directory that is not a kit. --check \
exits 0 when DIR matches and 1 when any file is missing, extra or differs, naming each on stderr.\n\n\
Examples:\n  checkfu sandbox schema                      # write ./author-kit\n  \
checkfu sandbox schema --out kit            # write ./kit\n  \
checkfu sandbox schema --check              # compare ./author-kit, exit 1 on drift"
)]
pub struct SchemaArgs {
    /// The kit directory to write (or, with --check, to compare).
    #[arg(long, value_name = "DIR", default_value = "author-kit")]
    out: PathBuf,
    /// Compare DIR with the generated kit instead of writing it.
    #[arg(long)]
    check: bool,
}

/// Runs the command: 0 on success, 1 on drift (with `--check`) or an I/O
/// failure.
pub fn run(args: SchemaArgs) -> ExitCode {
    if args.check {
        if !args.out.is_dir() {
            eprintln!(
                "checkfu: schema: {} not found (run from the repository root or pass --out DIR)",
                args.out.display()
            );
            return ExitCode::from(1);
        }
        match kit::check(&args.out) {
            Ok(()) => match super::out::line(&format!(
                "author kit at {} is up to date",
                args.out.display()
            )) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            },
            Err(drift) => {
                for d in &drift {
                    eprintln!("checkfu: schema: {d}");
                }
                eprintln!(
                    "checkfu: schema: {} file(s) in {} drifted; regenerate with `checkfu sandbox schema --out {}`",
                    drift.len(),
                    args.out.display(),
                    args.out.display()
                );
                ExitCode::from(1)
            }
        }
    } else {
        match kit::write(&args.out) {
            Ok(()) => match super::out::line(&format!(
                "wrote {} files to {}",
                kit::generate().len(),
                args.out.display()
            )) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            },
            Err(e) => {
                eprintln!("checkfu: schema: writing {}: {e}", args.out.display());
                ExitCode::from(1)
            }
        }
    }
}
