//! A real Git repository for stage-git-project, made with a Git library.

use std::path::Path;

/// Initializes a repository at `dir` and commits `files` (relative path,
/// bytes); returns the commit id in hex.
///
/// # Errors
/// The Git library's message.
pub fn commit_files(dir: &Path, files: &[(&str, &[u8])]) -> Result<String, String> {
    let err = |e: git2::Error| e.message().to_owned();
    let repo = git2::Repository::init(dir).map_err(err)?;
    let mut index = repo.index().map_err(err)?;
    for (path, bytes) in files {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&full, bytes).map_err(|e| e.to_string())?;
        index.add_path(Path::new(path)).map_err(err)?;
    }
    index.write().map_err(err)?;
    let tree_id = index.write_tree().map_err(err)?;
    let tree = repo.find_tree(tree_id).map_err(err)?;
    let sig = git2::Signature::new(
        "checkfu conformance",
        "conformance@checkfu.invalid",
        &git2::Time::new(0, 0),
    )
    .map_err(err)?;
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "conformance fixture", &tree, &[])
        .map_err(err)?;
    Ok(commit.to_string())
}
