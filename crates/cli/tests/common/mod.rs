//! Shared support for the CLI's end-to-end tests: the binary, output
//! helpers, and the Docker gate.
//!
//! Docker tests are gated explicitly: when the daemon cannot be reached
//! they print a `SKIP` line and return, except under `CI=true`, where an
//! unreachable daemon fails the test. Each Docker test gets its own scope
//! (`CHECKFU_SCOPE`) and state directory (`CHECKFU_STATE_DIR`), removes
//! what it created and checks that no container or image of its scope is
//! left.

#![allow(dead_code)] // each test binary uses part of this module

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `checkfu` binary under test, with tracing off.
pub fn checkfu() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_checkfu"));
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

/// Every container, image (intermediate ones too) and network labelled
/// `checkfu.sandbox.scope=<scope>`, plus a network named `name`, each as
/// `kind id`.
pub fn scope_objects(scope: &str, network: &str) -> Vec<String> {
    let filter = format!("label=checkfu.sandbox.scope={scope}");
    let mut out = Vec::new();
    for (kind, args) in [
        ("container", vec!["ps", "-aq", "--filter", &filter]),
        ("image", vec!["images", "-aq", "--filter", &filter]),
        ("network", vec!["network", "ls", "-q", "--filter", &filter]),
    ] {
        let o = docker_cli(&args).expect("docker CLI");
        assert!(o.status.success(), "docker {args:?}: {}", describe(&o));
        out.extend(stdout(&o).lines().map(|id| format!("{kind} {id}")));
    }
    let named =
        docker_cli(&["network", "inspect", "--format", "{{.Name}}", network]).expect("docker CLI");
    if named.status.success() {
        out.push(format!("network {network}"));
    }
    out
}

/// A Docker test's own scope and state directory.
pub struct DockerEnv {
    /// `CHECKFU_SCOPE` of every command this test runs.
    pub scope: String,
    /// `CHECKFU_STATE_DIR` of every command this test runs.
    pub state: tempfile::TempDir,
    /// The pinned fixture reference `checkfu-fixture@sha256:<image id>`.
    pub fixture: String,
    /// The fixture's image ID `sha256:<hex>`, as `checkfu sandbox fixture`
    /// prints it.
    pub fixture_id: String,
    finished: bool,
}

fn docker_cli(args: &[&str]) -> Option<Output> {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()
}

fn daemon_reachable() -> Result<(), String> {
    match docker_cli(&["version", "--format", "{{.Server.Version}}"]) {
        None => Err("the docker CLI is not installed".into()),
        Some(o) if o.status.success() => Ok(()),
        Some(o) => Err(format!("docker version failed: {}", stderr(&o).trim())),
    }
}

/// The Docker environment of test `name`, or `None` after a `SKIP` line
/// when no daemon is reachable (a failure under `CI=true`).
pub fn docker(name: &str) -> Option<DockerEnv> {
    if let Err(why) = daemon_reachable() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true but the docker daemon is unreachable: {why}");
        }
        println!("SKIP {name}: docker daemon unreachable: {why}");
        return None;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let scope: String = format!("t-{name}-{}-{nanos}", std::process::id())
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let state = tempfile::tempdir().expect("state dir");
    let o = output(checkfu().args(["sandbox", "fixture"]));
    assert_eq!(code(&o), 0, "fixture: {}", describe(&o));
    let fixture_id = stdout(&o).lines().last().expect("an image ID").to_owned();
    let fixture = format!("checkfu-fixture@{fixture_id}");
    Some(DockerEnv {
        scope,
        state,
        fixture,
        fixture_id,
        finished: false,
    })
}

impl DockerEnv {
    /// `checkfu` with this test's scope and state directory.
    pub fn checkfu(&self) -> Command {
        let mut c = checkfu();
        c.env("CHECKFU_SCOPE", &self.scope)
            .env("CHECKFU_STATE_DIR", self.state.path());
        c
    }

    /// `checkfu sandbox run --provider docker --image <fixture>` plus `args`.
    pub fn run(&self, args: &[&str]) -> Command {
        let mut c = self.checkfu();
        c.args([
            "sandbox",
            "run",
            "--provider",
            "docker",
            "--image",
            &self.fixture,
        ])
        .args(args);
        c
    }

    /// Ids of containers labelled with this scope.
    pub fn containers(&self) -> Vec<String> {
        self.labelled(&["ps", "-aq"])
    }

    /// Ids of images labelled with this scope.
    pub fn images(&self) -> Vec<String> {
        self.labelled(&["images", "-q"])
    }

    fn labelled(&self, cmd: &[&str]) -> Vec<String> {
        let filter = format!("label=checkfu.sandbox.scope={}", self.scope);
        let mut args = cmd.to_vec();
        args.extend(["--filter", &filter]);
        let o = docker_cli(&args).expect("docker CLI");
        assert!(o.status.success(), "docker {args:?}: {}", describe(&o));
        stdout(&o).lines().map(str::to_owned).collect()
    }

    /// Sweeps everything of this scope through `checkfu sandbox cleanup`,
    /// then asserts that no container, image or dry-run entry is left.
    pub fn finish(mut self) {
        self.finished = true;
        let o = output(self.checkfu().args([
            "sandbox",
            "cleanup",
            "--provider",
            "docker",
            "--older-than",
            "0s",
        ]));
        assert_eq!(code(&o), 0, "cleanup: {}", describe(&o));
        let o = output(self.checkfu().args([
            "sandbox",
            "cleanup",
            "--provider",
            "docker",
            "--older-than",
            "0s",
            "--dry-run",
        ]));
        assert_eq!(code(&o), 0, "dry-run: {}", describe(&o));
        assert_eq!(stdout(&o), "", "left behind: {}", describe(&o));
        assert_eq!(self.containers(), Vec::<String>::new(), "containers left");
        assert_eq!(self.images(), Vec::<String>::new(), "images left");
    }
}

impl Drop for DockerEnv {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // A failed test still removes what it created, best effort.
        let _ = self
            .checkfu()
            .args([
                "sandbox",
                "cleanup",
                "--provider",
                "docker",
                "--older-than",
                "0s",
            ])
            .output();
    }
}
