//! Permission-bit applets of the probe vocabulary: `chmod` with an octal
//! mode and `stat -c FORMAT` (`%a`, `%n`, `%F`, `%%`), as busybox prints
//! them, on the instance's tree.

use super::*;

/// `stat`'s `%F`: the type as busybox names it (`regular empty file` for
/// a file whose size, holes included, is 0 bytes).
fn file_type(node: &FsNode, size_bytes: u64) -> &'static str {
    match node {
        FsNode::File(_) if size_bytes == 0 => "regular empty file",
        FsNode::File(_) => "regular file",
        FsNode::Directory | FsNode::Special(SpecialKind::Submodule) => "directory",
        FsNode::Symlink(_) => "symbolic link",
        FsNode::Special(
            SpecialKind::NullDevice | SpecialKind::ZeroDevice | SpecialKind::Device,
        ) => "character special file",
        FsNode::Special(SpecialKind::Socket) => "socket",
        FsNode::Special(SpecialKind::Fifo) => "fifo",
        FsNode::Special(SpecialKind::Other) => "weird file",
    }
}

impl Exec<'_> {
    /// `chmod MODE FILE...`: MODE in octal (`755`, `0600`, `4755`); the tree
    /// keeps the permission bits (`& 0o777`, no set-id or sticky bit);
    /// follows a final link, as `chmod` does.
    pub(super) fn chmod(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, ops) = Self::operands(args);
        let Some((mode, files)) = ops.split_first() else {
            self.err("chmod: missing operand".into())?;
            return Ok(1);
        };
        let Some(bits) = u32::from_str_radix(mode, 8).ok().filter(|b| *b <= 0o7777) else {
            self.err(format!(
                "chmod: invalid mode '{mode}' (the memory oracle takes octal modes)"
            ))?;
            return Ok(1);
        };
        if files.is_empty() {
            self.err(format!("chmod: missing operand after '{mode}'"))?;
            return Ok(1);
        }
        let mut code = 0;
        for f in files {
            let result = match self.fs.resolve(&self.cwd, f, true) {
                Err(e) => Err(walk_message(e)),
                Ok((_, None)) => Err("No such file or directory"),
                Ok((physical, Some(_))) => self
                    .writable(&physical)
                    .map(|()| self.fs.set_mode(&physical, bits & 0o777)),
            };
            if let Err(msg) = result {
                self.err(format!("chmod: {f}: {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }

    /// `stat -c FORMAT FILE...`: one line per file, a final link not
    /// followed (`%a` octal bits, `%n` the name, `%F` the type, `%%`).
    pub(super) fn stat(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (format, files) = match args {
            [flag, format, files @ ..] if flag == "-c" => (format.clone(), files),
            _ => {
                self.err("stat: the probe's stat takes -c FORMAT FILE...".into())?;
                return Ok(1);
            }
        };
        if files.is_empty() {
            self.err("stat: missing operand".into())?;
            return Ok(1);
        }
        let mut code = 0;
        for f in files {
            let (physical, node) = match self.fs.resolve(&self.cwd, f, false) {
                Ok((physical, Some(node))) => (physical, node.clone()),
                Ok((_, None)) => {
                    self.err(format!("stat: can't stat '{f}': No such file or directory"))?;
                    code = 1;
                    continue;
                }
                Err(e) => {
                    self.err(format!("stat: can't stat '{f}': {}", walk_message(e)))?;
                    code = 1;
                    continue;
                }
            };
            let bits = match node {
                FsNode::Symlink(_) => 0o777,
                _ => self.fs.mode(&physical),
            };
            let size_bytes = match &node {
                FsNode::File(b) => self.fs.apparent_size(&physical, b.len()),
                _ => 0,
            };
            let mut line = String::new();
            let mut chars = format.chars();
            while let Some(c) = chars.next() {
                if c != '%' {
                    line.push(c);
                    continue;
                }
                match chars.next() {
                    Some('a') => line.push_str(&format!("{bits:o}")),
                    Some('n') => line.push_str(f),
                    Some('F') => line.push_str(file_type(&node, size_bytes)),
                    Some('%') => line.push('%'),
                    Some(other) => {
                        line.push('?');
                        line.push(other);
                    }
                    None => line.push('%'),
                }
            }
            line.push('\n');
            self.out(line.as_bytes())?;
        }
        Ok(code)
    }
}
