//! The host tools allowlist egress needs (`nsenter`, `nft`, and for the
//! Linux provider `ip`): where they are ([`find_tool`]) and whether they
//! can load a rule set into a network namespace ([`check_nft`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::nft;

/// Directories searched for a tool after `PATH`.
const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The first executable regular file named `name` in `PATH`, then in
/// `/usr/sbin`, `/sbin`, `/usr/bin` and `/bin`.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    // A host tool in the host's PATH, never a workload tree.
    #[allow(clippy::disallowed_methods)]
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Has `nsenter` enter this process's own network namespace (which needs
/// the privilege to enter another's) and `nft --check` the empty
/// allowlist there (which needs `CAP_NET_ADMIN` and nf_tables with the
/// `inet` family). Nothing is changed on the host.
///
/// # Errors
///
/// A line naming the failing step: `nsenter` did not run, or the check
/// failed (its status and stderr).
pub fn check_nft(nsenter: &Path, nft: &Path) -> Result<(), String> {
    let child = std::process::Command::new(nsenter)
        .arg(format!("--net=/proc/{}/ns/net", std::process::id()))
        .arg("--")
        .arg(nft)
        .args(["--check", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let out = child.and_then(|mut c| {
        use std::io::Write as _;
        if let Some(mut stdin) = c.stdin.take() {
            stdin.write_all(nft::ruleset(&[]).as_bytes())?;
        }
        c.wait_with_output()
    });
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "checking an nftables rule set through nsenter failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("running nsenter: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_not_found_and_a_present_one_is() {
        assert!(find_tool("checkfu-no-such-tool").is_none());
        let sh = find_tool("sh").expect("a shell on the host");
        assert!(sh.ends_with("sh"), "{}", sh.display());
    }
}
