//! File applets of the probe vocabulary: `cat`, `cp`, `touch`, `ls`, `head`,
//! `sha256sum`, `ln`, `mkdir`, `rm`, `mkfifo`, `tee`, on the instance's tree.

use super::*;

impl Exec<'_> {
    pub(super) fn operands(args: &[String]) -> (Vec<char>, Vec<String>) {
        let mut flags = vec![];
        let mut ops = vec![];
        let mut done = false;
        for a in args {
            if !done && a == "--" {
                done = true;
            } else if !done && a.len() > 1 && a.starts_with('-') {
                flags.extend(a[1..].chars());
            } else {
                ops.push(a.clone());
            }
        }
        (flags, ops)
    }

    pub(super) fn cat(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, mut files) = Self::operands(args);
        if files.is_empty() {
            files.push("-".into());
        }
        let mut code = 0;
        for f in files {
            if f == "-" {
                let s = self.stdin.take().unwrap_or_default();
                self.out(&s)?;
                continue;
            }
            match self.read(&f) {
                Ok(Readable::Bytes(b)) => self.out(&b)?,
                Ok(Readable::Zero) => loop {
                    self.out(&[0u8; 65_536])?;
                },
                Ok(Readable::Blocks) => return Err(self.block()),
                Err(msg) => {
                    self.err(format!("cat: {f}: {msg}"))?;
                    code = 1;
                }
            }
        }
        Ok(code)
    }

    pub(super) fn cp(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, ops) = Self::operands(args);
        if ops.len() < 2 {
            self.err("cp: missing file operand".into())?;
            return Ok(1);
        }
        let (sources, dest) = ops.split_at(ops.len() - 1);
        let dest = &dest[0];
        let dest_is_dir = matches!(
            self.fs.resolve(&self.cwd, dest, true),
            Ok((_, Some(FsNode::Directory)))
        );
        if sources.len() > 1 && !dest_is_dir {
            self.err(format!("cp: {dest}: Not a directory"))?;
            return Ok(1);
        }
        let mut code = 0;
        for src in sources {
            let bytes = match self.read(src) {
                Ok(Readable::Bytes(b)) => b,
                Ok(Readable::Zero) => {
                    self.err(format!("cp: {src}: not a regular file"))?;
                    code = 1;
                    continue;
                }
                Ok(Readable::Blocks) => return Err(self.block()),
                Err(msg) => {
                    self.err(format!("cp: can't stat '{src}': {msg}"))?;
                    code = 1;
                    continue;
                }
            };
            let target = if dest_is_dir {
                format!("{dest}/{}", text(&basename(src)))
            } else {
                dest.clone()
            };
            if let Err(msg) = self.write_file(&target, bytes) {
                self.err(format!("cp: can't create '{target}': {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }

    pub(super) fn touch(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, ops) = Self::operands(args);
        let mut code = 0;
        for f in ops {
            let result = match self.fs.resolve(&self.cwd, &f, true) {
                Err(e) => Err(walk_message(e)),
                Ok((physical, node)) => {
                    let exists = node.is_some();
                    self.writable(&physical).map(|()| {
                        if !exists {
                            self.fs.insert(&physical, FsNode::File(vec![]));
                        }
                    })
                }
            };
            if let Err(msg) = result {
                self.err(format!("touch: {f}: {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }

    pub(super) fn ls(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (flags, mut ops) = Self::operands(args);
        let all = flags.contains(&'a');
        if ops.is_empty() {
            ops.push(".".into());
        }
        let many = ops.len() > 1;
        let mut code = 0;
        for p in ops {
            match self.fs.resolve(&self.cwd, &p, true) {
                Ok((physical, Some(FsNode::Directory))) => {
                    if many {
                        self.out(format!("{p}:\n").as_bytes())?;
                    }
                    let names = self.fs.children(&physical);
                    for n in names.into_iter().filter(|n| all || !n.starts_with(b".")) {
                        self.out(&[n.as_slice(), b"\n"].concat())?;
                    }
                }
                Ok((_, Some(_))) => self.out(format!("{p}\n").as_bytes())?,
                Ok((_, None)) => {
                    self.err(format!("ls: {p}: No such file or directory"))?;
                    code = 1;
                }
                Err(e) => {
                    self.err(format!("ls: {p}: {}", walk_message(e)))?;
                    code = 1;
                }
            }
        }
        Ok(code)
    }

    pub(super) fn head(&mut self, args: &[String]) -> Result<u8, Abort> {
        let mut bytes: Option<u64> = None;
        let mut lines: u64 = 10;
        let mut files = vec![];
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let (flag, inline) = if let Some(rest) = a.strip_prefix("-c") {
                (Some('c'), rest)
            } else if let Some(rest) = a.strip_prefix("-n") {
                (Some('n'), rest)
            } else {
                (None, "")
            };
            match flag {
                Some(f) => {
                    let value = if inline.is_empty() {
                        i += 1;
                        args.get(i).cloned().unwrap_or_default()
                    } else {
                        inline.to_string()
                    };
                    let Ok(n) = value.parse::<u64>() else {
                        self.err(format!("head: invalid number '{value}'"))?;
                        return Ok(1);
                    };
                    if f == 'c' {
                        bytes = Some(n);
                    } else {
                        lines = n;
                    }
                }
                None => files.push(a.clone()),
            }
            i += 1;
        }
        if files.is_empty() {
            files.push("-".into());
        }
        let mut code = 0;
        for f in files {
            let source = if f == "-" {
                Ok(Readable::Bytes(self.stdin.take().unwrap_or_default()))
            } else {
                self.read(&f)
            };
            match source {
                Ok(Readable::Zero) => match bytes {
                    Some(n) => {
                        let mut left = n;
                        let chunk = [0u8; 65_536];
                        while left > 0 {
                            let take = left.min(chunk.len() as u64) as usize;
                            self.out(&chunk[..take])?;
                            left -= take as u64;
                        }
                    }
                    None => {
                        let zeros = vec![0u8; 65_536];
                        self.out(&zeros)?;
                        return Err(self.block());
                    }
                },
                Ok(Readable::Bytes(b)) => {
                    let cut = match bytes {
                        Some(n) => b.len().min(usize::try_from(n).unwrap_or(usize::MAX)),
                        None => {
                            let mut seen = 0u64;
                            b.iter()
                                .position(|c| {
                                    if *c == b'\n' {
                                        seen += 1;
                                    }
                                    seen >= lines && *c == b'\n'
                                })
                                .map(|p| p + 1)
                                .unwrap_or(b.len())
                        }
                    };
                    let cut = if bytes.is_none() && lines == 0 {
                        0
                    } else {
                        cut
                    };
                    self.out(&b[..cut])?;
                }
                Ok(Readable::Blocks) => return Err(self.block()),
                Err(msg) => {
                    self.err(format!("head: {f}: {msg}"))?;
                    code = 1;
                }
            }
        }
        Ok(code)
    }

    pub(super) fn sha256sum(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, mut files) = Self::operands(args);
        if files.is_empty() {
            files.push("-".into());
        }
        let mut code = 0;
        for f in files {
            let source = if f == "-" {
                Ok(Readable::Bytes(self.stdin.take().unwrap_or_default()))
            } else {
                self.read(&f)
            };
            match source {
                Ok(Readable::Bytes(b)) => {
                    let hex: String = Sha256::digest(&b)
                        .iter()
                        .map(|x| format!("{x:02x}"))
                        .collect();
                    self.out(format!("{hex}  {f}\n").as_bytes())?;
                }
                Ok(Readable::Zero) | Ok(Readable::Blocks) => return Err(self.block()),
                Err(msg) => {
                    self.err(format!("sha256sum: {f}: {msg}"))?;
                    code = 1;
                }
            }
        }
        Ok(code)
    }

    pub(super) fn ln(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (flags, ops) = Self::operands(args);
        if !flags.contains(&'s') {
            self.err("ln: only symbolic links (-s) are supported".into())?;
            return Ok(1);
        }
        let force = flags.contains(&'f');
        let (Some(target), Some(link)) = (ops.first(), ops.get(1)) else {
            self.err("ln: missing file operand".into())?;
            return Ok(1);
        };
        let link = match self.fs.resolve(&self.cwd, link, true) {
            Ok((_, Some(FsNode::Directory))) => format!("{link}/{}", text(&basename(target))),
            _ => link.clone(),
        };
        let result = match self.fs.resolve(&self.cwd, &link, false) {
            Err(e) => Err(walk_message(e)),
            Ok((_, Some(FsNode::Directory))) => Err("File exists"),
            Ok((_, Some(_))) if !force => Err("File exists"),
            Ok((physical, _)) => self.writable(&physical).map(|()| {
                self.fs.insert(&physical, FsNode::Symlink(target.clone()));
            }),
        };
        match result {
            Ok(()) => Ok(0),
            Err(msg) => {
                self.err(format!("ln: {link}: {msg}"))?;
                Ok(1)
            }
        }
    }

    pub(super) fn mkdir(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (flags, ops) = Self::operands(args);
        let parents = flags.contains(&'p');
        let mut code = 0;
        for d in ops {
            let prefixes: Vec<String> = if parents {
                let comps = split(&d);
                let lead = if d.starts_with('/') { "/" } else { "" };
                (1..=comps.len())
                    .map(|i| format!("{lead}{}", text(&comps[..i].join(&b'/'))))
                    .collect()
            } else {
                vec![d.clone()]
            };
            for p in &prefixes {
                let result = match self.fs.resolve(&self.cwd, p, true) {
                    Err(e) => Err(walk_message(e)),
                    Ok((_, Some(FsNode::Directory))) if parents => Ok(()),
                    Ok((_, Some(_))) => Err("File exists"),
                    Ok((physical, None)) => self.writable(&physical).map(|()| {
                        self.fs.insert(&physical, FsNode::Directory);
                    }),
                };
                if let Err(msg) = result {
                    self.err(format!("mkdir: can't create directory '{p}': {msg}"))?;
                    code = 1;
                    break;
                }
            }
        }
        Ok(code)
    }

    pub(super) fn rm(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (flags, ops) = Self::operands(args);
        let recursive = flags.contains(&'r') || flags.contains(&'R');
        let force = flags.contains(&'f');
        let mut code = 0;
        for p in ops {
            let result = match self.fs.resolve(&self.cwd, &p, false) {
                Err(e) => Err(walk_message(e)),
                Ok((_, None)) if force => Ok(()),
                Ok((_, None)) => Err("No such file or directory"),
                Ok((_, Some(FsNode::Directory))) if !recursive => Err("Is a directory"),
                Ok((physical, Some(_))) => {
                    if self.busy(&physical) {
                        Err("Device or resource busy")
                    } else {
                        self.writable(&physical)
                            .map(|()| self.fs.remove_tree(&physical))
                    }
                }
            };
            if let Err(msg) = result {
                self.err(format!("rm: can't remove '{p}': {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }

    pub(super) fn mkfifo(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, ops) = Self::operands(args);
        let mut code = 0;
        for p in ops {
            let result = match self.fs.resolve(&self.cwd, &p, false) {
                Err(e) => Err(walk_message(e)),
                Ok((_, Some(_))) => Err("File exists"),
                Ok((physical, None)) => self.writable(&physical).map(|()| {
                    self.fs
                        .insert(&physical, FsNode::Special(SpecialKind::Fifo));
                }),
            };
            if let Err(msg) = result {
                self.err(format!("mkfifo: {p}: {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }

    pub(super) fn tee(&mut self, args: &[String]) -> Result<u8, Abort> {
        let (_, files) = Self::operands(args);
        let input = self.stdin.take().unwrap_or_default();
        self.out(&input)?;
        let mut code = 0;
        for f in files {
            if let Err(msg) = self.write_file(&f, input.clone()) {
                self.err(format!("tee: {f}: {msg}"))?;
                code = 1;
            }
        }
        Ok(code)
    }
}
