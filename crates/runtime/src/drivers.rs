//! The Runner's drivers over openProcess (spec "openProcess"; DESIGN D18):
//! the one-shot driver, the ACP NDJSON frame reader, and the Checkpoint
//! release helper. Providers impose no idle timeout or output ceiling on
//! these streams; the bounds here are the drivers' own.

use std::time::Duration;

use checkfu_sandbox_contract::bounds::MIB;
use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::{
    ControlSignal, FailureReason, Operation, ProcessExit, ProcessStep, SandboxError, SandboxFailure,
};
use futures_io::AsyncRead;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::compat::FuturesAsyncWriteCompatExt;

use crate::process::{Process, ProcessHandle};

/// Most stdout bytes the one-shot driver collects (4 MiB).
pub const ONE_SHOT_STDOUT_LIMIT_BYTES: u64 = 4 * MIB;

/// Largest ACP frame, in bytes, without its newline (1 MiB).
pub const ACP_FRAME_LIMIT_BYTES: usize = MIB as usize;

/// Most stderr bytes a driver keeps for diagnostics (64 KiB); the rest is
/// drained and dropped.
pub const STDERR_KEEP_BYTES: usize = 64 * 1024;

/// How long the Checkpoint release helper waits after SIGTERM (5 s).
pub const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Driver failures.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The child wrote more stdout than the one-shot driver collects.
    #[error("one-shot stdout over {limit_bytes} bytes")]
    StdoutTooLarge {
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// An ACP frame longer than 1 MiB.
    #[error("acp frame of at least {frame_bytes} bytes is over the {limit_bytes}-byte limit")]
    FrameTooLarge {
        /// The limit, in bytes.
        limit_bytes: usize,
        /// The frame's length seen so far, in bytes (at least limit + 1).
        frame_bytes: usize,
    },
    /// The stream ended inside a frame (no final newline).
    #[error("acp stream ended inside a frame of {frame_bytes} bytes")]
    TruncatedFrame {
        /// Bytes of the unfinished frame.
        frame_bytes: usize,
    },
    /// Reading or writing a stream failed.
    #[error("stream i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The process's control failed.
    #[error("{0}")]
    Sandbox(#[from] SandboxFailure),
}

impl From<SandboxError> for DriverError {
    fn from(e: SandboxError) -> Self {
        DriverError::Sandbox(e.into())
    }
}

/// What a one-shot run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneShotResult {
    /// Everything the child wrote to stdout (at most 4 MiB).
    pub stdout: Vec<u8>,
    /// The first 64 KiB of stderr.
    pub stderr: Vec<u8>,
    /// How the child ended.
    pub exit: ProcessExit,
}

/// Drains `stream` to end of file keeping at most `keep` bytes.
async fn drain_keep(stream: std::pin::Pin<Box<dyn AsyncRead + Send>>, keep: usize) -> Vec<u8> {
    let mut reader = stream.compat();
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// The one-shot driver: writes `prompt`, half-closes stdin, collects
/// stdout to end of file (at most 4 MiB) while draining stderr, then
/// settles with the exit.
///
/// # Errors
/// [`DriverError::StdoutTooLarge`] (the process is destroyed), stream I/O
/// errors, and the provider's errors from wait.
pub async fn one_shot(process: Process, prompt: &[u8]) -> Result<OneShotResult, DriverError> {
    let Process {
        input,
        output,
        error,
        handle,
        ..
    } = process;
    let stderr = tokio::spawn(drain_keep(error, STDERR_KEEP_BYTES));
    let prompt = prompt.to_vec();
    let writer = tokio::spawn(async move {
        let mut input = input.compat_write();
        input.write_all(&prompt).await?;
        input.shutdown().await
    });
    let mut reader = output.compat();
    let mut stdout = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        if (stdout.len() + n) as u64 > ONE_SHOT_STDOUT_LIMIT_BYTES {
            let _ = handle.destroy().await;
            writer.abort();
            stderr.abort();
            return Err(DriverError::StdoutTooLarge {
                limit_bytes: ONE_SHOT_STDOUT_LIMIT_BYTES,
            });
        }
        stdout.extend_from_slice(&buf[..n]);
    }
    // A child may exit without reading all of stdin; that is not an error.
    let _ = writer.await;
    let exit = handle.wait().await?;
    let stderr = stderr.await.unwrap_or_default();
    Ok(OneShotResult {
        stdout,
        stderr,
        exit,
    })
}

/// Reads NDJSON frames (one JSON value per line, at most 1 MiB each) from a
/// process's output, in order, as they arrive, whatever the chunking.
pub struct AcpFrames<R> {
    reader: R,
    pending: Vec<u8>,
    scanned: usize,
    eof: bool,
}

impl<R: tokio::io::AsyncRead + Unpin> AcpFrames<R> {
    /// Frames from `reader`.
    pub fn new(reader: R) -> Self {
        AcpFrames {
            reader,
            pending: Vec::new(),
            scanned: 0,
            eof: false,
        }
    }

    /// The next frame without its newline (a trailing `\r` is kept as part
    /// of the frame), or `None` at a clean end of stream.
    ///
    /// # Errors
    /// [`DriverError::FrameTooLarge`] as soon as a frame passes 1 MiB,
    /// [`DriverError::TruncatedFrame`] at end of stream inside a frame, and
    /// I/O errors.
    ///
    /// # Cancel safety
    /// Cancel safe: bytes already read stay buffered for the next call.
    pub async fn next_frame(&mut self) -> Result<Option<Vec<u8>>, DriverError> {
        loop {
            if let Some(pos) = self.pending[self.scanned..]
                .iter()
                .position(|b| *b == b'\n')
            {
                let end = self.scanned + pos;
                if end > ACP_FRAME_LIMIT_BYTES {
                    return Err(DriverError::FrameTooLarge {
                        limit_bytes: ACP_FRAME_LIMIT_BYTES,
                        frame_bytes: end,
                    });
                }
                let mut frame: Vec<u8> = self.pending.drain(..=end).collect();
                frame.pop();
                self.scanned = 0;
                return Ok(Some(frame));
            }
            self.scanned = self.pending.len();
            if self.pending.len() > ACP_FRAME_LIMIT_BYTES {
                return Err(DriverError::FrameTooLarge {
                    limit_bytes: ACP_FRAME_LIMIT_BYTES,
                    frame_bytes: self.pending.len(),
                });
            }
            if self.eof {
                return if self.pending.is_empty() {
                    Ok(None)
                } else {
                    Err(DriverError::TruncatedFrame {
                        frame_bytes: self.pending.len(),
                    })
                };
            }
            let mut buf = [0u8; 64 * 1024];
            let n = self.reader.read(&mut buf).await?;
            if n == 0 {
                self.eof = true;
            } else {
                self.pending.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Frames from a process's output stream.
pub fn acp_frames(
    output: std::pin::Pin<Box<dyn AsyncRead + Send>>,
) -> AcpFrames<tokio_util::compat::Compat<std::pin::Pin<Box<dyn AsyncRead + Send>>>> {
    AcpFrames::new(output.compat())
}

/// The Checkpoint release helper (spec "openProcess": a Checkpoint
/// release awaits `wait` under a 5-second bound after sending SIGTERM;
/// only SIGTERM is sent today): SIGTERM, then wait at most 5 s. A process
/// that does not settle is torn down with `destroy` (bounded at 30 s, the
/// rollback bound) and its exit awaited at most 5 s more. No other signal
/// is sent, and every step is bounded.
///
/// # Errors
/// The provider's signal, wait or destroy error;
/// `SandboxOperationFailed{operation: process_signal | process_destroy |
/// process_wait, reason: timed_out}` for a step that passed its bound.
pub async fn terminate(handle: &ProcessHandle) -> Result<ProcessExit, SandboxError> {
    terminate_within(handle, RELEASE_WAIT).await
}

/// [`terminate`] with a chosen grace period (the bound of the signal and
/// of each wait).
///
/// # Errors
/// As [`terminate`].
pub async fn terminate_within(
    handle: &ProcessHandle,
    grace: Duration,
) -> Result<ProcessExit, SandboxError> {
    bounded(
        ProcessStep::Signal,
        grace,
        handle.signal(ControlSignal::Sigterm),
    )
    .await??;
    if let Ok(exit) = tokio::time::timeout(grace, handle.wait()).await {
        return exit;
    }
    let teardown = Duration::from_secs(ROLLBACK_TIMEOUT_SECONDS);
    bounded(ProcessStep::Destroy, teardown, handle.destroy()).await??;
    bounded(ProcessStep::Wait, grace, handle.wait()).await?
}

/// `future` under `bound`; past it, `SandboxOperationFailed{operation:
/// process_<step>, reason: timed_out}`.
async fn bounded<T>(
    step: ProcessStep,
    bound: Duration,
    future: impl std::future::Future<Output = T>,
) -> Result<T, SandboxError> {
    tokio::time::timeout(bound, future).await.map_err(|_| {
        SandboxError::failed(
            Operation::Process(step),
            FailureReason::TimedOut,
            format!("did not settle within {} ms", bound.as_millis()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames_of(chunks: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, DriverError> {
        let (mut tx, rx) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            for c in chunks {
                if tx.write_all(&c).await.is_err() {
                    return;
                }
            }
        });
        let mut frames = AcpFrames::new(rx);
        let mut out = Vec::new();
        let result = loop {
            match frames.next_frame().await {
                Ok(Some(f)) => out.push(f),
                Ok(None) => break Ok(out),
                Err(e) => break Err(e),
            }
        };
        writer.abort();
        result
    }

    #[tokio::test]
    async fn frames_split_across_many_chunks_decode() {
        let frame = br#"{"jsonrpc":"2.0","id":1,"method":"session/prompt"}"#;
        let mut bytes = frame.to_vec();
        bytes.push(b'\n');
        let chunks: Vec<Vec<u8>> = bytes.chunks(3).map(|c| c.to_vec()).collect();
        assert_eq!(frames_of(chunks).await.unwrap(), vec![frame.to_vec()]);
    }

    #[tokio::test]
    async fn many_frames_in_one_chunk_decode_in_order() {
        let chunk = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n".to_vec();
        let frames = frames_of(vec![chunk]).await.unwrap();
        assert_eq!(
            frames,
            vec![
                b"{\"a\":1}".to_vec(),
                b"{\"b\":2}".to_vec(),
                b"{\"c\":3}".to_vec()
            ]
        );
    }

    #[tokio::test]
    async fn a_frame_of_exactly_one_mib_is_accepted_and_one_more_byte_refused() {
        let mut ok = vec![b'x'; ACP_FRAME_LIMIT_BYTES];
        ok.push(b'\n');
        assert_eq!(
            frames_of(vec![ok]).await.unwrap()[0].len(),
            ACP_FRAME_LIMIT_BYTES
        );
        let mut big = vec![b'x'; ACP_FRAME_LIMIT_BYTES + 1];
        big.push(b'\n');
        match frames_of(vec![big]).await {
            Err(DriverError::FrameTooLarge {
                limit_bytes,
                frame_bytes,
            }) => {
                assert_eq!(limit_bytes, ACP_FRAME_LIMIT_BYTES);
                assert_eq!(frame_bytes, ACP_FRAME_LIMIT_BYTES + 1);
            }
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_unterminated_frame_is_refused_at_eof() {
        match frames_of(vec![b"{\"a\":1}\n{\"b\"".to_vec()]).await {
            Err(DriverError::TruncatedFrame { frame_bytes: 4 }) => {}
            other => panic!("expected TruncatedFrame, got {other:?}"),
        }
    }
}
