//! The probe vocabulary (DESIGN D15) interpreted on an instance's tree.
//!
//! Commands are argv (no shell unless the argv is `sh -c SCRIPT`), with
//! POSIX-like exit codes and busybox-like messages on stderr. The
//! interpreter runs synchronously on the instance's tree; time is virtual:
//! `sleep` adds to [`Exec::elapsed_millis`] and the provider moves its clock
//! afterwards.

use std::collections::BTreeMap;

use checkfu_sandbox_contract::{
    bounds::{exec_argument_space, EXEC_ARGUMENT_SPACE_BYTES, OUTPUT_PATH},
    MountAccess, NetworkPolicy, OutputStream, SandboxMount,
};
use sha2::{Digest as _, Sha256};

use crate::fs::{
    basename, is_within, split, text, Fs, FsNode, SpecialKind, WalkError, MAX_STORED_FILE_BYTES,
};

mod builtins;
mod control;
mod expand;
mod files;
mod modes;
mod parse;
mod shell;

pub(crate) use parse::leading_simple_words;
pub(crate) use shell::step_jobs;

/// Why a command ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abort {
    /// A stream passed its limit; the command was ended.
    Overflow(OutputStream),
    /// The command ran past `timeout_seconds`.
    TimedOut,
    /// The command's process group was ended by this signal number
    /// (`kill -SIG 0`); a launch reports exit code `128 + n`, as a shell
    /// and `docker exec` do.
    Signalled(u8),
}

/// The number of a signal named as `kill` takes it (`-TERM`, `-SIGTERM`,
/// `-15`), for the signals a terminal session or job control sends.
fn signal_number(flag: &str) -> Option<u8> {
    let name = flag.strip_prefix('-')?;
    let name = name.strip_prefix("SIG").unwrap_or(name);
    match name {
        "HUP" => Some(1),
        "INT" => Some(2),
        "QUIT" => Some(3),
        "KILL" => Some(9),
        "USR1" => Some(10),
        "USR2" => Some(12),
        "PIPE" => Some(13),
        "ALRM" => Some(14),
        "TERM" => Some(15),
        n => n.parse::<u8>().ok().filter(|n| (1..=64).contains(n)),
    }
}

/// A bounded output stream: keeps at most `limit + 1` bytes, then aborts.
#[derive(Debug)]
pub(crate) struct Sink {
    pub(crate) buf: Vec<u8>,
    limit: u64,
    stream: OutputStream,
}

impl Sink {
    pub(crate) fn new(limit: u64, stream: OutputStream) -> Self {
        Sink {
            buf: Vec::new(),
            limit,
            stream,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Abort> {
        let room = self.limit.saturating_sub(self.buf.len() as u64);
        if (bytes.len() as u64) <= room {
            self.buf.extend_from_slice(bytes);
            Ok(())
        } else {
            // Keep exactly one byte past the limit: the evidence of overflow.
            let take = usize::try_from(room.saturating_add(1)).unwrap_or(usize::MAX);
            self.buf.extend_from_slice(&bytes[..take.min(bytes.len())]);
            Err(Abort::Overflow(self.stream))
        }
    }
}

/// What `nc` may reach from one instance.
#[derive(Debug)]
pub(crate) struct NetView<'a> {
    /// The profile's policy.
    pub(crate) policy: &'a NetworkPolicy,
    /// Listeners inside this instance, by port (loopback only).
    pub(crate) loopback: &'a BTreeMap<u16, Vec<u8>>,
    /// External listeners by (host, port).
    pub(crate) external: &'a BTreeMap<(String, u16), Vec<u8>>,
    /// Fault: mode `none` reaches external listeners.
    pub(crate) none_leaks: bool,
    /// Fault: allowlist destinations are ignored.
    pub(crate) allowlist_ignored: bool,
}

/// One command's execution context on an instance.
pub(crate) struct Exec<'a> {
    pub(crate) fs: &'a mut Fs,
    pub(crate) mounts: &'a [SandboxMount],
    /// True when read-only mounts are sealed (active and not faulted).
    pub(crate) sealed: bool,
    pub(crate) cwd: String,
    pub(crate) env: BTreeMap<String, String>,
    /// Standard input, consumed by the first reader.
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) stdout: Sink,
    pub(crate) stderr: Sink,
    /// Virtual time spent, in milliseconds.
    pub(crate) elapsed_millis: u64,
    /// The command's bound, in milliseconds.
    pub(crate) timeout_millis: u64,
    pub(crate) net: NetView<'a>,
}

/// What a workload read found.
enum Readable {
    Bytes(Vec<u8>),
    Zero,
    Blocks,
}

fn walk_message(e: WalkError) -> &'static str {
    match e {
        WalkError::NotFound => "No such file or directory",
        WalkError::NotDirectory => "Not a directory",
        WalkError::Loop => "Symbolic link loop",
        WalkError::Escape => "Permission denied",
    }
}

/// Why a command cannot be started in `cwd` of `fs`, as a launch reports
/// it: exit code 126 and the reason for stderr. Checked before anything
/// runs, in the order `execve` meets them: the working directory (missing
/// or not a directory), then the argument space over
/// [`EXEC_ARGUMENT_SPACE_BYTES`] (`environment` is the request's own).
pub(crate) fn launch_refusal(
    fs: &Fs,
    cwd: &str,
    argv: &[String],
    environment: &BTreeMap<String, String>,
) -> Option<(u8, String)> {
    match fs.resolve("/", cwd, true) {
        Ok((_, Some(FsNode::Directory))) => {}
        Ok((_, None)) | Err(WalkError::NotFound) => {
            return Some((126, format!("can't cd to {cwd}: No such file or directory")))
        }
        Ok((_, Some(_))) | Err(WalkError::NotDirectory) => {
            return Some((126, format!("can't cd to {cwd}: Not a directory")))
        }
        Err(e) => return Some((126, format!("can't cd to {cwd}: {}", walk_message(e)))),
    }
    let space = exec_argument_space(
        argv.iter().map(String::as_str),
        environment.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if space > EXEC_ARGUMENT_SPACE_BYTES {
        let first = argv.first().map_or("", String::as_str);
        return Some((
            126,
            format!(
                "{first}: Argument list too long (arguments and environment take {space} \
bytes, over the kernel's {EXEC_ARGUMENT_SPACE_BYTES}); not executed"
            ),
        ));
    }
    None
}

/// True when `executable` names a built-in as a launch finds it: a bare
/// name found along `path` (the command's `PATH`, see [`lookup_path`]), or
/// a path resolving (from `cwd`) to an executable stand-in for a binary
/// (see [`Exec::run`]).
pub(crate) fn names_built_in(fs: &Fs, cwd: &str, executable: &str, path: Option<&str>) -> bool {
    if !executable.contains('/') {
        return lookup_path(fs, executable, path)
            .is_some_and(|p| names_built_in(fs, "/", &p, None));
    }
    match fs.resolve(cwd, executable, true) {
        Ok((physical, Some(FsNode::File(bytes)))) => {
            fs.mode(&physical) & 0o111 != 0 && bytes == crate::image::BUSYBOX_STAND_IN
        }
        _ => false,
    }
}

/// Where a bare command `name` is found along `path` (a `PATH` value; the
/// image's [`crate::image::PATH`] when unset), as `docker exec` (runc's
/// lookup) and the Linux provider find it: the first absolute element
/// holding an executable regular file `name` (links followed). Empty and
/// relative elements are not searched: the current directory never is
/// (decision 017). `None`: not found (exit 127).
pub(crate) fn lookup_path(fs: &Fs, name: &str, path: Option<&str>) -> Option<String> {
    let path = path.unwrap_or(crate::image::PATH);
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| format!("{}/{name}", dir.trim_end_matches('/')))
        .find(|candidate| match fs.resolve("/", candidate, true) {
            Ok((physical, Some(FsNode::File(_)))) => fs.mode(&physical) & 0o111 != 0,
            _ => false,
        })
}

impl Exec<'_> {
    fn out(&mut self, bytes: &[u8]) -> Result<(), Abort> {
        self.stdout.write(bytes)
    }

    fn err(&mut self, line: String) -> Result<(), Abort> {
        self.stderr.write(line.as_bytes())?;
        self.stderr.write(b"\n")
    }

    /// Blocks forever: the command runs until its timeout.
    fn block(&mut self) -> Abort {
        self.elapsed_millis = self.elapsed_millis.max(self.timeout_millis);
        Abort::TimedOut
    }

    /// What a read of `path` finds; a file with a hole reads as its
    /// stored bytes then zeros, at most [`MAX_STORED_FILE_BYTES`] in all.
    fn read(&self, path: impl AsRef<[u8]>) -> Result<Readable, &'static str> {
        let (physical, node) = self
            .fs
            .resolve(&self.cwd, path, true)
            .map_err(walk_message)?;
        match node {
            None => Err("No such file or directory"),
            Some(FsNode::File(b)) => {
                let size = self.fs.apparent_size(&physical, b.len());
                let mut bytes = b.clone();
                bytes.resize(size.min(MAX_STORED_FILE_BYTES) as usize, 0);
                Ok(Readable::Bytes(bytes))
            }
            Some(FsNode::Directory) | Some(FsNode::Special(SpecialKind::Submodule)) => {
                Err("Is a directory")
            }
            Some(FsNode::Special(SpecialKind::NullDevice)) => Ok(Readable::Bytes(vec![])),
            Some(FsNode::Special(SpecialKind::ZeroDevice)) => Ok(Readable::Zero),
            Some(FsNode::Special(SpecialKind::Fifo)) => Ok(Readable::Blocks),
            Some(FsNode::Special(SpecialKind::Socket)) => Err("No such device or address"),
            Some(FsNode::Special(SpecialKind::Device)) => Ok(Readable::Bytes(vec![])),
            Some(FsNode::Special(SpecialKind::Other)) | Some(FsNode::Symlink(_)) => {
                Err("Permission denied")
            }
        }
    }

    /// The deepest mount owning a physical path (the output tree counts as a
    /// read-write mount).
    fn owning_access(&self, physical: &[u8]) -> Option<MountAccess> {
        let mut best: Option<(usize, MountAccess)> = None;
        let output = SandboxMount {
            path: OUTPUT_PATH.to_string(),
            access: MountAccess::ReadWrite,
        };
        for m in self.mounts.iter().chain(std::iter::once(&output)) {
            if is_within(physical, &m.path) {
                let depth = split(&m.path).len();
                if best.is_none_or(|(d, _)| depth > d) {
                    best = Some((depth, m.access));
                }
            }
        }
        best.map(|(_, a)| a)
    }

    fn writable(&self, physical: &[u8]) -> Result<(), &'static str> {
        if self.sealed && self.owning_access(physical) == Some(MountAccess::ReadOnly) {
            Err("Read-only file system")
        } else {
            Ok(())
        }
    }

    /// True when removing `physical` would remove a mount point, the output
    /// tree or the control root.
    fn busy(&self, physical: &[u8]) -> bool {
        let pinned = self
            .mounts
            .iter()
            .map(|m| m.path.as_str())
            .chain([OUTPUT_PATH, checkfu_sandbox_contract::bounds::CONTROL_ROOT]);
        physical == b"/" || pinned.into_iter().any(|p| is_within(p, physical))
    }

    /// Writes a regular file at `path`, following a final link.
    pub(crate) fn write_file(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), &'static str> {
        let (physical, node) = self
            .fs
            .resolve(&self.cwd, path, true)
            .map_err(walk_message)?;
        match node {
            Some(FsNode::Directory) | Some(FsNode::Special(SpecialKind::Submodule)) => {
                return Err("Is a directory")
            }
            Some(FsNode::Special(SpecialKind::NullDevice)) => return Ok(()),
            Some(FsNode::Special(_)) => return Err("Permission denied"),
            _ => {}
        }
        self.writable(&physical)?;
        self.fs.insert(&physical, FsNode::File(bytes));
        Ok(())
    }

    /// Why a command cannot be started, as a launch reports it: see
    /// [`launch_refusal`] (`environment` is the request's own).
    pub(crate) fn launch_refusal(
        &self,
        argv: &[String],
        environment: &BTreeMap<String, String>,
    ) -> Option<(u8, String)> {
        launch_refusal(self.fs, &self.cwd, argv, environment)
    }

    /// Runs one argv as a launch: [`Exec::launch_refusal`] first (its
    /// reason on stderr), then a bare command name looked up along the
    /// command's `PATH` ([`lookup_path`]; not found is 127), then
    /// [`Exec::run`].
    pub(crate) fn launch(
        &mut self,
        argv: &[String],
        environment: &BTreeMap<String, String>,
    ) -> Result<u8, Abort> {
        if let Some((code, reason)) = self.launch_refusal(argv, environment) {
            self.err(reason)?;
            return Ok(code);
        }
        match argv.first() {
            Some(first) if !first.contains('/') => {
                let path = self.env.get("PATH").map(String::as_str);
                match lookup_path(self.fs, first, path) {
                    Some(found) => {
                        let mut resolved = argv.to_vec();
                        resolved[0] = found;
                        self.run(&resolved)
                    }
                    None => {
                        self.err(format!("exec {first}: not found in PATH"))?;
                        Ok(127)
                    }
                }
            }
            _ => self.run(argv),
        }
    }

    /// An executable named by a path (it contains `/`), as `execve`
    /// meets it: a path that is not in the tree is 127 (`not found`); a
    /// path through a non-directory or a link loop, a directory, a special
    /// file or a file without an execute bit cannot be executed (126, the
    /// reason on stderr); an executable `#!` script naming `sh` runs its
    /// body; an executable `#!` script naming another interpreter is 127
    /// (the interpreter is not found, named on stderr); any other
    /// executable file is execve's `ENOEXEC` (126, `exec format error`).
    /// `None` for the stand-in for a binary (`/bin/busybox` and its applet
    /// links): the built-in the path's last component names then runs.
    fn run_path(&mut self, first: &str) -> Option<Result<u8, Abort>> {
        let (physical, node) = match self.fs.resolve(&self.cwd, first, true) {
            Ok((physical, Some(node))) => (physical, node.clone()),
            Ok((_, None)) | Err(WalkError::NotFound) => {
                return Some(self.err(format!("sh: {first}: not found")).map(|()| 127))
            }
            Err(e) => {
                let why = walk_message(e);
                return Some(self.err(format!("sh: {first}: {why}")).map(|()| 126));
            }
        };
        let denied = |this: &mut Self| {
            Some(
                this.err(format!("sh: {first}: Permission denied"))
                    .map(|()| 126),
            )
        };
        match node {
            FsNode::File(bytes) => {
                if self.fs.mode(&physical) & 0o111 == 0 {
                    return denied(self);
                }
                if bytes == crate::image::BUSYBOX_STAND_IN {
                    return None;
                }
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let (line, body) = text.split_once('\n').unwrap_or((text.as_str(), ""));
                let Some(interpreter) = line.strip_prefix("#!") else {
                    // execve's ENOEXEC: no `#!` and not a binary; never the
                    // shell's fallback of running it as a script.
                    return Some(
                        self.err(format!("exec {first}: exec format error"))
                            .map(|()| 126),
                    );
                };
                let interpreter = interpreter.split_whitespace().next().unwrap_or("");
                if basename(interpreter) != b"sh" {
                    return Some(
                        self.err(format!(
                            "exec {first}: interpreter {interpreter}: not found"
                        ))
                        .map(|()| 127),
                    );
                }
                let script: String = body
                    .lines()
                    .filter(|l| !l.trim_start().starts_with('#'))
                    .collect::<Vec<_>>()
                    .join("\n");
                Some(self.sh(&["-c".to_string(), script]))
            }
            FsNode::Directory | FsNode::Special(_) => denied(self),
            FsNode::Symlink(_) => None,
        }
    }

    /// Runs one argv and returns its exit status.
    pub(crate) fn run(&mut self, argv: &[String]) -> Result<u8, Abort> {
        let Some(first) = argv.first() else {
            return Ok(0);
        };
        if first.contains('/') {
            if let Some(result) = self.run_path(first) {
                return result;
            }
        }
        let name = if first.contains('/') {
            text(&basename(first))
        } else {
            first.clone()
        };
        let args = &argv[1..];
        if name == "busybox" {
            return self.run(args);
        }
        match name.as_str() {
            "true" => Ok(0),
            "false" => Ok(1),
            "cat" => self.cat(args),
            "cp" => self.cp(args),
            "touch" => self.touch(args),
            "ls" => self.ls(args),
            "head" => self.head(args),
            "sha256sum" => self.sha256sum(args),
            "env" => self.env(args),
            "sleep" => self.sleep(args),
            "sh" => self.sh(args),
            "nc" => self.nc(args),
            "ln" => self.ln(args),
            "mkdir" => self.mkdir(args),
            "rm" => self.rm(args),
            "mkfifo" => self.mkfifo(args),
            "echo" => self.echo(args),
            "tee" => self.tee(args),
            "kill" => self.kill(args),
            "printf" => self.printf(args),
            "dd" => self.dd(args),
            "chmod" => self.chmod(args),
            "stat" => self.stat(args),
            "setsid" => self.setsid(args),
            "hostname" => {
                let name = format!("{}\n", crate::image::INSTANCE_HOSTNAME);
                self.out(name.as_bytes())?;
                Ok(0)
            }
            "pwd" => {
                let cwd = format!("{}\n", self.cwd);
                self.out(cwd.as_bytes())?;
                Ok(0)
            }
            _ => {
                self.err(format!("sh: {first}: not found"))?;
                Ok(127)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_keeps_one_byte_past_the_limit() {
        let mut s = Sink::new(4, OutputStream::Stdout);
        assert!(s.write(b"abcd").is_ok());
        assert_eq!(s.write(b"efg"), Err(Abort::Overflow(OutputStream::Stdout)));
        assert_eq!(s.buf, b"abcde");
    }
}
