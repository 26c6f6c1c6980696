//! `checkfu sandbox faults`: the memory oracle's named faults.

use std::process::ExitCode;

use checkfu_sandbox_conformance::faults::caught_by;
use checkfu_sandbox_memory::Fault;

/// Flags of `checkfu sandbox faults`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  checkfu sandbox faults\n  checkfu sandbox test --inject clone-reuses-source-id\n\n\
Exit status: 0; 141 when stdout was closed before every line was written (as a SIGPIPE death)."
)]
pub struct FaultsArgs {}

/// Prints one line per fault: name, the rule it breaks, where it is caught.
pub fn run(_args: FaultsArgs) -> ExitCode {
    let all = Fault::all();
    let width = all.iter().map(|f| f.name().len()).max().unwrap_or(0);
    for fault in all {
        let name = fault.name();
        let row = format!(
            "{name:<width$}  {}  [caught by {}]",
            fault.rule(),
            caught_by(&name)
        );
        if let Err(gone) = super::out::line(&row) {
            return gone.exit();
        }
    }
    ExitCode::SUCCESS
}
