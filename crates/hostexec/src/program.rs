//! The command's own `execve`, made by the command child
//! [`crate::enter`] starts, in place of the standard library's `execvp`.
//!
//! `execvp` runs a file the kernel refuses with `ENOEXEC` through
//! `/bin/sh` (a shell's fallback), and searches empty `PATH` elements as
//! the current directory. A launch here is what `execve` says, as
//! `docker exec` (runc) reports it (decision 017):
//!
//! * a bare name is looked up along the command's `PATH`: the first
//!   absolute element holding an executable regular file; empty and
//!   relative elements are never searched; none found is `ENOENT` (127);
//! * `ENOEXEC` (no `#!`, not a binary the kernel runs) stays `ENOEXEC`
//!   (126, `exec format error`);
//! * `ENOENT` for a file that exists means its interpreter is missing:
//!   the child writes `exec PATH: interpreter INTERP: not found` to its
//!   stderr and exits 127.
//!
//! Everything the child touches is built before the fork: no allocation
//! after it.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::raw::c_char;

/// Most bytes of a script's first line read to name its interpreter.
const FIRST_LINE_MAX: usize = 256;

/// One command's `execve`, prepared before the fork.
#[derive(Debug)]
pub(crate) struct ProgramPlan {
    /// The executable as given (argv\[0\]).
    name: CString,
    /// Where to look for it: the executable itself when it holds a `/`,
    /// else `DIR/NAME` for each absolute `PATH` element, in order.
    candidates: Vec<CString>,
    /// `name` and the arguments (kept for the pointers below).
    _argv: Vec<CString>,
    /// `KEY=VALUE` of the command's environment (kept for the pointers).
    _envp: Vec<CString>,
    /// NUL-terminated pointers into `_argv` and `_envp`.
    argv_ptrs: Vec<*const c_char>,
    envp_ptrs: Vec<*const c_char>,
}

// SAFETY: the raw pointers point into the `CString` heap buffers this
// struct owns, which never move or change while it lives; nothing writes
// through them.
#[allow(unsafe_code)]
unsafe impl Send for ProgramPlan {}
// SAFETY: as for `Send`; the plan is only read.
#[allow(unsafe_code)]
unsafe impl Sync for ProgramPlan {}

impl ProgramPlan {
    /// The plan for `executable` with `arguments` and the command's whole
    /// `environment`. `None` when a string holds a NUL byte (the caller
    /// refuses such a request before).
    pub(crate) fn new(
        executable: &str,
        arguments: &[String],
        environment: &BTreeMap<String, String>,
    ) -> Option<ProgramPlan> {
        let name = CString::new(executable).ok()?;
        let candidates = if executable.contains('/') {
            vec![name.clone()]
        } else {
            environment
                .get("PATH")
                .map_or("", String::as_str)
                .split(':')
                .filter(|dir| dir.starts_with('/'))
                .map(|dir| CString::new(format!("{}/{executable}", dir.trim_end_matches('/'))))
                .collect::<Result<_, _>>()
                .ok()?
        };
        let argv = std::iter::once(executable)
            .chain(arguments.iter().map(String::as_str))
            .map(CString::new)
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let envp = environment
            .iter()
            .map(|(k, v)| CString::new(format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let pointers = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Some(ProgramPlan {
            name,
            candidates,
            argv_ptrs: pointers(&argv),
            envp_ptrs: pointers(&envp),
            _argv: argv,
            _envp: envp,
        })
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn write_all(mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid slice for its length.
        #[allow(unsafe_code)]
        let n = unsafe { libc::write(2, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
        buf = &buf[n.unsigned_abs()..];
    }
}

/// Whether `path` is an executable regular file (any execute bit), as
/// runc's lookup decides.
fn executable_file(path: &CString) -> bool {
    // SAFETY: `st` is written by `stat` before it is read; `path` is
    // NUL-terminated.
    #[allow(unsafe_code)]
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(path.as_ptr(), &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_mode & 0o111 != 0
    }
}

/// The interpreter a script at `path` names on its `#!` line, into `buf`;
/// `None` when it cannot be read or has no `#!`.
fn interpreter<'b>(path: &CString, buf: &'b mut [u8; FIRST_LINE_MAX]) -> Option<&'b [u8]> {
    // SAFETY: plain system calls on a NUL-terminated path and a buffer of
    // its length.
    #[allow(unsafe_code)]
    let n = unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        usize::try_from(n).ok()?
    };
    let line = buf[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Replaces the child with the command: returns only on failure, with the
/// `execve` error (`ENOENT` for a bare name not found) or `before`'s
/// code, or ends the child with 127 when the file exists but its
/// interpreter does not. `before` runs once the program is found, just
/// before its `execve`.
pub(crate) fn exec_program(
    plan: &ProgramPlan,
    before: impl FnOnce() -> Result<(), i32>,
) -> io::Result<()> {
    let bare = !plan.name.as_bytes().contains(&b'/');
    let Some(path) = plan.candidates.iter().find(|c| !bare || executable_file(c)) else {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    };
    before().map_err(io::Error::from_raw_os_error)?;
    // SAFETY: NUL-terminated arrays of NUL-terminated strings the plan owns.
    #[allow(unsafe_code)]
    unsafe {
        libc::execve(
            path.as_ptr(),
            plan.argv_ptrs.as_ptr(),
            plan.envp_ptrs.as_ptr(),
        );
    }
    let e = errno();
    // SAFETY: `access` on a NUL-terminated path.
    #[allow(unsafe_code)]
    let exists = unsafe { libc::access(path.as_ptr(), libc::F_OK) } == 0;
    if e == libc::ENOENT && exists {
        let mut buf = [0u8; FIRST_LINE_MAX];
        write_all(b"exec ");
        write_all(path.as_bytes());
        match interpreter(path, &mut buf) {
            Some(interp) => {
                write_all(b": interpreter ");
                write_all(interp);
                write_all(b": not found\n");
            }
            None => write_all(b": its interpreter was not found\n"),
        }
        // SAFETY: ends the child without running the parent's handlers.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(127)
        };
    }
    Err(io::Error::from_raw_os_error(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_path_elements_are_candidates() {
        let env = BTreeMap::from([("PATH".to_owned(), ":rel:/a/:/b".to_owned())]);
        let plan = ProgramPlan::new("x", &[], &env).unwrap();
        let got: Vec<_> = plan
            .candidates
            .iter()
            .map(|c| c.to_str().unwrap())
            .collect();
        assert_eq!(got, ["/a/x", "/b/x"]);
        let empty = BTreeMap::from([("PATH".to_owned(), String::new())]);
        assert!(ProgramPlan::new("x", &[], &empty)
            .unwrap()
            .candidates
            .is_empty());
        let by_path = ProgramPlan::new("./x", &["a".into()], &env).unwrap();
        assert_eq!(by_path.candidates, [CString::new("./x").unwrap()]);
        assert_eq!(by_path.argv_ptrs.len(), 3);
        assert!(by_path.argv_ptrs[2].is_null());
    }

    #[test]
    fn the_interpreter_is_read_from_the_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, b"#! /no/interp -x\nbody\n").unwrap();
        let c = CString::new(p.to_str().unwrap()).unwrap();
        let mut buf = [0u8; FIRST_LINE_MAX];
        assert_eq!(interpreter(&c, &mut buf), Some(&b"/no/interp"[..]));
        std::fs::write(&p, b"echo hi\n").unwrap();
        assert_eq!(interpreter(&c, &mut buf), None);
    }
}
