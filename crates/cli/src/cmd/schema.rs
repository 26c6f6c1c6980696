//! `checkfu sandbox schema`.

use std::process::ExitCode;

/// Flags of `checkfu sandbox schema`.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {}

/// Runs the command.
pub fn run(_args: SchemaArgs) -> ExitCode {
    eprintln!("checkfu: schema: the author kit generator is being built");
    ExitCode::from(125)
}
