//! The value syntax of `checkfu sandbox run`'s flags: mounts, Git
//! mounts, environment, byte counts and CPU counts.

use checkfu_sandbox_contract::op;
use std::collections::BTreeMap;
use std::path::PathBuf;

use checkfu_sandbox_contract::bounds::is_valid_environment_key;
use checkfu_sandbox_contract::{MountAccess, SandboxError};

use super::fail::Failure;

/// What `--timeout` takes, for its messages.
pub const TIMEOUT_RANGE: &str = "whole seconds from 1 to 4294967295";

/// Parses `--timeout`: whole seconds up to `u32::MAX`. Zero parses, so
/// that the plan refuses it in one line (as every other value it judges).
///
/// # Errors
/// A message naming the expected range and the value given.
pub fn parse_timeout(text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|_| format!("expected {TIMEOUT_RANGE}, actual {text:?}"))
}

/// Parses a byte count through parse-size: digits, optionally followed by
/// `K`, `M`, `G` or `T` (powers of 1024; `B`, `KiB`, ... accepted, case
/// insensitive). Zero is refused.
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = || format!("expected a byte count such as 536870912, 512M or 2G, actual {text:?}");
    let bytes = parse_size::Config::new()
        .with_binary()
        .parse_size(text.trim())
        .map_err(|_| bad())?;
    if bytes == 0 {
        return Err(bad());
    }
    Ok(bytes)
}

/// Parses a CPU count in cores (`2`, `1.5`, `0.25`) into thousandths of a
/// core.
///
/// # Errors
/// A message naming the expected shape.
pub fn parse_cpu_millis(text: &str) -> Result<u32, String> {
    let bad = || {
        format!("expected cores such as 1, 1.5 or 0.25 (at most three decimals), actual {text:?}")
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > 3
    {
        return Err(bad());
    }
    let whole: u32 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction: u32 = format!("{fraction:0<3}").parse().map_err(|_| bad())?;
    let millis = whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(fraction))
        .ok_or_else(bad)?;
    if millis == 0 {
        return Err(bad());
    }
    Ok(millis)
}

/// Splits `HOST_DIR:PATH[:ro|rw]`.
pub fn parse_mount(text: &str) -> Result<(PathBuf, String, MountAccess), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--mount {text}: expected HOST_DIR:PATH[:ro|rw] with an absolute PATH"
        ))
    };
    let access = |mode: &str| match mode {
        "ro" => Some(MountAccess::ReadOnly),
        "rw" => Some(MountAccess::ReadWrite),
        _ => None,
    };
    let (rest, access) = match text.rsplit_once(':') {
        Some((rest, mode)) if rest.contains(':') && access(mode).is_some() => {
            (rest, access(mode).ok_or_else(usage)?)
        }
        _ => (text, MountAccess::ReadWrite),
    };
    let (host, path) = rest.rsplit_once(':').ok_or_else(usage)?;
    if !path.starts_with('/') && host.contains(':') {
        // HOST_DIR:PATH:MODE with a mode that is neither ro nor rw.
        return Err(Failure::usage(format!(
            "--mount {text}: expected the mode ro or rw after the PATH, actual {path:?}"
        )));
    }
    if host.is_empty() || !path.starts_with('/') {
        return Err(usage());
    }
    Ok((PathBuf::from(host), path.to_owned(), access))
}

/// Splits `REPO_DIR:REV:REPO_PATH:MOUNT_PATH` from the right, so the
/// repository path may itself contain colons.
pub fn parse_git(text: &str) -> Result<(PathBuf, String, String, String), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--git {text}: expected REPO_DIR:REV:REPO_PATH:MOUNT_PATH with an absolute MOUNT_PATH"
        ))
    };
    let mut parts = text.rsplitn(4, ':');
    let mount = parts.next().ok_or_else(usage)?;
    let repo_path = parts.next().ok_or_else(usage)?;
    let rev = parts.next().ok_or_else(usage)?;
    let repo = parts.next().ok_or_else(usage)?;
    if repo.is_empty() || rev.is_empty() || !mount.starts_with('/') {
        return Err(usage());
    }
    Ok((
        PathBuf::from(repo),
        rev.to_owned(),
        repo_path.to_owned(),
        mount.to_owned(),
    ))
}

/// `--env KEY=VALUE` flags as the workload's environment.
pub fn parse_env(flags: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut environment = BTreeMap::new();
    for text in flags {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| Failure::usage(format!("--env {text}: expected KEY=VALUE")))?;
        let refuse = |input: String, expected: &str, actual: String| {
            let e =
                SandboxError::invalid_request(op::EXECUTE, "command.environment", expected, actual);
            Failure::input(&input, &e.into())
        };
        if !is_valid_environment_key(key) {
            return Err(Failure::usage(format!(
                "--env {text}: expected a key matching ^[A-Za-z_][A-Za-z0-9_]*$, actual {key:?}"
            )));
        }
        if environment
            .insert(key.to_owned(), value.to_owned())
            .is_some()
        {
            let actual = format!("{key} given more than once");
            return Err(refuse(
                format!("--env {key}"),
                "each key at most once",
                actual,
            ));
        }
    }
    Ok(environment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_flags_parse_from_the_right() {
        assert_eq!(
            parse_mount("./data:/data:ro").unwrap(),
            ("./data".into(), "/data".into(), MountAccess::ReadOnly)
        );
        assert_eq!(
            parse_mount("a:b:/data").unwrap(),
            ("a:b".into(), "/data".into(), MountAccess::ReadWrite)
        );
        assert_eq!(parse_mount("/data").unwrap_err().code, 2);
        assert_eq!(parse_mount("./d:data").unwrap_err().code, 2);
        assert_eq!(
            parse_git("/r:HEAD::/src").unwrap(),
            ("/r".into(), "HEAD".into(), String::new(), "/src".into())
        );
        assert_eq!(parse_git("/r:HEAD:/src").unwrap_err().code, 2);
    }

    #[test]
    fn byte_counts_and_cpu_counts_parse() {
        assert_eq!(parse_bytes("536870912"), Ok(536_870_912));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        for bad in [
            "",
            "M",
            "0",
            "-1",
            "12Q",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cpu_millis("1"), Ok(1_000));
        assert_eq!(parse_cpu_millis("1.5"), Ok(1_500));
        assert_eq!(parse_cpu_millis("0.25"), Ok(250));
        assert_eq!(parse_cpu_millis(".5"), Ok(500));
        assert_eq!(parse_cpu_millis("2."), Ok(2_000));
        for bad in ["", ".", "0", "0.000", "1.2345", "-1", "1,5", "a", "9999999"] {
            assert!(parse_cpu_millis(bad).is_err(), "{bad}");
        }
    }
}
