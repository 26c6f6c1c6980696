//! `checkfu sandbox test`: the conformance suite against a provider.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_conformance::evidence::detail;
use checkfu_sandbox_conformance::targets::memory::MemoryTarget;
use checkfu_sandbox_conformance::{run_suite, ConformanceTarget, Progress, SuiteOptions};
use checkfu_sandbox_memory::Fault;

use super::ProviderArg;

/// Flags of `checkfu sandbox test`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox test                                 # all nine cases on the embedded memory oracle
  checkfu sandbox test --provider docker --junit report.xml
  checkfu sandbox test --case stage-seal-execute --json -
  checkfu sandbox test --inject clone-reuses-source-id  # prove the suite can fail

Exit status: 0 when no case failed or timed out, 1 otherwise, 2 on usage errors.")]
pub struct TestArgs {
    /// Provider under test.
    #[arg(long, value_enum, default_value_t = ProviderArg::Memory)]
    pub provider: ProviderArg,
    /// Run only this case (repeatable); default all nine.
    #[arg(long = "case", value_name = "ID")]
    pub cases: Vec<String>,
    /// Inject a memory-oracle fault (repeatable; see `checkfu sandbox faults`).
    #[arg(long = "inject", value_name = "FAULT")]
    pub inject: Vec<String>,
    /// Write evidence JSON to PATH, or `-` for stdout (the table then goes to stderr).
    #[arg(long, value_name = "PATH|-")]
    pub json: Option<String>,
    /// Write JUnit XML to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// The static busybox the Docker fixture image is built from.
    #[arg(long, value_name = "PATH", default_value = checkfu_sandbox_docker::fixture::DEFAULT_BUSYBOX_PATH)]
    pub busybox: PathBuf,
    /// Each case's deadline, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 180)]
    pub case_timeout: u64,
}

/// Runs the command.
pub fn run(args: TestArgs) -> ExitCode {
    let mut faults = Vec::new();
    for name in &args.inject {
        match Fault::from_name(name) {
            Some(f) => faults.push(f),
            None => {
                eprintln!("checkfu: --inject {name:?}: no such fault; `checkfu sandbox faults` lists them");
                return ExitCode::from(2);
            }
        }
    }
    if !faults.is_empty() && args.provider != ProviderArg::Memory {
        eprintln!("checkfu: --inject applies to the memory oracle only; drop --provider or use --provider memory");
        return ExitCode::from(2);
    }
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let target: Arc<dyn ConformanceTarget> = match args.provider {
            ProviderArg::Memory => Arc::new(MemoryTarget::with_faults(faults)),
            ProviderArg::Docker => match super::docker_target(&args.busybox).await {
                Ok(t) => t,
                Err(message) => {
                    eprintln!("checkfu: docker: {message}");
                    return ExitCode::from(125);
                }
            },
        };
        let options = SuiteOptions {
            cases: args.cases.clone(),
            case_deadline: std::time::Duration::from_secs(args.case_timeout),
            injected_faults: args.inject.clone(),
        };
        let json_to_stdout = args.json.as_deref() == Some("-");
        let progress = move |p: Progress<'_>| {
            let mut err = std::io::stderr().lock();
            match p {
                Progress::Started { index, total, case } => {
                    let _ = writeln!(err, "[{index}/{total}] {} ...", case.id);
                }
                Progress::Finished {
                    index,
                    total,
                    record,
                } => {
                    let _ = writeln!(
                        err,
                        "[{index}/{total}] {} {} ({} ms){}",
                        record.id,
                        record.outcome.as_str(),
                        record.duration_ms,
                        match detail(record) {
                            d if d.is_empty() => String::new(),
                            d => format!(": {d}"),
                        }
                    );
                }
            }
        };
        let evidence = match run_suite(target.clone(), &options, &progress).await {
            Ok(e) => e,
            Err(e) => {
                super::close_target(&target).await;
                eprintln!("checkfu: {e}");
                let code = if matches!(e, checkfu_sandbox_conformance::SuiteError::UnknownCase(..))
                {
                    2
                } else {
                    125
                };
                return ExitCode::from(code);
            }
        };
        super::close_target(&target).await;
        if json_to_stdout {
            eprint!("{}", evidence.table());
        } else {
            print!("{}", evidence.table());
        }
        let json = serde_json::to_string_pretty(&evidence).unwrap_or_default();
        match args.json.as_deref() {
            Some("-") => println!("{json}"),
            Some(path) => {
                if let Err(e) = std::fs::write(path, format!("{json}\n")) {
                    eprintln!("checkfu: --json {path}: {e}");
                    return ExitCode::from(125);
                }
            }
            None => {}
        }
        if let Some(path) = &args.junit {
            if let Err(e) = std::fs::write(path, evidence.junit_xml()) {
                eprintln!("checkfu: --junit {}: {e}", path.display());
                return ExitCode::from(125);
            }
        }
        if evidence.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    })
}
