//! `checkfu sandbox verify`: signed evidence against the provider given.

use std::path::PathBuf;
use std::process::ExitCode;

use checkfu_sandbox_enroll::{keys, verify};

use super::fail::Failure;
use super::served::{self, ServedFlags};

/// Flags of `checkfu sandbox verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit 0 only when all hold: a signature verifies under KEY; the \
statement is an in-toto Statement v1 with checkfu's conformance predicate type; its subjects are \
the provider's (the executable --provider-cmd starts, re-hashed now, and the envelope it answers \
with now); the suite revision is this checkfu's; every case whose tokens the envelope claims \
passed. Otherwise exit 1 with one line per reason.

Examples:
  checkfu sandbox verify --key keys/checkfu-signing.pub.pem --provider-cmd ./provider.py evidence.dsse.json

Exit status: 0 verified; 1 not verified; 2 on usage errors; 125 when the key, the file or the \
provider cannot be read."
)]
pub struct VerifyArgs {
    /// The SPKI PEM public key.
    #[arg(long, value_name = "PUB")]
    pub key: PathBuf,
    /// The provider the evidence must be about.
    #[command(flatten)]
    pub served: ServedFlags,
    /// The DSSE evidence file (`checkfu sandbox test --sign KEY --evidence FILE`).
    pub file: PathBuf,
}

/// Runs the command.
pub fn run(args: VerifyArgs) -> ExitCode {
    let served = match args.served.choice() {
        Ok(s) => s,
        Err(f) => return f.report(),
    };
    let key = match keys::read_verifying_key(&args.key) {
        Ok(k) => k,
        Err(e) => return Failure::checkfu(format!("--key: {e}")).report(),
    };
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => return Failure::checkfu(format!("{}: {e}", args.file.display())).report(),
    };
    let code = match served::code(&served) {
        Ok(c) => c,
        Err(f) => return f.report(),
    };
    let runtime = match super::tokio_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let envelope = runtime.block_on(served::envelope(&served));
    let envelope = match envelope {
        Ok(e) => e,
        Err(f) => return f.report(),
    };
    match verify::verify(&bytes, &key, &code, &envelope) {
        Ok(statement) => {
            let e = &statement.predicate.evidence;
            let line = format!(
                "verified: {} ({}), {} passed, {} skipped, suite {}, signed by {}\n",
                args.file.display(),
                e.provider,
                e.summary.passed,
                e.summary.skipped,
                e.suite_revision,
                keys::key_id(&key)
            );
            match super::out::print(&line) {
                Ok(()) => ExitCode::SUCCESS,
                Err(gone) => gone.exit(),
            }
        }
        Err(reasons) => {
            eprintln!("checkfu: {}: not verified:", args.file.display());
            for r in reasons {
                eprintln!("  {r}");
            }
            ExitCode::from(1)
        }
    }
}
