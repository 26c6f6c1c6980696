//! `checkfu sandbox faults`: the memory oracle's named faults.

use std::process::ExitCode;

use checkfu_sandbox_conformance::faults::caught_by;
use checkfu_sandbox_memory::Fault;

/// Flags of `checkfu sandbox faults`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  checkfu sandbox faults\n  checkfu sandbox test --inject clone-reuses-source-id"
)]
pub struct FaultsArgs {}

/// Prints one line per fault: name, the rule it breaks, where it is caught.
pub fn run(_args: FaultsArgs) -> ExitCode {
    let all = Fault::all();
    let width = all.iter().map(|f| f.name().len()).max().unwrap_or(0);
    for fault in all {
        let name = fault.name();
        println!(
            "{name:<width$}  {}  [caught by {}]",
            fault.rule(),
            caught_by(&name)
        );
    }
    ExitCode::SUCCESS
}
