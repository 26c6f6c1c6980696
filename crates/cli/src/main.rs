//! `checkfu`: a thin binary over the sandbox libraries. It parses flags and
//! prints; everything it does is a library call that tests make too.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Checkfu sandbox-provider tools.
#[derive(Debug, Parser)]
#[command(name = "checkfu", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Sandbox-provider commands: conformance, runs, capabilities, cleanup, author kit.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Write or check the machine-readable author kit (JSON Schema and golden vectors).
    Schema(cmd::schema::SchemaArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Top::Sandbox(SandboxCommand::Schema(args)) => cmd::schema::run(args),
    }
}
