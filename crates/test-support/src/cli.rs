//! Builders and readers for end-to-end runs of the `checkfu` binary, and
//! `DockerEnv` (feature `docker`): a Docker scope (`CHECKFU_SCOPE`) and state directory
//! (`CHECKFU_STATE_DIR`) of one test's own, swept through `checkfu sandbox
//! cleanup` and checked empty at the end.
//!
//! The binary's path comes from the test crate (`env!("CARGO_BIN_EXE_checkfu")`
//! is only defined there); each builder takes it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `checkfu` binary at `bin`, with tracing off, no scope or state
/// directory from the caller's environment, and stdin closed.
pub fn checkfu(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("RUST_LOG")
        .env_remove("CHECKFU_SCOPE")
        .env_remove("CHECKFU_STATE_DIR")
        .stdin(Stdio::null());
    c
}

/// Runs `c` (a `Command` or `&mut Command`) to completion.
pub fn output<C: std::borrow::BorrowMut<Command>>(mut c: C) -> Output {
    c.borrow_mut().output().expect("checkfu runs")
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The exit status, or a panic with both streams for a signal death.
pub fn code(o: &Output) -> i32 {
    o.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {}", describe(o)))
}

/// Both streams, for assertion messages.
pub fn describe(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(4096)]),
        stderr(o)
    )
}

/// The lines of stderr that start with `checkfu: ` and are not progress or
/// image lines: the failure report.
pub fn failure_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("checkfu: ") && !l.starts_with("checkfu: image "))
        .map(str::to_owned)
        .collect()
}

/// Asserts `o` failed with `want` and exactly one failure line containing
/// every needle.
pub fn assert_one_line_failure(o: &Output, want: i32, needles: &[&str]) {
    assert_eq!(code(o), want, "{}", describe(o));
    let lines = failure_lines(o);
    assert_eq!(lines.len(), 1, "expected one failure line: {}", describe(o));
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {:?}", lines[0]);
    }
}

/// A child whose stderr is read line by line on a thread.
pub struct Watched {
    /// The child.
    pub child: Child,
    lines: mpsc::Receiver<String>,
    /// Every stderr line seen so far.
    pub seen: Vec<String>,
}

impl Watched {
    /// Spawns `c` with stderr piped and stdout discarded.
    pub fn spawn(c: &mut Command) -> Watched {
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("checkfu spawns");
        let err = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Watched {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until a stderr line contains `needle`.
    pub fn wait_for_line(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        panic!(
            "no stderr line with {needle:?} within {within:?}: {:#?}",
            self.seen
        );
    }

    /// Sends SIGINT.
    pub fn interrupt(&self) {
        self.signal(rustix::process::Signal::INT);
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("signal delivered");
    }

    /// Waits for the exit (at most `within`) and collects the rest of stderr.
    pub fn finish(mut self, within: Duration) -> (i32, Vec<String>) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
                    self.seen.push(line);
                }
                let code = status
                    .code()
                    .unwrap_or_else(|| panic!("killed: {status:?}"));
                return (code, self.seen);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("checkfu did not exit within {within:?}: {:#?}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Writes `bytes` at `dir/name`, creating parents.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    std::fs::write(&p, bytes).expect("write");
    p
}

/// `n` bytes of a fixed pseudo-random pattern.
pub fn pattern(n: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// A Git repository with one commit holding `files`; returns its HEAD id.
pub fn git_repo(dir: &Path, files: &[(&str, &[u8])]) -> String {
    for (name, bytes) in files {
        write(dir, name, bytes);
    }
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .expect("git runs");
        assert!(o.status.success(), "git {args:?}: {}", describe(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "fixture"]);
    git(&["rev-parse", "HEAD"])
}

#[cfg(feature = "docker")]
mod docker_env;
#[cfg(feature = "docker")]
pub use docker_env::{docker, scope_objects, DockerEnv};
