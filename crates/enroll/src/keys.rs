//! ed25519 key pairs as files: the private key in PKCS#8 PEM (mode 0600),
//! the public key in SPKI PEM.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::EnrollError;

/// File name of the private key `keygen` writes.
pub const PRIVATE_KEY_FILE: &str = "checkfu-signing.key.pem";
/// File name of the public key `keygen` writes.
pub const PUBLIC_KEY_FILE: &str = "checkfu-signing.pub.pem";

/// The two files of a generated key pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFiles {
    /// PKCS#8 PEM private key, mode 0600.
    pub private: PathBuf,
    /// SPKI PEM public key, mode 0644.
    pub public: PathBuf,
    /// [`key_id`] of the public key.
    pub key_id: String,
}

/// Generates a key pair from the system's random source and writes it to
/// `dir` ([`PRIVATE_KEY_FILE`], [`PUBLIC_KEY_FILE`]); `dir` is created if
/// missing. Neither file is overwritten: both are created exclusively, and
/// when the second cannot be created the first is removed again.
///
/// # Errors
/// [`EnrollError::Exists`] when either file exists; [`EnrollError::Io`];
/// [`EnrollError::Random`].
pub fn generate(dir: &Path) -> Result<KeyFiles, EnrollError> {
    let private = dir.join(PRIVATE_KEY_FILE);
    let public = dir.join(PUBLIC_KEY_FILE);
    for p in [&private, &public] {
        if p.exists() {
            return Err(EnrollError::Exists {
                path: p.display().to_string(),
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| EnrollError::io(dir, e))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| EnrollError::Random(e.to_string()))?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    let private_pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| EnrollError::malformed(&private, e.to_string()))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| EnrollError::malformed(&public, e.to_string()))?;
    write_new(&private, private_pem.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public, public_pem.as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&private);
        return Err(e);
    }
    Ok(KeyFiles {
        private,
        public,
        key_id: key_id(&key.verifying_key()),
    })
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), EnrollError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => EnrollError::Exists {
                path: path.display().to_string(),
            },
            _ => EnrollError::io(path, e),
        })?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| EnrollError::io(path, e))
}

/// Reads a PKCS#8 PEM ed25519 private key.
///
/// # Errors
/// [`EnrollError::Io`]; [`EnrollError::Malformed`] when it is not one.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, EnrollError> {
    let pem = std::fs::read_to_string(path).map_err(|e| EnrollError::io(path, e))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        EnrollError::malformed(path, format!("not a PKCS#8 PEM ed25519 private key: {e}"))
    })
}

/// Reads an SPKI PEM ed25519 public key.
///
/// # Errors
/// [`EnrollError::Io`]; [`EnrollError::Malformed`] when it is not one.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, EnrollError> {
    let pem = std::fs::read_to_string(path).map_err(|e| EnrollError::io(path, e))?;
    VerifyingKey::from_public_key_pem(&pem).map_err(|e| {
        EnrollError::malformed(path, format!("not an SPKI PEM ed25519 public key: {e}"))
    })
}

/// The key id a signature carries: `sha256:` and the lowercase hex SHA-256
/// of the public key's SPKI DER encoding.
pub fn key_id(key: &VerifyingKey) -> String {
    let der = key
        .to_public_key_der()
        .map(|d| d.as_bytes().to_vec())
        .unwrap_or_else(|_| key.as_bytes().to_vec());
    format!("sha256:{}", hex::encode(Sha256::digest(der)))
}
