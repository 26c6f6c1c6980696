//! `checkfu sandbox init`: a provider project from the author kit — the
//! protocol loop, every member answering with the typed refusal the
//! contract names for a provider that has allocated nothing, a minimal
//! envelope, conformance hooks declaring no token, a README and a copy of
//! `PROTOCOL.md`. The scaffold passes the suite at once with nine recorded
//! skips.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::EnrollError;

/// The languages a scaffold exists for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Python 3, standard library only; `provider.py` runs through its shebang.
    Python,
    /// Rust, `serde_json` only; `cargo build` makes the binary.
    Rust,
}

const PROTOCOL: &str = include_str!("../../../author-kit/PROTOCOL.md");

/// (relative path, template, executable).
fn files(lang: Lang) -> Vec<(&'static str, &'static str, bool)> {
    match lang {
        Lang::Python => vec![
            (
                "provider.py",
                include_str!("../templates/python/provider.py"),
                true,
            ),
            (
                "README.md",
                include_str!("../templates/python/README.md"),
                false,
            ),
            ("PROTOCOL.md", PROTOCOL, false),
        ],
        Lang::Rust => vec![
            (
                "Cargo.toml",
                include_str!("../templates/rust/Cargo.toml"),
                false,
            ),
            (
                "src/main.rs",
                include_str!("../templates/rust/src/main.rs"),
                false,
            ),
            (
                "README.md",
                include_str!("../templates/rust/README.md"),
                false,
            ),
            ("PROTOCOL.md", PROTOCOL, false),
        ],
    }
}

/// The file `--provider-cmd` runs for a scaffold in `dir`: `provider.py`
/// for Python, `target/debug/<id>` for Rust once built.
pub fn entry_point(lang: Lang, dir: &Path, id: &str) -> PathBuf {
    match lang {
        Lang::Python => dir.join("provider.py"),
        Lang::Rust => dir.join("target/debug").join(id),
    }
}

/// The provider id a scaffold in `dir` gets: the directory's name with
/// every character other than ASCII letters, digits, `-` and `_` replaced
/// by `-`, or `provider` when nothing is left.
pub fn id_for(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_matches('-').to_owned();
    if id.is_empty() || !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("provider-{id}").trim_end_matches('-').to_owned()
    } else {
        id
    }
}

/// Writes the scaffold for `lang` into `dir` (created if missing) and
/// returns the files written. Nothing is overwritten: a file that exists
/// fails the whole scaffold before anything is written.
///
/// # Errors
/// [`EnrollError::Exists`] naming the first existing file;
/// [`EnrollError::Io`].
pub fn write(lang: Lang, dir: &Path) -> Result<Vec<PathBuf>, EnrollError> {
    let id = id_for(dir);
    let files = files(lang);
    for (rel, _, _) in &files {
        let p = dir.join(rel);
        if p.exists() {
            return Err(EnrollError::Exists {
                path: p.display().to_string(),
            });
        }
    }
    let mut written = Vec::new();
    for (rel, template, executable) in files {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| EnrollError::io(parent, e))?;
        }
        let text = template.replace("{{ID}}", &id);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if executable { 0o755 } else { 0o644 })
            .open(&p)
            .map_err(|e| EnrollError::io(&p, e))?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| EnrollError::io(&p, e))?;
        written.push(p);
    }
    Ok(written)
}
