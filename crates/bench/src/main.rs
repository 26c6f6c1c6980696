//! `checkfu-bench`: measures the seam side by side with a baseline taken in
//! the same run, and prints a markdown table (figure, ours, baseline,
//! ratio). Medians over repetitions, with the spread as p10–p90.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_memory::MemoryProvider;
use clap::Parser;

mod catalogue;
mod common;
mod docker;
mod fig1;
mod fig8;
mod linux;
mod stats;

use catalogue::{catalogue, check_doc};
use common::{docker_cli, f, fail, true_cmd};
use docker::{docker_bench, figures_docker};
use stats::{stat, table, time, Row};

/// Measure the sandbox seam against baselines taken in the same run.
#[derive(Debug, Parser)]
#[command(
    name = "checkfu-bench",
    after_help = "Examples:\n  checkfu-bench                      # every figure, table on stdout\n  checkfu-bench --quick --out table.md\n  checkfu-bench --only 1 --only 3\n\nFigures: 1 runtime overhead (memory), 2 cold start (without and from a warm pool), 3 warm execute,\n4 readFile 16 MiB, 5 durable round trip, 6 cleanup of 100 and 1,000 orphans,\n7 16 concurrent lifecycles (without and from a warm pool), 8 wire overhead (memory oracle served\nby this binary on stdio: execute, openProcess stdout), 9 idle cost of a pooled container,\n10 allowlist activation (Docker: nftables rules loaded into the instance) vs network none,\n11 the daemonless linux provider (cold start vs docker run and unshare, ready-to-execute,\nwarm execute vs docker exec, 16 concurrent, durable round trip vs the Docker provider; root).\n\n  checkfu-bench --list                                   # every row name, nothing measured\n  checkfu-bench --quick --only 1 --check-doc docs/PERFORMANCE.md"
)]
struct Args {
    /// Fewer repetitions (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Run only this figure (1-11, repeatable).
    #[arg(long = "only", value_name = "N")]
    only: Vec<u8>,
    /// Also write the table to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the name of every row a full run produces (the catalogue),
    /// one per line, and measure nothing.
    #[arg(long)]
    list: bool,
    /// After the run, check that every figure the tables of FILE name (the
    /// first cell of rows of a `| figure |` table) is one this bench
    /// produces; exit 1 naming those it does not. Presence only, never
    /// timings.
    #[arg(long, value_name = "FILE")]
    check_doc: Option<PathBuf>,
    /// Serve the memory oracle over the wire protocol on stdin/stdout
    /// (figure 8 spawns this binary so).
    #[arg(long, hide = true)]
    serve_memory: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let which = |n: u8| args.only.is_empty() || args.only.contains(&n);
    if args.list {
        for name in catalogue() {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    if args.serve_memory {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build();
        let served =
            checkfu_sandbox_wire::Served::new(Arc::new(MemoryProvider::with_system_clock()));
        return match rt.map(|rt| rt.block_on(checkfu_sandbox_wire::serve_stdio(served))) {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => {
                eprintln!("checkfu-bench: serve: {e}");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("checkfu-bench: {e}");
                ExitCode::from(125)
            }
        };
    }
    if which(11) {
        // Before any thread exists: the kernel refuses a new mount
        // namespace to a process whose threads share its file system
        // context.
        if let Err(e) = linux::private_mounts() {
            eprintln!("checkfu-bench: {e}");
            return ExitCode::from(125);
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("checkfu-bench: {e}");
            return ExitCode::from(125);
        }
    };
    let result = rt.block_on(async {
        let mut rows = Vec::new();
        if which(1) {
            eprintln!("figure 1: runtime overhead on the memory oracle");
            fig1::figure1(if args.quick { 500 } else { 5000 }, &mut rows).await?;
        }
        if which(8) {
            eprintln!("figure 8: wire overhead on the memory oracle");
            fig8::figure8(if args.quick { 500 } else { 5000 }, &mut rows).await?;
        }
        if (2..=7).chain([9, 10]).any(which) {
            figures_docker(&which, args.quick, &mut rows).await?;
        }
        if which(11) {
            linux::figure11(args.quick, &mut rows).await?;
        }
        Ok::<_, String>(rows)
    });
    match result {
        Ok(rows) => {
            let t = table(&rows);
            print!("{t}");
            if let Some(path) = &args.out {
                if let Err(e) = std::fs::write(path, &t) {
                    eprintln!("checkfu-bench: {}: {e}", path.display());
                    return ExitCode::from(125);
                }
            }
            let known = catalogue();
            // A row this run produced that the catalogue lacks would let
            // `--list` and `--check-doc` drift from what the bench measures.
            let uncatalogued: Vec<&str> = rows
                .iter()
                .map(|r| r.figure.as_str())
                .filter(|name| !known.iter().any(|k| k == name))
                .collect();
            if !uncatalogued.is_empty() {
                eprintln!(
                    "checkfu-bench: rows missing from the catalogue: {}",
                    uncatalogued.join("; ")
                );
                return ExitCode::from(1);
            }
            if let Some(path) = &args.check_doc {
                return check_doc(path, &known);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("checkfu-bench: {e}");
            ExitCode::from(1)
        }
    }
}
