//! Execs whose process never started: established from daemon state and
//! classified from the daemon's own message (see [`super::exec`]).

/// Most bytes of the daemon's message kept for a [`StartFailure`].
pub const START_MESSAGE_MAX: usize = 4096;

/// An exec whose process never started, established from daemon state
/// (`ExecInspect.Pid` never set, an exit code recorded; see the module
/// documentation), never from output text alone.
///
/// Since no workload process ran, everything on the exec's streams came
/// from the daemon, so its message can be trusted and classified. The
/// engine itself reports 126 for every cause; this maps, as shells do:
///
/// * `127` when the executable was not found (`executable file not
///   found`, `no such file or directory` about the executable), or when
///   the engine itself reported 127;
/// * `126` otherwise: permission denied, not executable, a directory, and
///   a missing or unusable working directory (`chdir to cwd ... failed`),
///   which is an invocation failure, not a missing command (the engine's
///   and `docker exec`'s 126).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// 127 (not found) or 126 (could not be invoked).
    pub code: u8,
    /// The daemon's message, trimmed (at most [`START_MESSAGE_MAX`] bytes
    /// of it), or a description when the daemon wrote none.
    pub message: String,
}

impl StartFailure {
    /// Classifies what the daemon wrote for the never-started `argv0`,
    /// whose exit code it reported as `daemon_code`.
    pub fn classify(argv0: &str, daemon_code: i64, daemon_output: &[u8]) -> StartFailure {
        let raw = &daemon_output[..daemon_output.len().min(START_MESSAGE_MAX)];
        let message = String::from_utf8_lossy(raw).trim().to_owned();
        let message = if message.is_empty() {
            format!(
                "the process of {argv0:?} never started (the daemon reported exit code \
                 {daemon_code} and no message)"
            )
        } else {
            message
        };
        // The executable's own name must not decide the class (think of a
        // program called `not-found` or `chdir`).
        let text = if argv0.is_empty() {
            message.to_ascii_lowercase()
        } else {
            message.replace(argv0, "").to_ascii_lowercase()
        };
        let working_dir = text.contains("chdir") || text.contains("cwd");
        let not_found = text.contains("executable file not found")
            || text.contains("no such file or directory")
            || text.contains("not found");
        let code = if !working_dir && (not_found || daemon_code == 127) {
            127
        } else {
            126
        };
        StartFailure { code, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_failures_are_classified_from_the_daemon_message() {
        let oci = "OCI runtime exec failed: exec failed: unable to start container process: ";
        let cases: &[(&str, i64, String, u8)] = &[
            (
                "nosuch",
                126,
                format!("{oci}exec: \"nosuch\": executable file not found in $PATH: unknown\r\n"),
                127,
            ),
            (
                "/no/bin",
                126,
                format!("{oci}exec: \"/no/bin\": stat /no/bin: no such file or directory: unknown"),
                127,
            ),
            (
                "/tmp/f",
                126,
                format!("{oci}exec: \"/tmp/f\": permission denied: unknown"),
                126,
            ),
            (
                "true",
                126,
                format!(
                    "{oci}chdir to cwd (\"/nope\") set in config.json failed: no such file or \
                     directory: unknown"
                ),
                126,
            ),
            // The executable's name does not decide the class.
            (
                "chdir",
                126,
                format!("{oci}exec: \"chdir\": executable file not found in $PATH: unknown"),
                127,
            ),
            (
                "/bin/not-found",
                126,
                format!("{oci}exec: \"/bin/not-found\": permission denied: unknown"),
                126,
            ),
            // An engine that reports 127 itself is believed.
            ("x", 127, String::new(), 127),
            ("x", 126, String::new(), 126),
        ];
        for (argv0, daemon_code, raw, want) in cases {
            let f = StartFailure::classify(argv0, *daemon_code, raw.as_bytes());
            assert_eq!(f.code, *want, "{argv0}: {raw}");
            assert!(!f.message.is_empty() && !f.message.ends_with('\n'));
        }
        let long = vec![b'x'; START_MESSAGE_MAX * 2];
        let f = StartFailure::classify("x", 126, &long);
        assert_eq!(f.message.len(), START_MESSAGE_MAX);
    }
}
