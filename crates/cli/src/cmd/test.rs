//! `checkfu sandbox test`: the conformance suite against a provider.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use checkfu_sandbox_conformance::evidence::detail;
use checkfu_sandbox_conformance::{run_suite, ConformanceTarget, Progress, SuiteOptions};
use checkfu_sandbox_memory::Fault;

use super::ProviderFlags;

/// Flags of `checkfu sandbox test`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox test                                 # all nine cases on the embedded memory oracle
  checkfu sandbox test --provider docker --junit report.xml
  checkfu sandbox test --case stage-seal-execute --json -
  checkfu sandbox test --inject clone-reuses-source-id  # prove the suite can fail
  checkfu sandbox test --provider-cmd './my-provider --flag' --json evidence.json
  checkfu sandbox test --provider-cmd 'checkfu sandbox serve --inject identity-session-id'

A served provider (--provider-cmd, --provider-socket) is tested through its conformance/*
hooks (author-kit/PROTOCOL.md); the evidence names the command, the SHA-256 of its executable
and the digest of its envelope.

The --json and --junit files are created, and --evidence checked for writing, before any case
runs (an unwritable path fails at once) and removed again when the suite does not complete. SIGINT or SIGTERM stops the suite
mid-case and closes the target (Docker: every container, image and network of its scope and
its state directory, at most 60 s) before checkfu exits.

Exit status: 0 when no case failed or timed out; 1 otherwise; 2 on usage errors; 125 when the
suite could not start or evidence could not be written; 130/143 after SIGINT/SIGTERM; 141 when
stdout was closed early.")]
pub struct TestArgs {
    /// Provider under test.
    #[command(flatten)]
    pub provider: ProviderFlags,
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
    /// Sign the evidence with this PKCS#8 PEM ed25519 key (`checkfu sandbox keygen`); needs --evidence.
    #[arg(long, value_name = "KEY", requires = "evidence")]
    pub sign: Option<PathBuf>,
    /// Write the signed evidence (a DSSE envelope over an in-toto Statement v1) to FILE; needs --sign.
    #[arg(long, value_name = "FILE", requires = "sign")]
    pub evidence: Option<PathBuf>,
    /// Each case's deadline, in seconds (at least 1).
    #[arg(long, value_name = "SECONDS", default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..))]
    pub case_timeout: u64,
}

/// Where the evidence goes, opened before the suite runs.
struct Sinks {
    /// `--json PATH` (`None` for stdout or no JSON).
    json_file: Option<(String, std::fs::File)>,
    /// `--json -`.
    json_to_stdout: bool,
    /// `--junit PATH`.
    junit_file: Option<(PathBuf, std::fs::File)>,
}

impl Sinks {
    /// Creates (truncates) every evidence file now, so that an unwritable
    /// path fails before any case runs.
    fn open(args: &TestArgs) -> Result<Sinks, ExitCode> {
        let create = |path: &std::path::Path, flag: &str| {
            std::fs::File::create(path).map_err(|e| {
                eprintln!("checkfu: {flag} {}: cannot create: {e}", path.display());
                ExitCode::from(125)
            })
        };
        let json_file = match args.json.as_deref() {
            None | Some("-") => None,
            Some(path) => Some((path.to_owned(), create(path.as_ref(), "--json")?)),
        };
        let junit_file = match &args.junit {
            None => None,
            Some(path) => match create(path, "--junit") {
                Ok(f) => Some((path.clone(), f)),
                Err(code) => {
                    if let Some((p, _)) = &json_file {
                        let _ = std::fs::remove_file(p);
                    }
                    return Err(code);
                }
            },
        };
        // --evidence is written after the suite (once it is signed); check
        // now that it can be, without truncating evidence already there.
        if let Some(path) = &args.evidence {
            if let Err(code) = check_writable(path) {
                if let Some((p, _)) = &json_file {
                    let _ = std::fs::remove_file(p);
                }
                if let Some((p, _)) = &junit_file {
                    let _ = std::fs::remove_file(p);
                }
                return Err(code);
            }
        }
        Ok(Sinks {
            json_file,
            json_to_stdout: args.json.as_deref() == Some("-"),
            junit_file,
        })
    }

    /// Removes the files created by [`Sinks::open`]: the suite did not
    /// complete, and an empty file is no evidence.
    fn discard(self) {
        if let Some((path, file)) = self.json_file {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
        if let Some((path, file)) = self.junit_file {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Whether `path` can be written: opened for writing without truncating
/// (and removed again when this created it).
fn check_writable(path: &std::path::Path) -> Result<(), ExitCode> {
    let existed = std::fs::symlink_metadata(path).is_ok();
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => {
            eprintln!("checkfu: --evidence {}: cannot create: {e}", path.display());
            Err(ExitCode::from(125))
        }
    }
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
    let choice = match args.provider.choice() {
        Ok(c) => c,
        Err(e) => return super::fail::Failure::usage(e.to_string()).report(),
    };
    if let Err(f) = super::backend::injectable(&choice, &faults) {
        return f.report();
    }
    let signing = match args
        .sign
        .as_deref()
        .map(super::signed::read_key)
        .transpose()
    {
        Ok(k) => k,
        Err(f) => return f.report(),
    };
    // An enrolled provider is tested as `run` and `capabilities` use it:
    // its live envelope must equal the enrolled one, and the cases run
    // against it cut down to its ceiling.
    let enrollment = match &choice {
        super::ProviderChoice::Enrolled { id, registry } => {
            match super::enrolled::lookup(id, registry) {
                Ok((_, e)) => {
                    if let Ok((_, cuts)) =
                        checkfu_sandbox_runtime::ceiling::intersect(&e.envelope, &e.ceiling)
                    {
                        for c in cuts {
                            eprintln!("checkfu: {id}: cut: {c}");
                        }
                    }
                    Some(e)
                }
                Err(f) => return f.report(),
            }
        }
        _ => None,
    };
    let provider_command = match super::backend::provider_command(&choice) {
        Ok(c) => c,
        Err(f) => return f.report(),
    };
    let sinks = match Sinks::open(&args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => {
            sinks.discard();
            return code;
        }
    };
    runtime.block_on(async move {
        // Signal handlers first: from here on SIGINT and SIGTERM stop the
        // suite and close the target instead of killing checkfu.
        let stop = super::stop_signal();
        tokio::pin!(stop);
        let opened = super::backend::target(&choice, &args.busybox, faults);
        let target = tokio::select! {
            t = opened => match t {
                Ok(t) => t,
                Err(failure) => {
                    sinks.discard();
                    return failure.report();
                }
            },
            // A target being built is dropped: it sweeps what it made.
            s = &mut stop => {
                sinks.discard();
                return interrupted(s, None).await;
            }
        };
        let options = SuiteOptions {
            cases: args.cases.clone(),
            case_deadline: std::time::Duration::from_secs(args.case_timeout),
            injected_faults: args.inject.clone(),
            enrollment,
        };
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
        let suite = run_suite(target.clone(), &options, &progress);
        let outcome = tokio::select! {
            r = suite => r,
            // The suite's future is dropped here, mid-case; closing the
            // target removes whatever that case had made.
            s = &mut stop => {
                sinks.discard();
                return interrupted(s, Some(&target)).await;
            }
        };
        super::close_target(&target).await;
        let evidence = match outcome {
            Ok(mut e) => {
                e.provider_command = provider_command;
                e
            }
            Err(e) => {
                sinks.discard();
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
        if let Err(code) = write_evidence(&evidence, sinks) {
            return code;
        }
        if let (Some(key), Some(out)) = (&signing, &args.evidence) {
            let signed = super::signed::code_for(&choice, &evidence)
                .and_then(|code| super::signed::write(&evidence, &code, key, out));
            if let Err(f) = signed {
                return f.report();
            }
        }
        if evidence.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    })
}

/// Prints the table (stdout, or stderr with `--json -`) and writes the
/// JSON and JUnit evidence to the sinks opened before the suite ran.
fn write_evidence(
    evidence: &checkfu_sandbox_conformance::Evidence,
    sinks: Sinks,
) -> Result<(), ExitCode> {
    let json = format!(
        "{}\n",
        serde_json::to_string_pretty(evidence).unwrap_or_default()
    );
    if sinks.json_to_stdout {
        eprint!("{}", evidence.table());
        super::out::print(&json).map_err(|gone| gone.exit())?;
    } else {
        super::out::print(&evidence.table()).map_err(|gone| gone.exit())?;
    }
    if let Some((path, mut file)) = sinks.json_file {
        if let Err(e) = file.write_all(json.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("checkfu: --json {path}: {e}");
            return Err(ExitCode::from(125));
        }
    }
    if let Some((path, mut file)) = sinks.junit_file {
        let written = checkfu_sandbox_conformance::junit_xml(evidence)
            .map_err(std::io::Error::other)
            .and_then(|xml| file.write_all(xml.as_bytes()))
            .and_then(|()| file.flush());
        if let Err(e) = written {
            eprintln!("checkfu: --junit {}: {e}", path.display());
            return Err(ExitCode::from(125));
        }
    }
    Ok(())
}

/// After SIGINT or SIGTERM: closes `target` (bounded) and returns 130 or
/// 143.
async fn interrupted(
    signal: std::io::Result<super::Stop>,
    target: Option<&Arc<dyn ConformanceTarget>>,
) -> ExitCode {
    let code = match signal {
        Ok(stop) => stop.code(),
        Err(e) => {
            eprintln!("checkfu: cannot watch for signals: {e}");
            if let Some(t) = target {
                super::close_target(t).await;
            }
            return ExitCode::from(125);
        }
    };
    match target {
        Some(t) => {
            eprintln!(
                "checkfu: interrupted; stopping the suite and closing the {} target",
                t.name()
            );
            super::close_target(t).await;
        }
        None => eprintln!("checkfu: interrupted"),
    }
    ExitCode::from(code)
}
