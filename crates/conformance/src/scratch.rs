//! A private scratch directory under the system temporary directory,
//! removed on drop. (The `tempfile` crate would pull in `rustix`; the
//! suite keeps its dependency tree to the contract and the runtime.)

use std::path::{Path, PathBuf};

/// A directory `<tmp>/checkfu-<label>-<32 hex digits>`, mode 0700, created
/// exclusively (an existing path is never reused) and removed with its
/// contents when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates a fresh scratch directory.
    ///
    /// # Errors
    /// The I/O error of creating it.
    pub fn new(label: &str) -> std::io::Result<ScratchDir> {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(format!(
            "checkfu-{label}-{}",
            crate::context::fresh_token(label)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(ScratchDir(path))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
