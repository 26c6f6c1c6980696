//! File paths as the kernel knows them: bytes (decision 021).
//!
//! A Linux file name is any sequence of bytes without `/` and NUL; a
//! workload can create one that is not UTF-8 (`printf 'bad-\377'`). Every
//! member path that can name a file a workload made (listings, reads,
//! writes) is a [`SandboxPath`], which travels losslessly:
//!
//! * a path whose bytes are valid UTF-8 is a JSON string, exactly as before
//!   (`"/mnt/session/outputs/a.txt"`);
//! * any other path is an object with one member, its bytes as standard
//!   padded base64: `{"bytes_base64": "L21udC9iYWQt/w=="}`.
//!
//! The form is canonical: the object form of bytes that are valid UTF-8 is
//! refused at decode, so decoding and encoding again is byte-identical.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A sandbox file path as bytes; see the module documentation for its
/// wire form. Whether it is absolute and normalized is the validators'
/// business ([`crate::validate::path_problem`]), not the type's.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SandboxPath(Vec<u8>);

impl SandboxPath {
    /// The path from raw bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        SandboxPath(bytes.into())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The raw bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// The path as text, when its bytes are valid UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The path as an `OsStr` (byte-exact on Unix).
    #[cfg(unix)]
    pub fn as_os_str(&self) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(&self.0)
    }

    /// The path below `root` (whole components, no leading `/`), or `None`
    /// when it is not strictly below `root`.
    pub fn relative_to(&self, root: &str) -> Option<&[u8]> {
        let root = root.as_bytes();
        let rest = if root == b"/" {
            self.0.strip_prefix(b"/")?
        } else {
            self.0.strip_prefix(root)?.strip_prefix(b"/")?
        };
        (!rest.is_empty()).then_some(rest)
    }

    /// `root` joined with a relative path of bytes (`root/rel`).
    pub fn join(root: &str, rel: &[u8]) -> Self {
        let mut bytes = root.trim_end_matches('/').as_bytes().to_vec();
        bytes.push(b'/');
        bytes.extend_from_slice(rel);
        SandboxPath(bytes)
    }

    /// The path for humans: its text when valid UTF-8, otherwise the text
    /// with each byte that is not part of valid UTF-8 written `\xNN`
    /// (lossless: a literal backslash is written `\\` in that form).
    pub fn display(&self) -> String {
        match self.to_str() {
            Some(s) => s.to_owned(),
            None => escape_bytes(&self.0),
        }
    }
}

/// `bytes` as text with invalid UTF-8 bytes as `\xNN` and `\` as `\\`.
fn escape_bytes(mut bytes: &[u8]) -> String {
    let mut out = String::new();
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(&s.replace('\\', "\\\\"));
                break;
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(
                    &std::str::from_utf8(good)
                        .unwrap_or("")
                        .replace('\\', "\\\\"),
                );
                let bad = e.error_len().unwrap_or(rest.len());
                for b in &rest[..bad] {
                    out.push_str(&format!("\\x{b:02x}"));
                }
                bytes = &rest[bad..];
            }
        }
    }
    out
}

impl fmt::Debug for SandboxPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.display())
    }
}

impl fmt::Display for SandboxPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

impl AsRef<[u8]> for SandboxPath {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for SandboxPath {
    fn from(s: &str) -> Self {
        SandboxPath(s.as_bytes().to_vec())
    }
}
impl From<String> for SandboxPath {
    fn from(s: String) -> Self {
        SandboxPath(s.into_bytes())
    }
}
impl From<&String> for SandboxPath {
    fn from(s: &String) -> Self {
        SandboxPath(s.as_bytes().to_vec())
    }
}
impl From<&SandboxPath> for SandboxPath {
    fn from(p: &SandboxPath) -> Self {
        p.clone()
    }
}
impl From<Vec<u8>> for SandboxPath {
    fn from(b: Vec<u8>) -> Self {
        SandboxPath(b)
    }
}
impl From<&[u8]> for SandboxPath {
    fn from(b: &[u8]) -> Self {
        SandboxPath(b.to_vec())
    }
}
#[cfg(unix)]
impl From<&std::path::Path> for SandboxPath {
    fn from(p: &std::path::Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        SandboxPath(p.as_os_str().as_bytes().to_vec())
    }
}

/// The path for humans ([`SandboxPath::display`]), e.g. in an error.
impl From<&SandboxPath> for String {
    fn from(p: &SandboxPath) -> Self {
        p.display()
    }
}
/// The path for humans ([`SandboxPath::display`]), e.g. in an error.
impl From<SandboxPath> for String {
    fn from(p: SandboxPath) -> Self {
        p.display()
    }
}

impl PartialEq<str> for SandboxPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}
impl PartialEq<&str> for SandboxPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}
impl PartialEq<String> for SandboxPath {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_bytes()
    }
}
impl PartialEq<SandboxPath> for str {
    fn eq(&self, other: &SandboxPath) -> bool {
        self.as_bytes() == other.0
    }
}
impl PartialEq<SandboxPath> for &str {
    fn eq(&self, other: &SandboxPath) -> bool {
        self.as_bytes() == other.0
    }
}
impl PartialEq<SandboxPath> for String {
    fn eq(&self, other: &SandboxPath) -> bool {
        self.as_bytes() == other.0
    }
}

/// The wire member of the object form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BytesForm {
    bytes_base64: String,
}

impl Serialize for SandboxPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.to_str() {
            Some(text) => s.serialize_str(text),
            None => BytesForm {
                bytes_base64: STANDARD.encode(&self.0),
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SandboxPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = SandboxPath;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a path: a string, or {\"bytes_base64\": ...} for bytes that are not UTF-8",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SandboxPath, E> {
                Ok(SandboxPath::from(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<SandboxPath, E> {
                Ok(SandboxPath::from(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<SandboxPath, A::Error> {
                let form =
                    BytesForm::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let bytes = STANDARD.decode(form.bytes_base64.as_bytes()).map_err(|e| {
                    serde::de::Error::custom(format!(
                        "bytes_base64: expected standard padded base64: {e}"
                    ))
                })?;
                if std::str::from_utf8(&bytes).is_ok() {
                    return Err(serde::de::Error::custom(
                        "bytes_base64: a path whose bytes are valid UTF-8 travels as a string",
                    ));
                }
                Ok(SandboxPath(bytes))
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for SandboxPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SandboxPath".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A file path as bytes: a string when the bytes are valid UTF-8, otherwise an object whose bytes_base64 holds them (standard padded base64; the object form of valid UTF-8 is refused).",
            "oneOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "properties": {
                        "bytes_base64": {
                            "type": "string",
                            "contentEncoding": "base64",
                            "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
                        }
                    },
                    "required": ["bytes_base64"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_paths_are_strings_and_other_bytes_are_base64_objects() {
        let text = SandboxPath::from("/mnt/session/outputs/a.txt");
        assert_eq!(
            serde_json::to_string(&text).unwrap(),
            "\"/mnt/session/outputs/a.txt\""
        );
        let bytes = SandboxPath::from_bytes(b"/o/bad-\xff".to_vec());
        let json = serde_json::to_string(&bytes).unwrap();
        assert_eq!(json, "{\"bytes_base64\":\"L28vYmFkLf8=\"}");
        let back: SandboxPath = serde_json::from_str(&json).unwrap();
        assert_eq!(back.as_bytes(), b"/o/bad-\xff");
    }

    #[test]
    fn the_object_form_of_utf8_extra_members_and_bad_base64_are_refused() {
        for bad in [
            "{\"bytes_base64\":\"L28vYQ==\"}",
            "{\"bytes_base64\":\"L28vYmFkLf8=\",\"x\":1}",
            "{\"bytes_base64\":\"L28vYmFkLf8\"}",
            "{}",
            "7",
        ] {
            assert!(
                serde_json::from_str::<SandboxPath>(bad).is_err(),
                "{bad} decoded"
            );
        }
    }

    #[test]
    fn display_escapes_invalid_bytes_losslessly() {
        assert_eq!(
            SandboxPath::from_bytes(b"/o/a\\b-\xff\xfe".to_vec()).display(),
            "/o/a\\\\b-\\xff\\xfe"
        );
        assert_eq!(SandboxPath::from("/o/a\\b").display(), "/o/a\\b");
    }

    #[test]
    fn relative_to_and_join_work_on_bytes() {
        let p = SandboxPath::from_bytes(b"/mnt/session/outputs/d/bad-\xff".to_vec());
        let rel = p.relative_to("/mnt/session/outputs").unwrap();
        assert_eq!(rel, b"d/bad-\xff");
        assert_eq!(SandboxPath::join("/mnt/session/outputs", rel), p);
        assert!(p.relative_to("/mnt/session/out").is_none());
        assert!(SandboxPath::from("/r").relative_to("/r").is_none());
    }
}
