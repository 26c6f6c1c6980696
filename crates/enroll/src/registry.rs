//! The enrolled-providers registry: a TOML file of `[[provider]]` tables
//! (decision 015).
//!
//! ```toml
//! [[provider]]
//! id = "acme"
//! command = ["/opt/acme/provider"]      # or: socket = "/run/acme.sock"
//! evidence = "/opt/acme/evidence.dsse.json"
//! key = "/opt/acme/checkfu-signing.pub.pem"
//!
//! [provider.ceiling]
//! egress_certification = "advisory_filter"
//! ```
//!
//! Where it is: `--providers FILE`, else `$CHECKFU_PROVIDERS`, else
//! `$XDG_CONFIG_HOME/checkfu/providers.toml`, else
//! `~/.config/checkfu/providers.toml` ([`default_path`]).

use std::path::{Path, PathBuf};

use checkfu_sandbox_runtime::Ceiling;
use serde::{Deserialize, Serialize};

use crate::EnrollError;

/// Environment variable naming the registry file.
pub const PROVIDERS_ENV: &str = "CHECKFU_PROVIDERS";

/// How an enrolled provider is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking the wire protocol on stdio: program and
    /// arguments.
    Command(Vec<String>),
    /// A Unix socket a provider serves on.
    Socket(PathBuf),
}

/// One enrolled provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawEntry", into = "RawEntry")]
pub struct Entry {
    /// The id `--provider ID` selects; letters, digits, `-`, `_`, `.`.
    pub id: String,
    /// How it is reached.
    pub transport: Transport,
    /// The signed evidence (DSSE) it was enrolled with.
    pub evidence: PathBuf,
    /// The SPKI PEM public key the evidence verifies under.
    pub key: PathBuf,
    /// What it may claim (default: unbounded).
    pub ceiling: Ceiling,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    socket: Option<PathBuf>,
    evidence: PathBuf,
    key: PathBuf,
    #[serde(default)]
    ceiling: Ceiling,
}

impl TryFrom<RawEntry> for Entry {
    type Error = RegistryError;
    fn try_from(r: RawEntry) -> Result<Self, RegistryError> {
        check_id(&r.id)?;
        let transport = match (r.command, r.socket) {
            (Some(c), None) if !c.is_empty() => Transport::Command(c),
            (Some(_), None) => return Err(RegistryError::EmptyCommand { id: r.id }),
            (None, Some(s)) => Transport::Socket(s),
            (command, socket) => {
                return Err(RegistryError::Transport {
                    id: r.id,
                    command: command.is_some(),
                    socket: socket.is_some(),
                })
            }
        };
        Ok(Entry {
            id: r.id,
            transport,
            evidence: r.evidence,
            key: r.key,
            ceiling: r.ceiling,
        })
    }
}

impl From<Entry> for RawEntry {
    fn from(e: Entry) -> Self {
        let (command, socket) = match e.transport {
            Transport::Command(c) => (Some(c), None),
            Transport::Socket(s) => (None, Some(s)),
        };
        RawEntry {
            id: e.id,
            command,
            socket,
            evidence: e.evidence,
            key: e.key,
            ceiling: e.ceiling,
        }
    }
}

/// Why an id or an entry of the registry is refused. Each variant names
/// the id it is about; its message is the one the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The id is not 1..=64 of ASCII letters, digits, `-`, `_`, `.`.
    #[error("id {id:?}: expected 1 to 64 ASCII letters, digits, '-', '_' or '.'")]
    MalformedId {
        /// The id as given.
        id: String,
    },
    /// The id is one of [`BUILTIN_IDS`].
    #[error("id {id:?}: names a built-in provider")]
    BuiltinId {
        /// The id as given.
        id: String,
    },
    /// [`Registry::add`] was given an id already enrolled.
    #[error("provider {id} is already enrolled; remove it first")]
    AlreadyEnrolled {
        /// The id both entries carry.
        id: String,
    },
    /// An entry's `command` is an empty list.
    #[error("provider {id}: command is empty")]
    EmptyCommand {
        /// The entry's id.
        id: String,
    },
    /// An entry has both or neither of `command` and `socket`.
    #[error(
        "provider {id}: exactly one of command and socket is required \
         (command {}, socket {})",
        given(*command),
        given(*socket)
    )]
    Transport {
        /// The entry's id.
        id: String,
        /// Whether `command` was given.
        command: bool,
        /// Whether `socket` was given.
        socket: bool,
    },
}

fn given(present: bool) -> &'static str {
    if present {
        "given"
    } else {
        "absent"
    }
}

/// The ids of the providers built into checkfu (`--provider memory`,
/// `docker`, `linux`): no enrolled provider may take one.
pub const BUILTIN_IDS: [&str; 3] = ["memory", "docker", "linux"];

/// Checks an id: 1..=64 of ASCII letters, digits, `-`, `_`, `.`, and not
/// one of [`BUILTIN_IDS`] (the built-in providers).
///
/// # Errors
/// [`RegistryError::MalformedId`] or [`RegistryError::BuiltinId`], naming
/// the id.
pub fn check_id(id: &str) -> Result<(), RegistryError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !ok {
        return Err(RegistryError::MalformedId { id: id.to_owned() });
    }
    if BUILTIN_IDS.contains(&id) {
        return Err(RegistryError::BuiltinId { id: id.to_owned() });
    }
    Ok(())
}

/// The registry file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Enrolled providers, in enrollment order.
    #[serde(default, rename = "provider")]
    pub providers: Vec<Entry>,
}

impl Registry {
    /// Reads the registry at `path`; a missing file is an empty registry.
    ///
    /// # Errors
    /// [`EnrollError::Io`]; [`EnrollError::Malformed`] naming the TOML
    /// error, or a duplicate id.
    pub fn load(path: &Path) -> Result<Registry, EnrollError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Registry::default()),
            Err(e) => return Err(EnrollError::io(path, e)),
        };
        let r: Registry =
            toml::from_str(&text).map_err(|e| EnrollError::malformed(path, e.to_string()))?;
        for (i, e) in r.providers.iter().enumerate() {
            if r.providers[..i].iter().any(|p| p.id == e.id) {
                return Err(EnrollError::malformed(
                    path,
                    format!("provider {}: enrolled twice", e.id),
                ));
            }
        }
        Ok(r)
    }

    /// Writes the registry to `path` atomically (a temporary file in the
    /// same directory, then a rename); the directory is created if missing.
    ///
    /// # Errors
    /// [`EnrollError::Io`].
    pub fn save(&self, path: &Path) -> Result<(), EnrollError> {
        let text = format!(
            "# Sandbox providers enrolled with `checkfu sandbox add`.\n{}",
            toml::to_string(self).map_err(|e| EnrollError::malformed(path, e.to_string()))?
        );
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| EnrollError::io(dir, e))?;
        }
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| EnrollError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            EnrollError::io(path, e)
        })
    }

    /// The entry enrolled as `id`.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.providers.iter().find(|e| e.id == id)
    }

    /// Adds `entry`.
    ///
    /// # Errors
    /// [`RegistryError::AlreadyEnrolled`] when its id is already enrolled.
    pub fn add(&mut self, entry: Entry) -> Result<(), RegistryError> {
        if self.get(&entry.id).is_some() {
            return Err(RegistryError::AlreadyEnrolled { id: entry.id });
        }
        self.providers.push(entry);
        Ok(())
    }

    /// Removes the entry enrolled as `id` and returns it.
    pub fn remove(&mut self, id: &str) -> Option<Entry> {
        let i = self.providers.iter().position(|e| e.id == id)?;
        Some(self.providers.remove(i))
    }
}

/// The registry path when neither `--providers` nor [`PROVIDERS_ENV`] is
/// given: `$XDG_CONFIG_HOME/checkfu/providers.toml`, else
/// `$HOME/.config/checkfu/providers.toml`.
pub fn default_path() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(xdg) = var("XDG_CONFIG_HOME") {
        return PathBuf::from(xdg).join("checkfu/providers.toml");
    }
    let home = var("HOME").map(PathBuf::from).unwrap_or_else(|| ".".into());
    home.join(".config/checkfu/providers.toml")
}

/// The registry path: `flag`, else [`PROVIDERS_ENV`], else
/// [`default_path`].
pub fn path(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_owned();
    }
    match std::env::var_os(PROVIDERS_ENV).filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => default_path(),
    }
}

/// Reads a ceiling file (TOML, the fields of [`Ceiling`]).
///
/// # Errors
/// [`EnrollError::Io`]; [`EnrollError::Malformed`] naming the TOML error.
pub fn read_ceiling(path: &Path) -> Result<Ceiling, EnrollError> {
    let text = std::fs::read_to_string(path).map_err(|e| EnrollError::io(path, e))?;
    toml::from_str(&text).map_err(|e| EnrollError::malformed(path, e.to_string()))
}

/// The envelope an enrolled provider was enrolled with: the one its signed
/// evidence carries. The evidence is re-read and its signature checked
/// under the entry's key each time, so an edited file is refused.
///
/// # Errors
/// [`EnrollError::Io`]; [`EnrollError::Malformed`] when the key or the
/// evidence does not read, or no signature verifies.
pub fn enrolled_envelope(
    entry: &Entry,
) -> Result<checkfu_sandbox_contract::SandboxProviderCapabilities, EnrollError> {
    let key = crate::keys::read_verifying_key(&entry.key)?;
    let bytes = std::fs::read(&entry.evidence).map_err(|e| EnrollError::io(&entry.evidence, e))?;
    let dsse: crate::dsse::Envelope = serde_json::from_slice(&bytes).map_err(|e| {
        EnrollError::malformed(&entry.evidence, format!("not a DSSE envelope: {e}"))
    })?;
    if !dsse.verified_by(&key) {
        return Err(EnrollError::malformed(
            &entry.evidence,
            format!("no signature verifies under {}", crate::keys::key_id(&key)),
        ));
    }
    let statement: crate::statement::Statement = dsse
        .payload_bytes()
        .and_then(|p| serde_json::from_slice(&p).map_err(|e| e.to_string()))
        .map_err(|e| EnrollError::malformed(&entry.evidence, format!("payload: {e}")))?;
    Ok(statement.predicate.evidence.envelope)
}
