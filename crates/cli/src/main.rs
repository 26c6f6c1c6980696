//! `checkfu`: a thin binary over the sandbox libraries. It parses flags and
//! prints; everything it does is a library call that tests make too.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Checkfu sandbox-provider tools: run the conformance suite against a
/// provider, run a one-shot workload, inspect what a provider claims, sweep
/// orphans, and write the machine-readable author kit.
#[derive(Debug, Parser)]
#[command(name = "checkfu", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Sandbox-provider commands: conformance, faults, author kit.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Run the nine conformance cases against a provider (default: the embedded memory oracle).
    Test(cmd::test::TestArgs),
    /// List the memory oracle's named faults: the rule each breaks and the case that catches it.
    Faults(cmd::faults::FaultsArgs),
    /// Write or check the machine-readable author kit (JSON Schema and golden vectors).
    Schema(cmd::schema::SchemaArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Top::Sandbox(SandboxCommand::Test(args)) => cmd::test::run(args),
        Top::Sandbox(SandboxCommand::Faults(args)) => cmd::faults::run(args),
        Top::Sandbox(SandboxCommand::Schema(args)) => cmd::schema::run(args),
    }
}
