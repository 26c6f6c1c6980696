//! `checkfu`: a thin binary over the sandbox libraries. It parses flags and
//! prints; everything it does is a library call that tests make too.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cmd;

/// Checkfu sandbox-provider tools: run the conformance suite against a
/// provider, run a one-shot workload, inspect what a provider claims, sweep
/// orphans, and write the machine-readable author kit.
#[derive(Debug, Parser)]
#[command(
    name = "checkfu",
    version,
    about,
    long_about = None,
    after_help = "Examples:
  checkfu sandbox test
  checkfu sandbox run --provider docker --image \"$(checkfu sandbox fixture | tail -n1)\" -- sh -c 'exit 42'
  checkfu sandbox capabilities --provider docker
  checkfu completions bash > /etc/bash_completion.d/checkfu

Set RUST_LOG (e.g. RUST_LOG=debug) for tracing on stderr; it is off by default.
When stdout is closed by its reader (`checkfu sandbox faults | head -1`), a command stops writing
and exits 141, the status of a SIGPIPE death."
)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Sandbox-provider commands: conformance, runs, capabilities, cleanup, author kit.
    #[command(
        subcommand,
        after_help = "Examples:
  checkfu sandbox test --provider docker
  checkfu sandbox run --image demo:1 -- sh -c 'exit 42'

Exit status, the same for every subcommand (each one's --help gives its own):
  0    done; for `test`, no case failed; for `verify` and `add`, accepted
  1    a judged refusal: a case failed (`test`), evidence did not verify (`verify`, `add`),
       an id already or not enrolled (`add`, `remove`)
  2    usage: a flag or value that does not parse, with the reason on one line
  125  checkfu or the provider failed; one line names the closed error tag, the
       operation, the field and both values
  `run` exits with the workload's own status, 124 past --timeout, 126 when the
  command could not be executed, 127 when it was not found
  128+N after signal N (129 HUP, 130 INT, 131 QUIT, 143 TERM): the sandbox is destroyed first
  141  stdout was closed by its reader (as a SIGPIPE death)

Environment:
  CHECKFU_STATE_DIR           state directory (default /var/lib/checkfu/sandbox for root,
                              else $XDG_STATE_HOME/checkfu/sandbox or ~/.local/state/checkfu/sandbox)
  CHECKFU_SCOPE               the scope the CLI's objects carry and cleanup sweeps (default cli)
  CHECKFU_PROVIDERS           the registry of enrolled providers (see `add`)
  CHECKFU_CACHE_DIR           where the fixture's busybox is cached (default $XDG_CACHE_HOME/checkfu)
  CHECKFU_DOCKER_POOL         Docker warm-pool size, 0 disables it (default 0 for run, capabilities
                              and cleanup; the provider's default for test and serve)
  CHECKFU_DOCKER_EXEC         how Docker commands start: host (enter the container from the host,
                              where this host allows it; the default) or daemon (docker's exec API)
  CHECKFU_SNAPSHOT_MAX_BYTES  host bytes one snapshot may take (default 4 GiB)
  CHECKFU_OUTPUT_MAX_BYTES    host bytes --outputs may write (default 1 GiB)"
    )]
    Sandbox(SandboxCommand),
    /// Print a shell completion script for bash, zsh or fish.
    #[command(after_help = "Examples:
  checkfu completions bash > ~/.local/share/bash-completion/completions/checkfu
  checkfu completions zsh > \"${fpath[1]}/_checkfu\"
  checkfu completions fish > ~/.config/fish/completions/checkfu.fish

Exit status: 0; 2 for an unknown shell; 141 when stdout was closed early.")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

/// Shells `checkfu completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Run the nine conformance cases against a provider (default: the embedded memory oracle).
    Test(cmd::test::TestArgs),
    /// Run one workload in a fresh sandbox and exit with its status.
    Run(cmd::run::RunArgs),
    /// Show a provider's capability envelope and the conformance tokens it backs.
    Capabilities(cmd::capabilities::CapabilitiesArgs),
    /// Sweep orphaned instances and snapshots of the CLI's scope.
    Cleanup(cmd::cleanup::CleanupArgs),
    /// List the snapshots a provider holds for a scope, and which `run --resume` can use.
    Snapshots(cmd::snapshots::SnapshotsArgs),
    /// Build the offline fixture image (Docker, or the Linux provider's store) and print its pinned reference.
    Fixture(cmd::fixture::FixtureArgs),
    /// Manage the Linux provider's local OCI image store (import).
    Image(cmd::images::ImageArgs),
    /// List the memory oracle's named faults: the rule each breaks and the case that catches it.
    Faults(cmd::faults::FaultsArgs),
    /// Write or check the machine-readable author kit (JSON Schema and golden vectors).
    Schema(cmd::schema::SchemaArgs),
    /// Serve a provider over the wire protocol on stdio or a Unix socket.
    Serve(cmd::serve::ServeArgs),
    /// Scaffold a provider project (wire loop, typed refusals, minimal envelope) to start from.
    Init(cmd::init::InitArgs),
    /// Generate an ed25519 key pair for signing conformance evidence.
    Keygen(cmd::keygen::KeygenArgs),
    /// Verify signed evidence against the provider it must be about.
    Verify(cmd::verify::VerifyArgs),
    /// Enroll a provider whose signed evidence verifies, under a ceiling.
    Add(cmd::enroll::AddArgs),
    /// List enrolled providers.
    List(cmd::enroll::ListArgs),
    /// Remove an enrolled provider.
    Remove(cmd::enroll::RemoveArgs),
}

/// Tracing to stderr under `RUST_LOG`; off when it is unset or malformed, so
/// that a failure stays one line.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Top::Sandbox(SandboxCommand::Test(args)) => cmd::test::run(args),
        Top::Sandbox(SandboxCommand::Run(args)) => cmd::run::run(args),
        Top::Sandbox(SandboxCommand::Capabilities(args)) => cmd::capabilities::run(args),
        Top::Sandbox(SandboxCommand::Cleanup(args)) => cmd::cleanup::run(args),
        Top::Sandbox(SandboxCommand::Snapshots(args)) => cmd::snapshots::run(args),
        Top::Sandbox(SandboxCommand::Fixture(args)) => cmd::fixture::run(args),
        Top::Sandbox(SandboxCommand::Image(args)) => cmd::images::run(args),
        Top::Sandbox(SandboxCommand::Faults(args)) => cmd::faults::run(args),
        Top::Sandbox(SandboxCommand::Schema(args)) => cmd::schema::run(args),
        Top::Sandbox(SandboxCommand::Serve(args)) => cmd::serve::run(args),
        Top::Sandbox(SandboxCommand::Init(args)) => cmd::init::run(args),
        Top::Sandbox(SandboxCommand::Keygen(args)) => cmd::keygen::run(args),
        Top::Sandbox(SandboxCommand::Verify(args)) => cmd::verify::run(args),
        Top::Sandbox(SandboxCommand::Add(args)) => cmd::enroll::add(args),
        Top::Sandbox(SandboxCommand::List(args)) => cmd::enroll::list(args),
        Top::Sandbox(SandboxCommand::Remove(args)) => cmd::enroll::remove(args),
        Top::Completions { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            // Generated in memory: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "checkfu", &mut script);
            match cmd::out::write(&script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            }
        }
    }
}
