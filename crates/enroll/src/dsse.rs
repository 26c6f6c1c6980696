//! DSSE v1 (Dead Simple Signing Envelope): the envelope JSON and the
//! pre-authentication encoding (PAE) that is what gets signed.
//!
//! `PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`,
//! lengths as ASCII decimal byte counts. Written here because it is nine
//! lines; tested against the specification's own example.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::keys::key_id;

/// The pre-authentication encoding of `payload` under `payload_type`.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// One signature: the key id and the base64 (standard alphabet, padded)
/// ed25519 signature over the PAE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DsseSignature {
    /// [`key_id`] of the signing key (informational; never trusted).
    #[serde(default)]
    pub keyid: String,
    /// Base64 signature.
    pub sig: String,
}

/// A DSSE envelope: base64 payload, its type, and signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Base64 (standard, padded) payload bytes.
    pub payload: String,
    /// The payload's media type, e.g. `application/vnd.in-toto+json`.
    pub payload_type: String,
    /// At least one signature.
    pub signatures: Vec<DsseSignature>,
}

impl Envelope {
    /// Signs `payload` under `payload_type` with `key`.
    pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
        let sig = key.sign(&pae(payload_type, payload));
        Envelope {
            payload: STANDARD.encode(payload),
            payload_type: payload_type.to_owned(),
            signatures: vec![DsseSignature {
                keyid: key_id(&key.verifying_key()),
                sig: STANDARD.encode(sig.to_bytes()),
            }],
        }
    }

    /// The payload bytes.
    ///
    /// # Errors
    /// A message when the payload is not base64.
    pub fn payload_bytes(&self) -> Result<Vec<u8>, String> {
        STANDARD
            .decode(&self.payload)
            .map_err(|e| format!("payload is not base64: {e}"))
    }

    /// Whether some signature verifies (strict ed25519) under `key` over the
    /// PAE of the payload. The key id is not consulted.
    pub fn verified_by(&self, key: &VerifyingKey) -> bool {
        let Ok(payload) = self.payload_bytes() else {
            return false;
        };
        let message = pae(&self.payload_type, &payload);
        self.signatures.iter().any(|s| {
            STANDARD
                .decode(&s.sig)
                .ok()
                .and_then(|b| Signature::from_slice(&b).ok())
                .is_some_and(|sig| key.verify_strict(&message, &sig).is_ok())
        })
    }
}
