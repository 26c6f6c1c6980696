//! The partner path for sandbox providers (spec "From adapter to qualified
//! provider"; DESIGN §4): a provider Checkfu did not compile is tested,
//! its evidence signed, verified against the live provider, and enrolled
//! under a ceiling.
//!
//! - [`keys`]: ed25519 key pairs as PKCS#8 / SPKI PEM files.
//! - [`dsse`]: the DSSE v1 envelope and its pre-authentication encoding.
//! - [`statement`]: the in-toto Statement v1 carrying conformance evidence
//!   as our predicate ([`statement::PREDICATE_TYPE`]).
//! - [`subject`]: what the evidence is about — the provider's code
//!   (executable or image digest) and its envelope.
//! - [`verify`]: every check `checkfu sandbox verify` makes, each failure
//!   a [`verify::Reason`].
//! - [`registry`]: the enrolled-providers file (TOML).
//! - [`scaffold`]: `checkfu sandbox init`, a provider project to start from.
//!
//! Decisions: `docs/decisions/014-signed-evidence.md`.

pub mod dsse;
pub mod keys;
pub mod registry;
pub mod scaffold;
pub mod statement;
pub mod subject;
pub mod verify;

/// Errors of key, evidence and registry files.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file exists where a new one would be written.
    #[error("{path}: already exists; refusing to overwrite it")]
    Exists {
        /// The file.
        path: String,
    },
    /// A file's content is not what it must be.
    #[error("{path}: {what}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong, naming the field where there is one.
        what: String,
    },
    /// The system's random source failed.
    #[error("random source: {0}")]
    Random(String),
}

impl EnrollError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        EnrollError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn malformed(path: &std::path::Path, what: impl Into<String>) -> Self {
        EnrollError::Malformed {
            path: path.display().to_string(),
            what: what.into(),
        }
    }
}
