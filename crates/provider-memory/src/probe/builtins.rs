//! Applets real workloads send beyond the probe vocabulary: `printf`
//! (with octal escapes, so output may be any bytes), `dd` (sparse
//! `seek=`), `chmod` (octal modes) and `setsid`; and the output side of
//! redirections.

use crate::fs::{FsNode, Name, SpecialKind};

use super::*;

/// A `dd` size: a number with busybox's suffixes (`c` 1, `w` 2, `b` 512,
/// `k`/`K` 1024, `kB` 1000, `M` 2^20, `MB` 10^6, `G` 2^30, `GB` 10^9,
/// `T` 2^40, `TB` 10^12).
pub(super) fn dd_size(value: &str) -> Option<u64> {
    let digits = value.chars().take_while(char::is_ascii_digit).count();
    let (number, suffix) = value.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match suffix {
        "" | "c" => 1,
        "w" => 2,
        "b" => 512,
        "k" | "K" => 1 << 10,
        "kB" | "KB" => 1_000,
        "M" => 1 << 20,
        "MB" => 1_000_000,
        "G" => 1 << 30,
        "GB" => 1_000_000_000,
        "T" => 1 << 40,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// Appends one `printf` backslash escape starting after the `\` at
/// `format[i]`; returns the index after it.
fn escape(format: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let Some(&c) = format.get(i) else {
        out.push(b'\\');
        return i;
    };
    let simple = match c {
        b'n' => Some(b'\n'),
        b't' => Some(b'\t'),
        b'r' => Some(b'\r'),
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'v' => Some(0x0b),
        b'\\' => Some(b'\\'),
        b'"' => Some(b'"'),
        b'\'' => Some(b'\''),
        _ => None,
    };
    if let Some(b) = simple {
        out.push(b);
        return i + 1;
    }
    if (b'0'..=b'7').contains(&c) {
        let mut value: u32 = 0;
        let mut j = i;
        while j < format.len() && j < i + 3 && (b'0'..=b'7').contains(&format[j]) {
            value = value * 8 + u32::from(format[j] - b'0');
            j += 1;
        }
        out.push((value & 0xff) as u8);
        return j;
    }
    if c == b'x' {
        let hex: Vec<u8> = format[i + 1..]
            .iter()
            .take(2)
            .take_while(|b| b.is_ascii_hexdigit())
            .copied()
            .collect();
        if let Some(v) = std::str::from_utf8(&hex)
            .ok()
            .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            return i + 1 + hex.len();
        }
    }
    out.push(b'\\');
    out.push(c);
    i + 1
}

/// Pads `body` to `width` (left-justified with `-`, zero-filled with `0`).
fn pad(body: Vec<u8>, width: usize, left: bool, zero: bool) -> Vec<u8> {
    if body.len() >= width {
        return body;
    }
    let fill = width - body.len();
    if left {
        [body, vec![b' '; fill]].concat()
    } else if zero {
        let sign = usize::from(body.first() == Some(&b'-'));
        [&body[..sign], &vec![b'0'; fill], &body[sign..]].concat()
    } else {
        [vec![b' '; fill], body].concat()
    }
}

impl Exec<'_> {
    /// `printf FORMAT [ARGUMENT...]`: `%s %b %c %d %i %u %o %x %X %%` with
    /// flags `-` and `0`, a width and a precision; escapes `\n \t \r \a \b
    /// \f \v \\ \NNN \xHH`. The format is reused while arguments remain.
    pub(super) fn printf(&mut self, args: &[String]) -> Result<u8, Abort> {
        let Some(format) = args.first() else {
            self.err("printf: usage: printf FORMAT [ARGUMENT]...".into())?;
            return Ok(1);
        };
        let format = format.as_bytes();
        let mut rest = args[1..].iter();
        let mut out = Vec::new();
        let mut code = 0;
        loop {
            let before = rest.len();
            let mut i = 0;
            while i < format.len() {
                match format[i] {
                    b'\\' => i = escape(format, i + 1, &mut out),
                    b'%' => {
                        let start = i;
                        i += 1;
                        let (mut left, mut zero) = (false, false);
                        while let Some(f @ (b'-' | b'0' | b' ' | b'+' | b'#')) = format.get(i) {
                            left |= *f == b'-';
                            zero |= *f == b'0';
                            i += 1;
                        }
                        let number = |i: &mut usize| {
                            let s = *i;
                            while format.get(*i).is_some_and(u8::is_ascii_digit) {
                                *i += 1;
                            }
                            std::str::from_utf8(&format[s..*i])
                                .ok()?
                                .parse::<usize>()
                                .ok()
                        };
                        let width = number(&mut i).unwrap_or(0);
                        let precision = if format.get(i) == Some(&b'.') {
                            i += 1;
                            Some(number(&mut i).unwrap_or(0))
                        } else {
                            None
                        };
                        let Some(&conversion) = format.get(i) else {
                            out.extend_from_slice(&format[start..]);
                            break;
                        };
                        i += 1;
                        let arg = || rest.clone().next().cloned().unwrap_or_default();
                        let body = match conversion {
                            b'%' => {
                                out.push(b'%');
                                continue;
                            }
                            b's' => {
                                let mut s = arg().into_bytes();
                                if let Some(p) = precision {
                                    s.truncate(p);
                                }
                                s
                            }
                            b'b' => {
                                let a = arg().into_bytes();
                                let mut s = Vec::new();
                                let mut j = 0;
                                while j < a.len() {
                                    if a[j] == b'\\' {
                                        let k = if a.get(j + 1) == Some(&b'0') {
                                            j + 2
                                        } else {
                                            j + 1
                                        };
                                        j = escape(&a, k, &mut s);
                                    } else {
                                        s.push(a[j]);
                                        j += 1;
                                    }
                                }
                                s
                            }
                            b'c' => arg().bytes().take(1).collect(),
                            b'd' | b'i' | b'u' | b'o' | b'x' | b'X' => {
                                let a = arg();
                                let value = if a.is_empty() {
                                    Some(0)
                                } else {
                                    a.trim().parse::<i64>().ok()
                                };
                                let Some(v) = value else {
                                    self.err(format!("printf: invalid number '{a}'"))?;
                                    code = 1;
                                    rest.next();
                                    continue;
                                };
                                match conversion {
                                    b'o' => format!("{v:o}"),
                                    b'x' => format!("{v:x}"),
                                    b'X' => format!("{v:X}"),
                                    _ => v.to_string(),
                                }
                                .into_bytes()
                            }
                            other => {
                                self.err(format!("printf: %{}: invalid format", other as char))?;
                                return Ok(1);
                            }
                        };
                        rest.next();
                        out.extend(pad(body, width, left, zero && !left));
                    }
                    b => {
                        out.push(b);
                        i += 1;
                    }
                }
            }
            if rest.len() == 0 || rest.len() == before {
                break;
            }
        }
        self.out(&out)?;
        Ok(code)
    }

    /// `setsid [-c|-f|-w] PROG ARGS`: runs its command (the oracle has no
    /// sessions to leave).
    pub(super) fn setsid(&mut self, args: &[String]) -> Result<u8, Abort> {
        let rest: Vec<String> = args
            .iter()
            .skip_while(|a| a.starts_with('-'))
            .cloned()
            .collect();
        if rest.is_empty() {
            self.err("setsid: usage: setsid [-c] PROG ARGS".into())?;
            return Ok(1);
        }
        self.run(&rest)
    }

    /// `dd [if=F] [of=F] [bs=N] [count=N] [skip=N] [seek=N] [conv=notrunc]
    /// [status=none|noxfer]`: `seek=` past the end leaves a hole, so
    /// `count=0 seek=24G` makes a 24 GiB file that stores nothing.
    pub(super) fn dd(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (mut input, mut output, mut notrunc, mut quiet) = (None, None, false, false);
        let (mut bs, mut count, mut skip, mut seek) = (512u64, None, 0u64, 0u64);
        for a in args {
            let Some((key, value)) = a.split_once('=') else {
                self.err(format!("dd: invalid argument '{a}'"))?;
                return Ok(1);
            };
            let size = |v: &str| dd_size(v);
            let parsed = match key {
                "if" => {
                    input = Some(value.to_string());
                    Some(0)
                }
                "of" => {
                    output = Some(value.to_string());
                    Some(0)
                }
                "conv" => {
                    notrunc = value.split(',').any(|c| c == "notrunc");
                    Some(0)
                }
                "status" => {
                    quiet = value == "none";
                    Some(0)
                }
                "bs" | "ibs" | "obs" => size(value).filter(|n| *n > 0).inspect(|n| bs = *n),
                "count" => size(value).inspect(|n| count = Some(*n)),
                "skip" => size(value).inspect(|n| skip = *n),
                "seek" => size(value).inspect(|n| seek = *n),
                _ => {
                    self.err(format!("dd: unknown operand '{key}'"))?;
                    return Ok(1);
                }
            };
            if parsed.is_none() {
                self.err(format!("dd: invalid number '{value}'"))?;
                return Ok(1);
            }
        }
        let limit = count.map(|c| c.saturating_mul(bs));
        let offset = skip.saturating_mul(bs);
        // The bytes to copy: `Err(n)` is n zero bytes (from /dev/zero).
        let data: Result<Vec<u8>, u64> = match &input {
            None => Ok(self.stdin.take().unwrap_or_default()),
            Some(path) => match self.read(path) {
                Ok(Readable::Bytes(b)) => Ok(b),
                Ok(Readable::Zero) => match limit {
                    Some(n) => Err(n),
                    None => {
                        self.err(format!(
                            "dd: reading {path} without count= is not supported by the memory oracle"
                        ))?;
                        return Ok(1);
                    }
                },
                Ok(Readable::Blocks) => return Err(self.block()),
                Err(msg) => {
                    self.err(format!("dd: can't open '{path}': {msg}"))?;
                    return Ok(1);
                }
            },
        };
        let data = data.map(|b| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
            let end = limit.map_or(b.len(), |n| {
                start
                    .saturating_add(usize::try_from(n).unwrap_or(usize::MAX))
                    .min(b.len())
            });
            b[start..end].to_vec()
        });
        let copied = match &data {
            Ok(b) => b.len() as u64,
            Err(n) => *n,
        };
        match &output {
            None => match &data {
                Ok(b) => self.out(b)?,
                Err(n) => {
                    let chunk = [0u8; 65_536];
                    let mut left = *n;
                    while left > 0 {
                        let take = left.min(chunk.len() as u64) as usize;
                        self.out(&chunk[..take])?;
                        left -= take as u64;
                    }
                }
            },
            Some(path) => {
                let at = seek.saturating_mul(bs);
                let written = self.open_output(path, false).and_then(|physical| {
                    if !notrunc {
                        self.fs.set_len(&physical, at);
                    }
                    match &data {
                        Ok(b) => self.fs.write_at(&physical, at, b),
                        Err(n) => self.fs.write_zeros_at(&physical, at, *n),
                    }
                });
                if let Err(msg) = written {
                    self.err(format!("dd: {path}: {msg}"))?;
                    return Ok(1);
                }
            }
        }
        if !quiet {
            let (full, partial) = (copied / bs, u64::from(copied % bs != 0));
            self.err(format!(
                "{full}+{partial} records in\n{full}+{partial} records out\n{copied} bytes copied"
            ))?;
        }
        Ok(0)
    }

    /// Opens `path` for writing as a redirection or `of=` does: creates a
    /// missing regular file, truncates an existing one when `truncate`
    /// (keeping its mode). Returns its physical path; writes to
    /// `/dev/null` are accepted and vanish.
    pub(crate) fn open_output(
        &mut self,
        path: impl AsRef<[u8]>,
        truncate: bool,
    ) -> Result<Name, &'static str> {
        let (physical, node) = self
            .fs
            .resolve(&self.cwd, path, true)
            .map_err(walk_message)?;
        match node {
            Some(FsNode::Directory) | Some(FsNode::Special(SpecialKind::Submodule)) => {
                Err("Is a directory")
            }
            Some(FsNode::Special(SpecialKind::NullDevice)) => Ok(physical),
            Some(FsNode::Special(_)) | Some(FsNode::Symlink(_)) => Err("Permission denied"),
            Some(FsNode::File(_)) => {
                self.writable(&physical)?;
                if truncate {
                    self.fs.set_len(&physical, 0);
                }
                Ok(physical)
            }
            None => {
                self.writable(&physical)?;
                self.fs.insert(&physical, FsNode::File(Vec::new()));
                Ok(physical)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dd_sizes_take_busybox_suffixes() {
        assert_eq!(dd_size("24G"), Some(24 << 30));
        assert_eq!(dd_size("1"), Some(1));
        assert_eq!(dd_size("2k"), Some(2048));
        assert_eq!(dd_size("3MB"), Some(3_000_000));
        assert_eq!(dd_size("1b"), Some(512));
        assert_eq!(dd_size("x"), None);
        assert_eq!(dd_size("1Q"), None);
        assert_eq!(dd_size("99999999999T"), None);
    }

    #[test]
    fn printf_escapes_make_any_byte() {
        let mut out = Vec::new();
        let end = escape(b"377x", 0, &mut out);
        assert_eq!((out.as_slice(), end), (&b"\xff"[..], 3));
        out.clear();
        escape(b"x41", 0, &mut out);
        escape(b"n", 0, &mut out);
        escape(b"q", 0, &mut out);
        assert_eq!(out, b"A\n\\q");
        assert_eq!(pad(b"-5".to_vec(), 4, false, true), b"-005");
        assert_eq!(pad(b"ab".to_vec(), 4, true, false), b"ab  ");
    }
}
