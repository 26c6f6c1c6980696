//! The contract's bounds (spec "Bounds"; DESIGN D9). Providers enforce them
//! and the runtime re-checks every result against them.

/// 1 MiB in bytes.
pub const MIB: u64 = 1024 * 1024;

/// Largest content of any one file, in bytes (16 MiB).
pub const MAX_FILE_BYTES: u64 = 16 * MIB;

/// Largest `maximum_bytes` a readFile caller may ask for (16 MiB).
pub const MAX_READ_FILE_BYTES: u64 = 16 * MIB;

/// Most files in one readFiles request.
pub const MAX_READ_FILES_COUNT: usize = 1_024;

/// Largest aggregate readFiles output, in bytes (128 MiB).
pub const MAX_READ_FILES_AGGREGATE_BYTES: u64 = 128 * MIB;

/// Largest `output_limit_bytes` for execute, per stream (16 MiB).
pub const MAX_OUTPUT_LIMIT_BYTES: u64 = 16 * MIB;

/// Most command arguments (execute and openProcess).
pub const MAX_ARGUMENTS: usize = 256;

/// Longest single command argument, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 65_536;

/// Largest `max_entries` for listDir / listProjectDir, and the longest listing.
pub const MAX_LIST_ENTRIES: u32 = 100_000;

/// The argument space the kernel gives a new program, as every provider
/// models it: `execve` refuses (`E2BIG`) argv and environment strings,
/// each with its NUL, plus one 8-byte pointer each, over a quarter of the
/// default 8 MiB stack limit (2 MiB). Commands within the contract's own
/// argument bounds can pass it (256 arguments of 65,536 bytes); a provider
/// reports such a command as could not be executed (exit code 126, the
/// reason on stderr) without starting it (decision
/// 017).
pub const EXEC_ARGUMENT_SPACE_BYTES: u64 = 2 * MIB;

/// The argument space (see [`EXEC_ARGUMENT_SPACE_BYTES`]) that `argv`
/// (executable first) and `environment` (`KEY=value` strings) take:
/// every string's bytes plus its NUL, plus 8 bytes per pointer.
pub fn exec_argument_space<'a>(
    argv: impl IntoIterator<Item = &'a str>,
    environment: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> u64 {
    let args = argv
        .into_iter()
        .map(|a| a.len() as u64 + 1 + 8)
        .sum::<u64>();
    let env = environment
        .into_iter()
        .map(|(k, v)| k.len() as u64 + 1 + v.len() as u64 + 1 + 8)
        .sum::<u64>();
    args + env
}

/// Most mounts per instance.
pub const MAX_MOUNTS: u8 = 64;

/// Most pinned snapshots in one cleanup request.
pub const MAX_PINNED_SNAPSHOTS: usize = 1_024;

/// Bound on a rollback or a process destroy after a rejected handoff, in
/// seconds (spec "Allocation handoff", "openProcess").
pub const ROLLBACK_TIMEOUT_SECONDS: u64 = 30;

/// Largest stdin given with an execute command, in bytes (16 MiB; DESIGN,
/// mirrors the file bound).
pub const MAX_STDIN_BYTES: u64 = 16 * MIB;

/// Largest JSON document the wire decoder accepts, in bytes (192 MiB: a full
/// readFiles result in base64 plus framing).
pub const MAX_WIRE_DOCUMENT_BYTES: usize = 192 * 1024 * 1024;

/// Most files in one beginActiveWrite batch.
pub const MAX_ACTIVE_WRITE_FILES: usize = 1_024;

/// Largest aggregate beginActiveWrite batch, in bytes (128 MiB).
pub const MAX_ACTIVE_WRITE_AGGREGATE_BYTES: u64 = 128 * MIB;

/// The fixed output tree every instance reports as `output_path`.
pub const OUTPUT_PATH: &str = "/mnt/session/outputs";

/// The provider-owned control root for portable state.
pub const CONTROL_ROOT: &str = "/workspace/.checkfu";

/// Roots a mount plan may not overlap (spec "Paths, mounts").
pub const RESERVED_ROOTS: [&str; 8] = [
    "/dev",
    "/proc",
    "/run",
    "/sys",
    "/tmp",
    "/home/checkfu",
    "/workspace/.checkfu",
    "/mnt/session/outputs",
];

/// True when `key` matches `^[A-Za-z_][A-Za-z0-9_]*$` (environment keys).
pub fn is_valid_environment_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_keys() {
        for ok in ["A", "_", "PATH", "a_1", "_X9"] {
            assert!(is_valid_environment_key(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A=B", "Ä", "A B", "A\0"] {
            assert!(!is_valid_environment_key(bad), "{bad}");
        }
    }
}
