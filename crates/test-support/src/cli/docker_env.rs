//! [`DockerEnv`]: one CLI test's own Docker scope and state directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{checkfu, code, describe, output, stdout};

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
    bin: PathBuf,
    finished: bool,
}

fn docker_cli(args: &[&str]) -> Option<Output> {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()
}

/// The Docker environment of test `name` for the binary at `bin`, or
/// `None` after a `SKIP` line when no daemon answers (a failure under
/// `CI=true`, see [`crate::gate`]). Builds the fixture image through
/// `checkfu sandbox fixture`.
pub fn docker(bin: &Path, name: &str) -> Option<DockerEnv> {
    if !crate::gate::docker_gate(name) {
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
    let o = output(checkfu(bin).args(["sandbox", "fixture"]));
    assert_eq!(code(&o), 0, "fixture: {}", describe(&o));
    let fixture_id = stdout(&o).lines().last().expect("an image ID").to_owned();
    let fixture = format!("checkfu-fixture@{fixture_id}");
    Some(DockerEnv {
        scope,
        state,
        fixture,
        fixture_id,
        bin: bin.to_path_buf(),
        finished: false,
    })
}

impl DockerEnv {
    /// `checkfu` with this test's scope and state directory.
    pub fn checkfu(&self) -> Command {
        let mut c = checkfu(&self.bin);
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
