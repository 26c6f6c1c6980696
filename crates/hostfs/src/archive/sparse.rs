//! Sparse files in snapshot archives: a file's data map from
//! `SEEK_DATA`/`SEEK_HOLE`, and the PAX 1.0 sparse format GNU tar and
//! bsdtar read (`GNU.sparse.major=1`, `GNU.sparse.minor=0`,
//! `GNU.sparse.name`, `GNU.sparse.realsize` in a PAX header; the entry's
//! data is the map — a count, then offset and length of each data
//! segment, decimal, one per line, padded with NULs to 512 bytes —
//! followed by the segments' bytes).
//!
//! Only data segments are stored, so an archive holds what the file
//! allocates, never its holes; extraction writes each segment at its
//! offset and sets the length, so holes stay holes.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use rustix::io::Errno;

/// One data segment of a file: `(offset, length)` in bytes.
pub(crate) type Segment = (u64, u64);

/// Tar's block size, in bytes.
pub(crate) const BLOCK: u64 = 512;

/// Most bytes a sparse map may take in an archive (64 MiB: about 1.5
/// million segments).
pub(crate) const MAX_MAP_BYTES: u64 = 64 << 20;

/// The PAX keys of the sparse format.
pub(crate) const KEY_MAJOR: &str = "GNU.sparse.major";
pub(crate) const KEY_MINOR: &str = "GNU.sparse.minor";
pub(crate) const KEY_NAME: &str = "GNU.sparse.name";
pub(crate) const KEY_REALSIZE: &str = "GNU.sparse.realsize";

/// The POSIX header's own name of a sparse entry (its real path is in the
/// PAX header), as GNU tar's `GNUSparseFile.%p/%f` with a fixed `%p`.
pub(crate) const PLACEHOLDER_NAME: &str = "GNUSparseFile.0/data";

/// The data segments of the first `size` bytes of `file`, in order;
/// `None` when the file is one segment `[0, size)` (dense), empty, or its
/// file system does not report holes.
///
/// # Errors
///
/// An `lseek` failure other than "no more data" or "not supported".
pub(crate) fn data_map(file: &File, size: u64) -> io::Result<Option<Vec<Segment>>> {
    if size == 0 {
        return Ok(None);
    }
    let mut segments = Vec::new();
    let mut at = 0u64;
    while at < size {
        let start = match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(at)) {
            Ok(s) => s,
            // No data at or after `at`: the rest is a hole.
            Err(Errno::NXIO) => break,
            Err(Errno::INVAL | Errno::OPNOTSUPP) if at == 0 => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if start >= size {
            break;
        }
        let end = match rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(start)) {
            Ok(e) => e.min(size),
            Err(e) => return Err(e.into()),
        };
        if end <= start {
            return Err(io::Error::other("SEEK_HOLE did not advance"));
        }
        segments.push((start, end - start));
        at = end;
    }
    if segments == [(0, size)] {
        return Ok(None);
    }
    // A last, empty segment at the end, as GNU tar writes (its reader
    // needs it when the file ends in a hole).
    segments.push((size, 0));
    Ok(Some(segments))
}

/// The map block of `segments`: count, then offset and length of each,
/// one decimal per line, padded with NULs to a multiple of 512 bytes.
pub(crate) fn map_block(segments: &[Segment]) -> Vec<u8> {
    let mut out = format!("{}\n", segments.len()).into_bytes();
    for (offset, length) in segments {
        out.extend_from_slice(format!("{offset}\n{length}\n").as_bytes());
    }
    let padded = round_up(out.len() as u64) as usize;
    out.resize(padded, 0);
    out
}

/// `n` rounded up to a multiple of [`BLOCK`].
pub(crate) fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK).saturating_mul(BLOCK)
}

/// Reads `segments` of `file` one after another, each by offset
/// (`pread`), so the file's own position is never used. A segment that
/// ends early (the file shrank) is an error.
pub(crate) struct SegmentReader<'a> {
    file: &'a File,
    segments: &'a [Segment],
    index: usize,
    done: u64,
}

impl<'a> SegmentReader<'a> {
    pub(crate) fn new(file: &'a File, segments: &'a [Segment]) -> Self {
        SegmentReader {
            file,
            segments,
            index: 0,
            done: 0,
        }
    }
}

impl Read for SegmentReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(&(offset, length)) = self.segments.get(self.index) {
            let left = length - self.done;
            if left == 0 {
                self.index += 1;
                self.done = 0;
                continue;
            }
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = self.file.read_at(&mut buf[..want], offset + self.done)?;
            if n == 0 {
                return Err(io::Error::other("file shrank while being archived"));
            }
            self.done += n as u64;
            return Ok(n);
        }
        Ok(0)
    }
}

/// What an entry's PAX sparse keys say, when it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SparseHeader {
    /// The file's apparent size, in bytes.
    pub(crate) real_size: u64,
}

/// The sparse keys of PAX `extensions`: `Ok(None)` without
/// `GNU.sparse.major`.
///
/// # Errors
///
/// A reason string for a format other than 1.0 or a missing or malformed
/// real size.
pub(crate) fn sparse_header<'a>(
    extensions: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Option<SparseHeader>, String> {
    let (mut major, mut minor, mut real) = (None, None, None);
    for (key, value) in extensions {
        let slot = match key {
            k if k == KEY_MAJOR.as_bytes() => &mut major,
            k if k == KEY_MINOR.as_bytes() => &mut minor,
            k if k == KEY_REALSIZE.as_bytes() => &mut real,
            _ => continue,
        };
        *slot = Some(decimal(value).ok_or_else(|| {
            format!(
                "sparse key {:?} is not a decimal: {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(value)
            )
        })?);
    }
    match (major, minor, real) {
        (None, None, None) => Ok(None),
        (Some(1), Some(0), Some(real_size)) => Ok(Some(SparseHeader { real_size })),
        (major, minor, real) => Err(format!(
            "sparse format: expected major 1, minor 0 and a real size, actual major {major:?}, \
minor {minor:?}, real size {real:?}"
        )),
    }
}

fn decimal(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Reads a map block from the start of an entry of `entry_size` bytes
/// whose file is `real_size` bytes: the segments, checked (in order, not
/// overlapping, inside the file, their bytes exactly filling the entry
/// after the map).
///
/// # Errors
///
/// A reason string for a malformed map; an i/o failure as its message.
pub(crate) fn read_map(
    entry: &mut impl Read,
    entry_size: u64,
    real_size: u64,
) -> Result<Vec<Segment>, String> {
    let mut block = vec![0u8; BLOCK as usize];
    let mut text: Vec<u8> = Vec::new();
    let mut map_bytes = 0u64;
    let mut numbers: Vec<u64> = Vec::new();
    let mut wanted: Option<u64> = None;
    loop {
        if let Some(w) = wanted {
            if numbers.len() as u64 == 1 + 2 * w {
                break;
            }
        }
        map_bytes += BLOCK;
        if map_bytes > entry_size.min(MAX_MAP_BYTES) {
            return Err(format!(
                "sparse map: longer than {} bytes",
                entry_size.min(MAX_MAP_BYTES)
            ));
        }
        entry
            .read_exact(&mut block)
            .map_err(|e| format!("sparse map: {e}"))?;
        for (i, &b) in block.iter().enumerate() {
            match b {
                b'\n' => {
                    let n = decimal(&text).ok_or_else(|| {
                        format!("sparse map: {:?}", String::from_utf8_lossy(&text))
                    })?;
                    numbers.push(n);
                    text.clear();
                    if numbers.len() == 1 {
                        // Each segment needs at least 4 bytes of map.
                        if n > entry_size / 4 {
                            return Err(format!("sparse map: {n} segments"));
                        }
                        wanted = Some(n);
                    }
                    if wanted.is_some_and(|w| numbers.len() as u64 == 1 + 2 * w) {
                        if block[i + 1..].iter().any(|&p| p != 0) {
                            return Err("sparse map: padding is not NULs".into());
                        }
                        break;
                    }
                }
                b if b.is_ascii_digit() && text.len() < 20 => text.push(b),
                _ => return Err("sparse map: not decimal lines".into()),
            }
        }
    }
    let mut segments = Vec::with_capacity(numbers.len() / 2);
    let (mut end, mut data) = (0u64, 0u64);
    for pair in numbers[1..].chunks_exact(2) {
        let (offset, length) = (pair[0], pair[1]);
        let stop = offset
            .checked_add(length)
            .filter(|s| offset >= end && *s <= real_size)
            .ok_or_else(|| {
                format!(
                    "sparse map: segment {offset}+{length} out of order or past the size {real_size}"
                )
            })?;
        end = stop;
        data += length;
        segments.push((offset, length));
    }
    if map_bytes.checked_add(data) != Some(entry_size) {
        return Err(format!(
            "sparse map: expected {entry_size} bytes of entry, actual {map_bytes} of map and \
{data} of data"
        ));
    }
    Ok(segments)
}

/// Writes `segments`' bytes from `entry` into `file` at their offsets and
/// sets its length to `real_size`: holes are never written.
///
/// # Errors
///
/// An i/o failure, or an entry that ends before its segments do.
pub(crate) fn write_segments(
    entry: &mut impl Read,
    file: &mut File,
    segments: &[Segment],
    real_size: u64,
) -> io::Result<()> {
    for &(offset, length) in segments {
        file.seek(SeekFrom::Start(offset))?;
        let copied = io::copy(&mut entry.take(length), file)?;
        if copied != length {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "archive entry ended inside a data segment",
            ));
        }
    }
    file.set_len(real_size)?;
    file.flush()
}
