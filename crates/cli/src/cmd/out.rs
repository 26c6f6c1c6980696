//! Everything the CLI writes to stdout goes through here, so that a reader
//! that went away (`checkfu sandbox faults | head -1`) ends the command
//! quietly instead of panicking the way `println!` does.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with
//! `BrokenPipe`. checkfu then stops writing to stdout, prints nothing more
//! about it, and exits [`EXIT_BROKEN_PIPE`] (141, the status a SIGPIPE
//! death reports), as a C tool killed by SIGPIPE would. `sandbox run` still
//! finishes the run first (outputs, release, destroy).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Exit status after stdout was closed by its reader (128 + SIGPIPE).
pub const EXIT_BROKEN_PIPE: u8 = 141;

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Stdout could not take the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutGone {
    /// The reader closed the pipe (quiet: nothing is reported).
    Closed,
    /// Another write error, already reported on stderr.
    Failed,
}

impl StdoutGone {
    /// The exit status: 141 for a closed pipe, 125 for another failure.
    pub fn code(self) -> u8 {
        match self {
            StdoutGone::Closed => EXIT_BROKEN_PIPE,
            StdoutGone::Failed => super::fail::EXIT_CHECKFU,
        }
    }

    /// [`StdoutGone::code`] as an [`ExitCode`].
    pub fn exit(self) -> ExitCode {
        ExitCode::from(self.code())
    }
}

/// Whether a write to stdout already found the pipe closed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// Writes `bytes` to stdout and flushes. After a closed pipe every later
/// call returns [`StdoutGone::Closed`] without writing.
///
/// # Errors
/// [`StdoutGone::Closed`] when the reader went away;
/// [`StdoutGone::Failed`] (reported on stderr) for another write error.
pub fn write(bytes: &[u8]) -> Result<(), StdoutGone> {
    if closed() {
        return Err(StdoutGone::Closed);
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::SeqCst);
            Err(StdoutGone::Closed)
        }
        Err(e) => {
            eprintln!("checkfu: writing to stdout: {e}");
            Err(StdoutGone::Failed)
        }
    }
}

/// Writes `text` to stdout (see [`write()`]).
///
/// # Errors
/// As [`write()`].
pub fn print(text: &str) -> Result<(), StdoutGone> {
    write(text.as_bytes())
}

/// Writes `text` and a newline to stdout (see [`write()`]).
///
/// # Errors
/// As [`write()`].
pub fn line(text: &str) -> Result<(), StdoutGone> {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s.push('\n');
    write(s.as_bytes())
}
