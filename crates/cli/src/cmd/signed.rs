//! `checkfu sandbox test --sign KEY --evidence FILE`: the suite's evidence
//! as a DSSE envelope over an in-toto Statement v1.

use std::path::Path;

use checkfu_sandbox_contract::conformance::evidence::Evidence;
use checkfu_sandbox_contract::Timestamp;
use checkfu_sandbox_enroll::keys;
use checkfu_sandbox_enroll::statement::{Predicate, Statement};
use checkfu_sandbox_enroll::subject::{self, Code};
use ed25519_dalek::SigningKey;

use super::fail::Failure;
use super::ProviderChoice;

/// The checkfu version evidence records.
pub const CHECKFU_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Reads the signing key before the suite runs, so a bad key fails first.
///
/// # Errors
/// 125 naming `--sign` and what is wrong.
pub fn read_key(path: &Path) -> Result<SigningKey, Failure> {
    keys::read_signing_key(path).map_err(|e| Failure::checkfu(format!("--sign: {e}")))
}

/// The code subject of a built-in provider: the running checkfu
/// executable, which contains it.
///
/// # Errors
/// 125 when the executable cannot be read.
pub fn builtin_code() -> Result<Code, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::checkfu(format!("--sign: the checkfu executable: {e}")))?;
    subject::sha256_file(&exe)
        .map(Code::Executable)
        .map_err(|e| Failure::checkfu(format!("--sign: {e}")))
}

/// The code subject of the provider `choice` names: the executable the
/// suite ran (its digest as the evidence records it), none for a socket,
/// the running checkfu for a built-in provider.
///
/// # Errors
/// 125 when the checkfu executable cannot be read, or a command's evidence
/// lacks its executable digest.
pub fn code_for(choice: &ProviderChoice, evidence: &Evidence) -> Result<Code, Failure> {
    match choice {
        ProviderChoice::Builtin(_) => builtin_code(),
        ProviderChoice::Socket(_) => Ok(Code::Socket),
        ProviderChoice::Image { hex, .. } => Ok(Code::Image(hex.clone())),
        // An enrolled provider reached over a socket has no command.
        ProviderChoice::Enrolled { .. } if evidence.provider_command.is_none() => Ok(Code::Socket),
        ProviderChoice::Command { .. } | ProviderChoice::Enrolled { .. } => evidence
            .provider_command
            .as_ref()
            .and_then(|c| c.executable_sha256.strip_prefix("sha256:"))
            .map(|hex| Code::Executable(hex.to_owned()))
            .ok_or_else(|| Failure::checkfu("--sign: the evidence names no provider executable")),
    }
}

/// Signs `evidence` about the provider whose code is `code` and writes the
/// DSSE envelope (JSON, one line) to `out`.
///
/// # Errors
/// 125 naming `--evidence` when the file cannot be written.
pub fn write(
    evidence: &Evidence,
    code: &Code,
    key: &SigningKey,
    out: &Path,
) -> Result<(), Failure> {
    let subjects = subject::subjects(code, &evidence.envelope);
    let predicate = Predicate::new(
        evidence.clone(),
        CHECKFU_VERSION,
        Timestamp::now().to_string(),
    );
    let envelope = Statement::new(subjects, predicate).sign(key);
    let text = format!("{}\n", serde_json::to_string(&envelope).unwrap_or_default());
    std::fs::write(out, text)
        .map_err(|e| Failure::checkfu(format!("--evidence {}: {e}", out.display())))
}
