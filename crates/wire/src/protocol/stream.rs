//! openProcess streams: frames, flow control (credit, acknowledgement,
//! replay accounting), resumption and signals.

use super::*;

/// Which output stream a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamName {
    /// Standard output: lossless inside the replay window.
    Stdout,
    /// Standard error: diagnostic, same framing.
    Stderr,
}

/// The runner's account of one output stream (stdout or stderr) of a
/// served process: the rules `process/output`, `process/ack` and
/// `process/eof` frames are held to, as one pure state machine that the
/// client and the author kit's `frames:open_process` vectors both run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputAccount {
    /// Bytes received (the next expected offset).
    pub received: u64,
    /// Bytes the runner acknowledged (consumed).
    pub acked: u64,
}

impl OutputAccount {
    /// Applies a `process/output` of `len` bytes at `offset` under the
    /// replay window `window`; returns how many leading bytes are a resend
    /// already received (a chunk resent after a reconnect may overlap).
    ///
    /// # Errors
    /// A [`Mismatch`] naming `process/output.offset` for a gap (an offset
    /// past what was received) or `process/output.data_base64` for more
    /// unacknowledged bytes than the window.
    pub fn output(&mut self, offset: u64, len: usize, window: u64) -> Result<usize, Mismatch> {
        if offset > self.received {
            return Err(Mismatch::new(
                format!("{}.offset", method::PROCESS_OUTPUT),
                format!("at most {} (no gap)", self.received),
                offset.to_string(),
            ));
        }
        let skip = usize::try_from(self.received - offset).unwrap_or(usize::MAX);
        let fresh = len.saturating_sub(skip) as u64;
        let unacked = self.received + fresh - self.acked;
        if unacked > window {
            return Err(Mismatch::new(
                format!("{}.data_base64", method::PROCESS_OUTPUT),
                format!("at most {window} unacknowledged bytes (the replay window)"),
                format!("{unacked} bytes"),
            ));
        }
        self.received += fresh;
        Ok(skip)
    }

    /// Applies a `process/eof` at `offset`.
    ///
    /// # Errors
    /// A [`Mismatch`] naming `process/eof.offset` unless `offset` is
    /// exactly the bytes received.
    pub fn eof(&self, offset: u64) -> Result<(), Mismatch> {
        if offset != self.received {
            return Err(Mismatch::new(
                format!("{}.offset", method::PROCESS_EOF),
                self.received.to_string(),
                offset.to_string(),
            ));
        }
        Ok(())
    }

    /// The runner acknowledged every byte before `offset` (never moves
    /// back, never past what was received).
    pub fn ack(&mut self, offset: u64) {
        self.acked = self.acked.max(offset.min(self.received));
    }
}

/// `process/stdin`: bytes at `offset` of the stdin stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdinFrame {
    /// The process handle.
    pub process: String,
    /// Offset of the first byte in the stdin stream.
    pub offset: u64,
    /// At most 64 KiB, and never more than the credit left.
    pub data_base64: Bytes,
}

/// `process/stdinClose`: end of stdin after `offset` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdinCloseFrame {
    /// The process handle.
    pub process: String,
    /// Total stdin bytes sent.
    pub offset: u64,
}

/// `process/credit`: the receiver delivered bytes to the process and
/// grants that many more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreditFrame {
    /// The process handle.
    pub process: String,
    /// Additional bytes the sender may send.
    pub bytes: u64,
}

/// `process/output`: bytes at `offset` of stdout or stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// Offset of the first byte (the sequence number).
    pub offset: u64,
    /// At most 64 KiB.
    pub data_base64: Bytes,
}

/// `process/ack`: the runner holds every byte of `stream` before `offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AckFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// Bytes received and consumed.
    pub offset: u64,
}

/// `process/eof`: `stream` ended after `offset` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EofFrame {
    /// The process handle.
    pub process: String,
    /// Which stream.
    pub stream: StreamName,
    /// The stream's total length.
    pub offset: u64,
}

/// `process/exit`: the exit, sent once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitFrame {
    /// The process handle.
    pub process: String,
    /// Exit code xor signal.
    pub exit: ProcessExit,
}

/// `process/failed`: the process cannot settle with an exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessFailedFrame {
    /// The process handle.
    pub process: String,
    /// A closed sandbox error.
    pub error: SandboxError,
}

/// `process/destroy` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessParams {
    /// The process handle.
    pub process: String,
}

/// `process/resume` params: what the runner already holds of each stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeProcessParams {
    /// The process handle.
    pub process: String,
    /// Stdout bytes received.
    pub stdout_offset: u64,
    /// Stderr bytes received.
    pub stderr_offset: u64,
}

/// `process/resume` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeProcessResult {
    /// Stdin bytes the provider received; the runner resends from here.
    pub stdin_offset: u64,
    /// Stdin credit granted in all so far.
    pub stdin_granted: u64,
}

/// `process/signal` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalParams {
    /// The process handle.
    pub process: String,
    /// `SIGINT`, `SIGTERM` or `SIGKILL`.
    pub signal: ControlSignal,
}
