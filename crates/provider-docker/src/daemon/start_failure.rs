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
///   found`, `no such file or directory` about the executable, found only
///   along a relative `PATH` element, which is never searched), or when
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
            || text.contains("not found")
            // Go's lookup found it only along a relative `PATH` element,
            // which is never searched (decision 017): not found.
            || text.contains("executable found relative to current directory");
        let code = if !working_dir && (not_found || daemon_code == 127) {
            127
        } else {
            126
        };
        StartFailure { code, message }
    }
}

/// runc's own one-line report of an `execve` that failed after the exec's
/// process started (runc 1.1 and later make the call in the started
/// process, which then exits 1): `exec PATH: REASON`, nothing on stdout.
///
/// Recognised only when `PATH` is the executable itself (`argv0` holding a
/// `/`) or `DIR/argv0` (a bare name runc found along `PATH`), and
/// `REASON` is an `execve` error, so a workload's own output is not taken
/// for it unless that workload prints this exact line about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeExecFailure {
    /// 127 for `ENOENT` (the file exists, runc checked it: its
    /// interpreter is missing), 126 for every other reason (`ENOEXEC`'s
    /// `exec format error` among them), as a shell reports them.
    pub code: u8,
    /// The path runc executed.
    pub path: String,
    /// The reason as runc wrote it (`exec format error`, ...).
    pub reason: String,
}

impl RuntimeExecFailure {
    /// Recognises runc's report for `argv0` in a never-printing exec that
    /// exited `code` with `stdout` and `stderr` (see the type).
    pub fn recognise(argv0: &str, code: i64, stdout: &[u8], stderr: &[u8]) -> Option<Self> {
        if code != 1 || !stdout.is_empty() || argv0.is_empty() {
            return None;
        }
        let text = std::str::from_utf8(stderr).ok()?;
        let line = text.strip_suffix('\n').unwrap_or(text);
        if line.contains('\n') {
            return None;
        }
        let rest = line.strip_prefix("exec ")?;
        let (path, reason) = rest.rsplit_once(": ")?;
        let named = if argv0.contains('/') {
            path == argv0
        } else {
            path.strip_suffix(argv0)
                .is_some_and(|dir| dir.starts_with('/') && dir.ends_with('/'))
        };
        let code = match reason {
            "no such file or directory" => 127,
            "exec format error"
            | "permission denied"
            | "is a directory"
            | "not a directory"
            | "too many levels of symbolic links"
            | "text file busy" => 126,
            _ => return None,
        };
        named.then(|| RuntimeExecFailure {
            code,
            path: path.to_owned(),
            reason: reason.to_owned(),
        })
    }
}

/// Most bytes of a script's head fetched to name its interpreter.
const SCRIPT_HEAD_MAX: u64 = 256;

/// The interpreter the `#!` line of the file at `path` (absolute) in
/// `container` names, read through the daemon's archive endpoint (a read
/// inside the container's own root); `None` when it cannot be read or
/// has no `#!`.
pub async fn script_interpreter(
    docker: &bollard::Docker,
    container: &str,
    path: &str,
) -> Option<String> {
    use futures_util::StreamExt as _;
    use std::io::Read as _;
    let options = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut stream = Box::pin(docker.download_from_container(container, Some(options)));
    // The first member's headers (PAX ones too) and its head; the rest is
    // never read.
    let mut archive = Vec::new();
    while archive.len() < 16 * 1024 {
        match stream.next().await {
            Some(Ok(chunk)) => archive.extend_from_slice(&chunk),
            Some(Err(_)) => return None,
            None => break,
        }
    }
    drop(stream);
    let mut entries = tar::Archive::new(archive.as_slice());
    let entry = entries.entries().ok()?.next()?.ok()?;
    let mut head = Vec::new();
    entry.take(SCRIPT_HEAD_MAX).read_to_end(&mut head).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    line.split_whitespace().next().map(str::to_owned)
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
            (
                "true",
                126,
                format!(
                    "{oci}exec: \"true\": cannot run executable found relative to current \
                     directory: unknown"
                ),
                127,
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
        assert!(RuntimeExecFailure::recognise("x", 126, &[], &long).is_none());
        let f = StartFailure::classify("x", 126, &long);
        assert_eq!(f.message.len(), START_MESSAGE_MAX);
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    #[test]
    fn runc_reports_after_start_are_recognised_only_about_the_executable() {
        let r = |argv0, code, out: &[u8], err: &[u8]| {
            RuntimeExecFailure::recognise(argv0, code, out, err).map(|f| f.code)
        };
        let enoent = b"exec /src/bi: no such file or directory\n";
        assert_eq!(r("/src/bi", 1, b"", enoent), Some(127));
        assert_eq!(
            r("/src/elf", 1, b"", b"exec /src/elf: exec format error\n"),
            Some(126)
        );
        assert_eq!(
            r("tool", 1, b"", b"exec /usr/bin/tool: exec format error\n"),
            Some(126)
        );
        // Another path, another exit code, output on stdout, a second
        // line, an unknown reason: the workload's own.
        assert_eq!(r("/src/other", 1, b"", enoent), None);
        assert_eq!(r("bi", 1, b"", b"exec /src/xbi: exec format error\n"), None);
        assert_eq!(r("/src/bi", 2, b"", enoent), None);
        assert_eq!(r("/src/bi", 1, b"x", enoent), None);
        assert_eq!(
            r(
                "/src/bi",
                1,
                b"",
                b"hello\nexec /src/bi: no such file or directory\n"
            ),
            None
        );
        assert_eq!(r("/src/bi", 1, b"", b"exec /src/bi: it broke\n"), None);
    }
}
