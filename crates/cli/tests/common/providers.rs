//! Every provider whose gate is open, for tests that run one input on
//! each with the same assertions: the memory oracle always, Docker when a
//! daemon answers, linux when the host gives root and cgroups. A provider
//! whose gate is closed prints a `SKIP` line (a failure under `CI=true`).

use std::path::Path;
use std::process::Command;

use super::*;

/// One provider the inputs run on.
pub enum Provider {
    Memory,
    Docker(DockerEnv),
    Linux {
        state: tempfile::TempDir,
        scope: String,
        image: String,
    },
}

impl Provider {
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Memory => "memory",
            Provider::Docker(_) => "docker",
            Provider::Linux { .. } => "linux",
        }
    }

    /// `checkfu` with this provider's state directory and scope.
    pub fn checkfu(&self) -> Command {
        match self {
            Provider::Memory => checkfu(),
            Provider::Docker(env) => env.checkfu(),
            Provider::Linux { state, scope, .. } => {
                let mut c = checkfu();
                c.env("CHECKFU_STATE_DIR", state.path())
                    .env("CHECKFU_SCOPE", scope);
                c
            }
        }
    }

    /// `checkfu sandbox run` on this provider and its image, plus `args`.
    pub fn run(&self, args: &[&str]) -> Command {
        let image = match self {
            Provider::Memory => "demo:1",
            Provider::Docker(env) => env.fixture.as_str(),
            Provider::Linux { image, .. } => image.as_str(),
        };
        let mut c = self.checkfu();
        c.args([
            "sandbox",
            "run",
            "--provider",
            self.name(),
            "--image",
            image,
        ])
        .args(args);
        c
    }

    /// Sweeps what the test left and checks that nothing is.
    pub fn finish(self) {
        match self {
            Provider::Memory => {}
            Provider::Docker(env) => env.finish(),
            Provider::Linux { .. } => {
                let sweep = |dry: bool| {
                    let mut c = self.checkfu();
                    c.args([
                        "sandbox",
                        "cleanup",
                        "--provider",
                        "linux",
                        "--older-than",
                        "0s",
                    ]);
                    if dry {
                        c.arg("--dry-run");
                    }
                    output(c)
                };
                let o = sweep(false);
                assert_eq!(code(&o), 0, "cleanup: {}", describe(&o));
                let o = sweep(true);
                assert_eq!(code(&o), 0, "dry-run: {}", describe(&o));
                assert_eq!(stdout(&o), "", "left behind: {}", describe(&o));
            }
        }
    }
}

/// Whether the linux provider can run here (root and cgroups); otherwise
/// a `SKIP` line, or a failure under `CI=true`.
pub fn linux_or_skip(name: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    let cgroups = Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        || Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    if root && cgroups {
        return true;
    }
    checkfu_test_support::gate::skip_or_fail(
        name,
        &format!("the linux provider needs root and cgroups (root {root}, cgroups {cgroups})"),
    )
}

/// Every provider whose gate is open, the oracle first.
pub fn providers(name: &str) -> Vec<Provider> {
    let mut all = vec![Provider::Memory];
    if let Some(env) = docker(name) {
        all.push(Provider::Docker(env));
    }
    if linux_or_skip(&format!("{name}_linux")) {
        let state = tempfile::tempdir().expect("state dir");
        let scope = format!("t-{name}-{}", std::process::id()).replace('_', "-");
        let mut p = Provider::Linux {
            state,
            scope,
            image: String::new(),
        };
        let o = output(
            p.checkfu()
                .args(["sandbox", "fixture", "--provider", "linux"]),
        );
        assert_eq!(code(&o), 0, "linux fixture: {}", describe(&o));
        let fixture = stdout(&o).lines().last().expect("an image").to_owned();
        if let Provider::Linux { image, .. } = &mut p {
            *image = fixture;
        }
        all.push(p);
    }
    // Proof of what ran, beside the gates' SKIP lines.
    let names: Vec<&str> = all.iter().map(Provider::name).collect();
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{name}: runs on {}", names.join(", "));
    all
}
