//! What signed evidence is about: the provider's code and its envelope.
//!
//! Subjects, by name (in-toto `ResourceDescriptor`s with a `sha256`
//! digest):
//! - [`EXECUTABLE`]: the SHA-256 of the file the provider command starts
//!   (its first word, resolved on `PATH` when it has no slash);
//! - [`IMAGE`]: the image's manifest digest, for a provider shipped as an
//!   OCI image;
//! - [`ENVELOPE`]: the SHA-256 of the capability envelope's canonical JSON
//!   (members sorted by key, no whitespace).
//!
//! A provider reached over a socket has no code subject: only its
//! envelope is bound.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::conformance::evidence::canonical_json;
use checkfu_sandbox_contract::SandboxProviderCapabilities;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::EnrollError;

/// Subject name of the provider's executable.
pub const EXECUTABLE: &str = "provider-executable";
/// Subject name of the provider's OCI image.
pub const IMAGE: &str = "provider-image";
/// Subject name of the provider's capability envelope.
pub const ENVELOPE: &str = "provider-envelope";

/// An in-toto resource descriptor: a name and its digests (`sha256` →
/// lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subject {
    /// One of [`EXECUTABLE`], [`IMAGE`], [`ENVELOPE`].
    pub name: String,
    /// `{"sha256": "<64 hex>"}`.
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    /// A subject with one `sha256` digest.
    pub fn sha256(name: &str, hex: String) -> Subject {
        Subject {
            name: name.to_owned(),
            digest: BTreeMap::from([("sha256".to_owned(), hex)]),
        }
    }

    /// Its `sha256` digest, if any.
    pub fn sha256_hex(&self) -> Option<&str> {
        self.digest.get("sha256").map(String::as_str)
    }
}

/// How the provider's code is identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// The SHA-256 (hex) of the executable file.
    Executable(String),
    /// The image's manifest digest, hex after `sha256:`.
    Image(String),
    /// Reached over a socket: no code subject.
    Socket,
}

/// The subjects of a provider: its code (unless [`Code::Socket`]) and its
/// envelope, in that order.
pub fn subjects(code: &Code, envelope: &SandboxProviderCapabilities) -> Vec<Subject> {
    let mut out = Vec::new();
    match code {
        Code::Executable(hex) => out.push(Subject::sha256(EXECUTABLE, hex.clone())),
        Code::Image(hex) => out.push(Subject::sha256(IMAGE, hex.clone())),
        Code::Socket => {}
    }
    out.push(Subject::sha256(ENVELOPE, envelope_sha256(envelope)));
    out
}

/// The lowercase hex SHA-256 of the envelope's canonical JSON
/// ([`canonical_json`]: members sorted by key, no whitespace) — the digest
/// the suite's evidence records as `envelope_sha256`, without `sha256:`.
pub fn envelope_sha256(envelope: &SandboxProviderCapabilities) -> String {
    let value = serde_json::to_value(envelope).unwrap_or_default();
    hex::encode(Sha256::digest(canonical_json(&value).as_bytes()))
}

/// The file a command's first word names: itself when it contains a
/// slash, else the first executable match on `PATH`.
///
/// # Errors
/// [`EnrollError::Malformed`] when it names no file.
pub fn resolve_executable(program: &str) -> Result<PathBuf, EnrollError> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(EnrollError::malformed(
        Path::new(program),
        "no such executable on PATH",
    ))
}

/// The lowercase hex SHA-256 of a file's bytes.
///
/// # Errors
/// [`EnrollError::Io`].
pub fn sha256_file(path: &Path) -> Result<String, EnrollError> {
    let mut f = std::fs::File::open(path).map_err(|e| EnrollError::io(path, e))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| EnrollError::io(path, e))?;
    Ok(hex::encode(h.finalize()))
}
