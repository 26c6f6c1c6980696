//! `checkfu sandbox add | list | remove`: the enrolled-providers registry.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use checkfu_sandbox_enroll::registry::{self, Entry, Registry, Transport};
use checkfu_sandbox_enroll::{keys, verify};
use checkfu_sandbox_runtime::Ceiling;

use super::fail::Failure;
use super::served::{self, ServedFlags};
use super::ProviderChoice;

/// `--providers FILE`, shared by the registry commands.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RegistryFlag {
    /// The providers registry (TOML) [default: $CHECKFU_PROVIDERS, else $XDG_CONFIG_HOME/checkfu/providers.toml or ~/.config/checkfu/providers.toml].
    #[arg(long, value_name = "FILE")]
    pub providers: Option<PathBuf>,
}

impl RegistryFlag {
    /// The registry path.
    pub fn path(&self) -> PathBuf {
        registry::path(self.providers.as_deref())
    }

    /// The registry path, for writing: the default registry's directory is
    /// created when missing, but the directory of a registry the user named
    /// (`--providers` or `$CHECKFU_PROVIDERS`) must exist already.
    ///
    /// # Errors
    /// 125 naming the file and its missing directory.
    pub fn path_for_write(&self) -> Result<PathBuf, Failure> {
        let path = self.path();
        if path == registry::default_path() {
            return Ok(path);
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => return Ok(path),
        };
        if dir.is_dir() {
            Ok(path)
        } else {
            Err(Failure::checkfu(format!(
                "--providers {}: expected an existing directory {}, actual none",
                path.display(),
                dir.display()
            )))
        }
    }
}

/// Flags of `checkfu sandbox add`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The provider is started (or its socket reached) and its evidence \
verified exactly as `checkfu sandbox verify` does; a provider whose evidence does not cover its \
claims, or whose claims exceed the ceiling in a way that cannot be cut down, is refused and \
nothing is written. Claims the ceiling cuts down are listed. Paths are stored absolute. The \
default registry's directory is created when missing; the directory of a --providers (or \
$CHECKFU_PROVIDERS) file must exist.

Examples:
  checkfu sandbox add --id acme --provider-cmd ./provider.py --evidence evidence.dsse.json \\
      --key keys/checkfu-signing.pub.pem --ceiling ceiling.toml
  checkfu sandbox run --provider acme --image busybox@sha256:<64 hex> -- true

Exit status: 0 enrolled; 1 refused (one line per reason, or the id is already enrolled); 2 on usage errors; 125 when a file or \
the provider cannot be read or the registry cannot be written."
)]
pub struct AddArgs {
    /// The id `--provider ID` will select.
    #[arg(long, value_name = "ID")]
    pub id: String,
    /// How the provider is reached.
    #[command(flatten)]
    pub served: ServedFlags,
    /// Its signed evidence (DSSE).
    #[arg(long, value_name = "FILE")]
    pub evidence: PathBuf,
    /// The SPKI PEM public key the evidence is signed under.
    #[arg(long, value_name = "PUB")]
    pub key: PathBuf,
    /// The enrollment ceiling (TOML; see docs/partner-guide.md) [default: unbounded].
    #[arg(long, value_name = "FILE")]
    pub ceiling: Option<PathBuf>,
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryFlag,
}

/// Flags of `checkfu sandbox list`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "One line per enrolled provider: id, transport, evidence, ceiling \
fields.

Examples:
  checkfu sandbox list
  checkfu sandbox list --providers ./providers.toml

Exit status: 0; 125 when the registry does not read."
)]
pub struct ListArgs {
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryFlag,
}

/// Flags of `checkfu sandbox remove`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  checkfu sandbox remove acme
  checkfu sandbox remove acme --providers ./providers.toml

Exit status: 0 removed; 1 when no provider has that id; 2 for an id that is not an id (empty, \
for one); 125 when the registry does not read or cannot be written.")]
pub struct RemoveArgs {
    /// The enrolled id.
    pub id: String,
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryFlag,
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

/// Runs `add`.
pub fn add(args: AddArgs) -> ExitCode {
    match try_add(&args) {
        Ok(code) => code,
        Err(f) => f.report(),
    }
}

fn try_add(args: &AddArgs) -> Result<ExitCode, Failure> {
    registry::check_id(&args.id).map_err(|m| Failure::usage(format!("--id: {m}")))?;
    let served = args.served.choice()?;
    if !matches!(
        served,
        ProviderChoice::Command { .. } | ProviderChoice::Socket(_)
    ) {
        // Refused before the provider starts: an image provider cannot be
        // enrolled yet (docs/partner-guide.md).
        return Err(Failure::usage(
            "expected --provider-cmd or --provider-socket (an image provider cannot be enrolled yet)",
        ));
    }
    let path = args.registry.path_for_write()?;
    let mut reg = Registry::load(&path).map_err(|e| Failure::checkfu(e.to_string()))?;
    if reg.get(&args.id).is_some() {
        return Err(Failure::refused(format!(
            "--id {}: already enrolled in {}; `checkfu sandbox remove {}` first",
            args.id,
            path.display(),
            args.id
        )));
    }
    let ceiling = match &args.ceiling {
        Some(p) => registry::read_ceiling(p).map_err(|e| Failure::checkfu(e.to_string()))?,
        None => Ceiling::default(),
    };
    let key =
        keys::read_verifying_key(&args.key).map_err(|e| Failure::checkfu(format!("--key: {e}")))?;
    let bytes = std::fs::read(&args.evidence)
        .map_err(|e| Failure::checkfu(format!("--evidence {}: {e}", args.evidence.display())))?;
    let code = served::code(&served)?;
    let runtime = super::tokio_runtime().map_err(|_| Failure::checkfu("async runtime"))?;
    let envelope = runtime.block_on(served::envelope(&served))?;
    let cuts = match verify::admit(&bytes, &key, &code, &envelope, &ceiling) {
        Ok((_, cuts)) => cuts,
        Err(reasons) => {
            eprintln!("checkfu: {}: refused:", args.id);
            for r in reasons {
                eprintln!("  {r}");
            }
            return Ok(ExitCode::from(super::fail::EXIT_REFUSED));
        }
    };
    let transport = match served {
        ProviderChoice::Command { mut argv, .. } => {
            if argv[0].contains('/') {
                argv[0] = absolute(Path::new(&argv[0])).display().to_string();
            }
            Transport::Command(argv)
        }
        ProviderChoice::Socket(p) => Transport::Socket(absolute(&p)),
        _ => {
            return Err(Failure::usage(
                "expected --provider-cmd or --provider-socket",
            ))
        }
    };
    reg.add(Entry {
        id: args.id.clone(),
        transport,
        evidence: absolute(&args.evidence),
        key: absolute(&args.key),
        ceiling,
    })
    .map_err(|e| Failure::checkfu(e.to_string()))?;
    reg.save(&path)
        .map_err(|e| Failure::checkfu(e.to_string()))?;
    let mut text = format!("enrolled {} in {}\n", args.id, path.display());
    for c in cuts {
        text.push_str(&format!("  cut: {c}\n"));
    }
    Ok(match super::out::print(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(gone) => gone.exit(),
    })
}

/// Runs `list`.
pub fn list(args: ListArgs) -> ExitCode {
    let path = args.registry.path();
    let reg = match Registry::load(&path) {
        Ok(r) => r,
        Err(e) => return Failure::checkfu(e.to_string()).report(),
    };
    if reg.providers.is_empty() {
        eprintln!("checkfu: no providers enrolled in {}", path.display());
    }
    let mut text = String::new();
    for e in &reg.providers {
        let transport = match &e.transport {
            Transport::Command(argv) => format!("command {:?}", argv.join(" ")),
            Transport::Socket(p) => format!("socket {}", p.display()),
        };
        let ceiling = toml_inline(&e.ceiling);
        text.push_str(&format!(
            "{}\t{}\tevidence {}\tceiling {}\n",
            e.id,
            transport,
            e.evidence.display(),
            ceiling
        ));
    }
    match super::out::print(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(gone) => gone.exit(),
    }
}

fn toml_inline(c: &Ceiling) -> String {
    let v = serde_json::to_value(c).unwrap_or_default();
    match v.as_object() {
        Some(m) if m.is_empty() => "none".into(),
        _ => v.to_string(),
    }
}

/// Runs `remove`.
pub fn remove(args: RemoveArgs) -> ExitCode {
    if let Err(m) = registry::check_id(&args.id) {
        return Failure::usage(format!("remove: {m}")).report();
    }
    let path = args.registry.path();
    let mut reg = match Registry::load(&path) {
        Ok(r) => r,
        Err(e) => return Failure::checkfu(e.to_string()).report(),
    };
    if reg.remove(&args.id).is_none() {
        return Failure::refused(format!(
            "remove {}: no provider with that id in {}",
            args.id,
            path.display()
        ))
        .report();
    }
    if let Err(e) = reg.save(&path) {
        return Failure::checkfu(e.to_string()).report();
    }
    match super::out::print(&format!("removed {} from {}\n", args.id, path.display())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(gone) => gone.exit(),
    }
}
