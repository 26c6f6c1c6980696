//! Bounded NDJSON framing: one message per `\n`-terminated line.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why a line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line grew past the bound before its newline.
    #[error("a line longer than {limit} bytes")]
    TooLong {
        /// The bound, in bytes.
        limit: usize,
    },
    /// The stream ended inside a line.
    #[error("the stream ended inside a line after {bytes} bytes")]
    Truncated {
        /// Bytes of the unfinished line.
        bytes: usize,
    },
    /// The transport failed.
    #[error("transport error: {0}")]
    Io(String),
}

/// Reads one line into `buf` (cleared first, newline stripped), never
/// holding more than `limit` bytes of it. `Ok(false)` is a clean end of
/// stream between lines.
///
/// # Errors
/// [`LineError`]; after `TooLong` the stream is not resynchronised.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
    buf: &mut Vec<u8>,
) -> Result<bool, LineError> {
    buf.clear();
    loop {
        let available = reader
            .fill_buf()
            .await
            .map_err(|e| LineError::Io(e.to_string()))?;
        if available.is_empty() {
            return if buf.is_empty() {
                Ok(false)
            } else {
                Err(LineError::Truncated { bytes: buf.len() })
            };
        }
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        if buf.len() + take > limit {
            return Err(LineError::TooLong { limit });
        }
        buf.extend_from_slice(&available[..take]);
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(true);
        }
    }
}
