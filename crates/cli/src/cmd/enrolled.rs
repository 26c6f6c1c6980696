//! `--provider ID` for an enrolled provider: its registry entry, its
//! enrolled envelope (re-read from its signed evidence) and ceiling, and
//! the connection.

use std::path::Path;

use checkfu_sandbox_enroll::registry::{self, Registry, Transport};
use checkfu_sandbox_runtime::ceiling::intersect;
use checkfu_sandbox_runtime::Enrollment;
use checkfu_sandbox_wire::WireClient;

use super::fail::Failure;
use super::ProviderChoice;

/// Looks `id` up in the registry at `path`: how it is reached (a command
/// or socket choice) and its enrollment — the envelope its signed evidence
/// carries (signature checked again under its key) and its ceiling.
///
/// # Errors
/// 2 when no provider is enrolled as `id`; 125 when the registry, the key
/// or the evidence does not read or verify.
pub fn lookup(id: &str, path: &Path) -> Result<(ProviderChoice, Enrollment), Failure> {
    let reg = Registry::load(path).map_err(|e| Failure::checkfu(e.to_string()))?;
    let Some(entry) = reg.get(id) else {
        let known: Vec<&str> = reg.providers.iter().map(|e| e.id.as_str()).collect();
        return Err(Failure::usage(format!(
            "--provider: expected memory, docker, linux or an enrolled id ({}), actual {id:?} (registry {})",
            if known.is_empty() {
                "none enrolled".to_owned()
            } else {
                known.join(", ")
            },
            path.display()
        )));
    };
    let envelope = registry::enrolled_envelope(entry)
        .map_err(|e| Failure::checkfu(format!("--provider {id}: {e}")))?;
    let choice = match &entry.transport {
        Transport::Command(argv) => ProviderChoice::Command {
            line: argv.join(" "),
            argv: argv.clone(),
        },
        Transport::Socket(p) => ProviderChoice::Socket(p.clone()),
    };
    // The provider's code is re-checked on every use: an enrolled
    // executable edited after enrollment no longer matches the subject its
    // signed evidence names, and is refused before it is started.
    let code = super::served::code(&choice)?;
    let key = checkfu_sandbox_enroll::keys::read_verifying_key(&entry.key)
        .map_err(|e| Failure::checkfu(format!("--provider {id}: {e}")))?;
    let bytes = std::fs::read(&entry.evidence).map_err(|e| {
        Failure::checkfu(format!(
            "--provider {id}: evidence {}: {e}",
            entry.evidence.display()
        ))
    })?;
    if let Err(reasons) = checkfu_sandbox_enroll::verify::verify(&bytes, &key, &code, &envelope) {
        let reasons: Vec<String> = reasons.iter().map(ToString::to_string).collect();
        return Err(Failure::checkfu(format!(
            "--provider {id}: the provider no longer matches its enrolled evidence: {}",
            reasons.join("; ")
        )));
    }
    Ok((
        choice,
        Enrollment {
            envelope,
            ceiling: entry.ceiling.clone(),
        },
    ))
}

/// Connects to an enrolled provider and reports on stderr every claim its
/// ceiling cuts down.
///
/// # Errors
/// Those of `backend::wire`.
pub async fn connect(
    id: &str,
    served: &ProviderChoice,
    enrollment: &Enrollment,
) -> Result<WireClient, Failure> {
    let client = super::backend::wire(served).await?;
    if let Ok((_, cuts)) = intersect(&enrollment.envelope, &enrollment.ceiling) {
        for c in cuts {
            eprintln!("checkfu: {id}: cut: {c}");
        }
    }
    Ok(client)
}
