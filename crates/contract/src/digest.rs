//! Content digests and pinned image references (spec "Bounds": digests are
//! `^sha256:[0-9a-f]{64}$`; DESIGN D3).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A SHA-256 digest in the form `sha256:` followed by 64 lower-case hex digits.
///
/// Wire form: that string. Upper-case hex, other algorithms, and any other
/// length are refused.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

/// Why a string is not a digest or a pinned image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}, actual {actual:?}")]
pub struct DigestError {
    /// The accepted shape.
    pub expected: &'static str,
    /// The refused input, verbatim.
    pub actual: String,
}

const DIGEST_SHAPE: &str = "sha256: followed by 64 lower-case hex digits";
const IMAGE_SHAPE: &str = "name@sha256:<64 lower-case hex digits>";

impl Digest {
    /// Parses `sha256:<64 hex>`.
    ///
    /// # Errors
    /// [`DigestError`] for any other shape.
    pub fn parse(text: &str) -> Result<Self, DigestError> {
        let ok = text.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if ok {
            Ok(Digest(text.to_owned()))
        } else {
            Err(DigestError {
                expected: DIGEST_SHAPE,
                actual: text.to_owned(),
            })
        }
    }

    /// The digest of `bytes`, computed by the caller's SHA-256 as 32 raw bytes.
    pub fn from_sha256_bytes(raw: [u8; 32]) -> Self {
        Digest(format!("sha256:{}", hex::encode(raw)))
    }

    /// The full `sha256:<hex>` text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits without the `sha256:` prefix.
    pub fn hex(&self) -> &str {
        &self.0[7..]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.0)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}
impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Digest::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"})
    }
}

/// A pinned image reference `name@sha256:<hex>` (the instance's `root_image`).
///
/// `name` is non-empty, at most 255 bytes, of `[a-z0-9._/:-]`, and may not
/// itself contain `@`. The digest suffix is what an instance must report as
/// `materialization.image_digest` (spec "Identity is cross-checked").
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageReference {
    text: String,
    at: usize,
}

impl ImageReference {
    /// Parses `name@sha256:<hex>`.
    ///
    /// # Errors
    /// [`DigestError`] when the name is empty or malformed, or the digest is.
    pub fn parse(text: &str) -> Result<Self, DigestError> {
        let err = || DigestError {
            expected: IMAGE_SHAPE,
            actual: text.to_owned(),
        };
        let at = text.find('@').ok_or_else(err)?;
        let name = &text[..at];
        let name_ok = !name.is_empty()
            && name.len() <= 255
            && name
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'/' | b':' | b'-'));
        if !name_ok || Digest::parse(&text[at + 1..]).is_err() {
            return Err(err());
        }
        Ok(ImageReference {
            text: text.to_owned(),
            at,
        })
    }

    /// The repository name before `@`.
    pub fn name(&self) -> &str {
        &self.text[..self.at]
    }

    /// The digest suffix after `@`.
    pub fn digest(&self) -> Digest {
        Digest(self.text[self.at + 1..].to_owned())
    }

    /// The whole reference text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
impl fmt::Debug for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImageReference({})", self.text)
    }
}
impl Serialize for ImageReference {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}
impl<'de> Deserialize<'de> for ImageReference {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ImageReference::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
#[cfg(feature = "schema")]
impl schemars::JsonSchema for ImageReference {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ImageReference".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[a-z0-9._/:-]{1,255}@sha256:[0-9a-f]{64}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn digest_shapes() {
        assert!(Digest::parse(&format!("sha256:{HEX}")).is_ok());
        assert!(Digest::parse(&format!("sha256:{}", HEX.to_uppercase())).is_err());
        assert!(Digest::parse(&format!("sha512:{HEX}")).is_err());
        assert!(Digest::parse(&format!("sha256:{}", &HEX[1..])).is_err());
        assert!(Digest::parse(&format!("sha256:{HEX}0")).is_err());
    }

    #[test]
    fn image_reference_splits_name_and_digest() {
        let r = ImageReference::parse(&format!("checkfu-fixture@sha256:{HEX}")).unwrap();
        assert_eq!(r.name(), "checkfu-fixture");
        assert_eq!(r.digest().hex(), HEX);
        assert!(ImageReference::parse(&format!("@sha256:{HEX}")).is_err());
        assert!(ImageReference::parse("busybox:latest").is_err());
        assert!(ImageReference::parse(&format!("Busy@sha256:{HEX}")).is_err());
    }

    #[test]
    fn raw_bytes_render_as_lower_case_hex() {
        let mut raw = [0u8; 32];
        raw[0] = 0xAB;
        raw[31] = 0x0F;
        let d = Digest::from_sha256_bytes(raw);
        assert_eq!(d.hex(), format!("ab{}0f", "0".repeat(60)));
        assert_eq!(Digest::parse(d.as_str()), Ok(d));
    }
}
