//! Launch parity: one table of edge cases of execute (working directory,
//! command lookup, permission bits staged from a host folder and from Git,
//! empty and 0700 directories staged from a host folder, the kernel's
//! argument space, environment and the keys and `PATH` every command
//! starts from, `HOSTNAME` against `hostname`, the image's top level,
//! signal exits) run through the runtime on every provider, each row
//! asserting the same outcome on each (decision 017); a table of
//! writeFile edge cases (a root itself, a late write into a mount, a
//! directory where a file is and the reverse, a directory with content or
//! bits over 0o777) sent to each provider directly, past the runtime's own
//! refusal, asserting the same error on each; and the bits listDir reports
//! for outputs the workload chmodded; and an activation rolled back
//! through its handoff, after which the instance activates again. A
//! provider joins by one line in
//! [`PROVIDERS`].
//!
//! Gate: without a Docker daemon the Docker row prints a `SKIP` line,
//! except under `CI=true`, where it fails; so does the Linux row without
//! root. The Docker and Linux instances live in scopes of their own that
//! are swept and checked empty at the end.

// A test crate: its items are not a public API.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_docker::{fixture, host_platform, DockerConfig, DockerProvider};
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::staging::{stage_folder, stage_git};
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};

/// A provider under test: its name and how to get an adapter, a root
/// image and a teardown (or why it is skipped).
type Setup = fn() -> futures::future::BoxFuture<'static, Option<Target>>;

/// Every provider the table runs on; a new provider adds one line.
const PROVIDERS: &[(&str, Setup)] = &[
    ("memory", memory_target),
    ("docker", docker_target),
    ("linux", linux_target),
];

struct Target {
    adapter: Adapter,
    /// The provider itself, for rows the runtime would refuse before the
    /// call (a provider reached over the wire or by a suite without the
    /// runtime must still answer the same).
    provider: Arc<dyn SandboxProvider>,
    root_image: ImageReference,
    platform: Platform,
    resources: Resources,
    expires_at: Timestamp,
    teardown: Option<Box<dyn FnOnce() -> Result<(), String> + Send + Sync>>,
}

fn memory_target() -> futures::future::BoxFuture<'static, Option<Target>> {
    Box::pin(async {
        let clock = ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap());
        let mut runtime = SandboxRuntime::new(Arc::new(clock.clone()));
        let provider: Arc<dyn SandboxProvider> = Arc::new(MemoryProvider::new(clock.clone()));
        runtime.register(provider.clone());
        Some(Target {
            adapter: runtime.adapter("memory").expect("adapter"),
            provider,
            root_image: ImageReference::parse(&format!("checkfu-memory@sha256:{}", "0".repeat(64)))
                .unwrap(),
            platform: Platform {
                os: Os::Linux,
                architecture: Architecture::Amd64,
            },
            resources: Resources::default(),
            expires_at: clock.now().add_seconds(3600),
            teardown: None,
        })
    })
}

fn docker_target() -> futures::future::BoxFuture<'static, Option<Target>> {
    Box::pin(async {
        let docker = checkfu_test_support::gate::docker_or_skip("docker row").await?;
        let pinned = checkfu_test_support::docker::fixture_ref(&docker).await;
        let (scope, state_dir) = checkfu_test_support::docker::scope_for("parity");
        let provider = DockerProvider::with_docker(
            docker,
            DockerConfig {
                state_dir: state_dir.clone(),
                scope: scope.clone(),
                clock: Arc::new(SystemClock),
                pool_size: 0,
                exec_path: None,
            },
        )
        .expect("provider");
        let mut runtime = SandboxRuntime::new(Arc::new(SystemClock));
        let raw: Arc<dyn SandboxProvider> = Arc::new(provider.clone());
        runtime.register(raw.clone());
        let teardown = move || sweep(provider, scope, state_dir);
        Some(Target {
            adapter: runtime.adapter("docker").expect("adapter"),
            provider: raw,
            root_image: ImageReference::parse(&pinned).unwrap(),
            platform: host_platform(),
            resources: Resources {
                cpu_millis: Some(1000),
                memory_bytes: Some(256 << 20),
                pids: Some(256),
                disk_bytes: None,
            },
            expires_at: Timestamp::now().add_seconds(900),
            teardown: Some(Box::new(teardown)),
        })
    })
}

fn linux_target() -> futures::future::BoxFuture<'static, Option<Target>> {
    Box::pin(async {
        if let Err(why) = checkfu_sandbox_linux::availability() {
            checkfu_test_support::gate::skip_or_fail(
                "linux row",
                &format!("the linux provider is unavailable (needs root): {why}"),
            );
            return None;
        }
        let busybox = checkfu_test_support::docker::busybox_path();
        let path = checkfu_sandbox_docker::locate_busybox(&busybox, &mut |line| {
            eprintln!("fixture: {line}")
        })
        .await
        .expect("busybox (install Debian's busybox-static)");
        let bb = fixture::load_busybox(&path).await.expect("busybox");
        let state = tempfile::tempdir().expect("state dir");
        let scope = format!("t-parity-{}", std::process::id());
        let provider =
            checkfu_sandbox_linux::LinuxProvider::new(checkfu_sandbox_linux::LinuxConfig {
                state_dir: state.path().to_path_buf(),
                scope: scope.clone(),
                clock: Arc::new(SystemClock),
                workload_user: checkfu_sandbox_linux::WorkloadUser::Checkfu,
            })
            .expect("linux provider");
        let pinned = provider.images().write_fixture(&bb).expect("fixture");
        let mut runtime = SandboxRuntime::new(Arc::new(SystemClock));
        let raw: Arc<dyn SandboxProvider> = Arc::new(provider.clone());
        runtime.register(raw.clone());
        let teardown = move || {
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(async move {
                        let problems = provider.destroy_all().await;
                        let left = provider.inventory().await.map_err(|e| e.to_string())?;
                        drop(state);
                        if !problems.is_empty() || !left.instances.is_empty() {
                            return Err(format!("scope {scope}: {problems:?} {left:?}"));
                        }
                        Ok(())
                    })
            })
            .join()
            .expect("sweep thread")
        };
        Some(Target {
            adapter: runtime.adapter("linux").expect("adapter"),
            provider: raw,
            root_image: ImageReference::parse(&pinned).unwrap(),
            platform: checkfu_sandbox_linux::host_platform(),
            resources: Resources {
                cpu_millis: Some(1000),
                memory_bytes: Some(256 << 20),
                pids: Some(256),
                disk_bytes: None,
            },
            expires_at: Timestamp::now().add_seconds(900),
            teardown: Some(Box::new(teardown)),
        })
    })
}

/// Destroys everything of `scope` and checks that nothing is left.
fn sweep(provider: DockerProvider, scope: String, state_dir: PathBuf) -> Result<(), String> {
    checkfu_test_support::docker::block_on_thread(checkfu_test_support::docker::sweep_scope(
        provider, scope, state_dir,
    ))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// The host folder staged at `/src`: an executable script (0755), a data
/// file (0644), a private executable two directories down (0700), an
/// empty directory, and a 0700 directory holding a 0600 file.
fn host_folder(dir: &Path) {
    let write = |rel: &str, bytes: &[u8], mode: u32| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("run.sh", b"#!/bin/sh\necho ran\n", 0o755);
    write("data.txt", b"data\n", 0o644);
    // Executable files execve refuses: a missing interpreter (ENOENT), a
    // broken ELF and a script without `#!` (both ENOEXEC).
    write("bi", b"#!/no/interp\n", 0o755);
    write("elf", b"\x7fELF\x02\x01\x01garbage, not a program\n", 0o755);
    write("ns", b"echo hi\n", 0o755);
    write("deep/er/tool.sh", b"#!/bin/sh\necho deep\n", 0o700);
    std::fs::create_dir(dir.join("empty")).unwrap();
    write("private/key", b"secret\n", 0o600);
    std::fs::set_permissions(dir.join("private"), std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// A repository whose `bin/git.sh` is `100755` and `plain.sh` `100644`.
fn git_repo(dir: &Path) -> String {
    git(dir, &["init", "-q"]);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/git.sh"), b"#!/bin/sh\necho from-git\n").unwrap();
    std::fs::write(dir.join("plain.sh"), b"#!/bin/sh\necho plain\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["update-index", "--chmod=+x", "bin/git.sh"]);
    git(dir, &["update-index", "--chmod=-x", "plain.sh"]);
    git(dir, &["commit", "-q", "-m", "fixture"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// One row: argv, working directory, environment, and the outcome every
/// provider must give.
struct Row {
    name: &'static str,
    argv: Vec<String>,
    workdir: &'static str,
    env: &'static [(&'static str, &'static str)],
    exit: u8,
    /// Text stdout must equal, when set.
    stdout: Option<&'static str>,
    /// Lines stdout must contain.
    stdout_lines: &'static [&'static str],
    /// Text stderr must contain (case-insensitive), when set.
    stderr_has: Option<&'static str>,
    /// When set, stdout is `env` output and its keys must be exactly these.
    env_keys: Option<&'static [&'static str]>,
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn big_argv(n: usize) -> Vec<String> {
    let mut v = vec!["true".to_string()];
    v.extend(std::iter::repeat_n("a".repeat(64_000), n));
    v
}

fn table() -> Vec<Row> {
    let row = |name, a: Vec<String>, exit| Row {
        name,
        argv: a,
        workdir: "/",
        env: &[],
        exit,
        stdout: None,
        stdout_lines: &[],
        stderr_has: None,
        env_keys: None,
    };
    vec![
        Row {
            stdout: Some("ran\n"),
            ..row(
                "executable script from a host folder",
                argv(&["/src/run.sh"]),
                0,
            )
        },
        Row {
            stdout: Some("deep\n"),
            ..row(
                "0700 script two directories down",
                argv(&["/src/deep/er/tool.sh"]),
                0,
            )
        },
        Row {
            stdout: Some("from-git\n"),
            ..row("Git blob 100755", argv(&["/git/bin/git.sh"]), 0)
        },
        Row {
            stderr_has: Some("permission denied"),
            ..row(
                "Git blob 100644 is not executable",
                argv(&["/git/plain.sh"]),
                126,
            )
        },
        Row {
            stderr_has: Some("permission denied"),
            ..row("non-executable file", argv(&["/src/data.txt"]), 126)
        },
        Row {
            stdout: Some(
                "755 directory /src/empty\n700 directory /src/private\n\
600 regular file /src/private/key\n755 directory /src/deep\n\
700 directory /src/made\n",
            ),
            ..row(
                "staged directories exist with their bits",
                argv(&[
                    "stat",
                    "-c",
                    "%a %F %n",
                    "/src/empty",
                    "/src/private",
                    "/src/private/key",
                    "/src/deep",
                    "/src/made",
                ]),
                0,
            )
        },
        row("directory as the command", argv(&["/src/deep"]), 126),
        Row {
            stderr_has: Some("permission denied"),
            ..row("an image directory as the command", argv(&["/etc"]), 126)
        },
        row(
            "a built-in's name at a path not in the tree",
            argv(&["/tmp/cat"]),
            127,
        ),
        Row {
            stdout: Some("ok\n"),
            ..row(
                "an applet by its path in /bin",
                argv(&["/bin/echo", "ok"]),
                0,
            )
        },
        Row {
            stderr_has: Some("interpreter /no/interp: not found"),
            ..row(
                "a script whose interpreter is missing",
                argv(&["/src/bi"]),
                127,
            )
        },
        Row {
            stderr_has: Some("exec format error"),
            ..row("a broken ELF file", argv(&["/src/elf"]), 126)
        },
        Row {
            stderr_has: Some("exec format error"),
            ..row(
                "a script without #! is not run by a shell",
                argv(&["/src/ns"]),
                126,
            )
        },
        Row {
            workdir: "/src",
            stderr_has: Some("exec format error"),
            ..row(
                "a script without #! by a relative path",
                argv(&["./ns"]),
                126,
            )
        },
        Row {
            env: &[("PATH", "")],
            ..row("an empty PATH finds nothing", argv(&["true"]), 127)
        },
        Row {
            env: &[("PATH", "/nonexistent")],
            ..row("a PATH of a missing directory", argv(&["true"]), 127)
        },
        Row {
            env: &[("PATH", "bin:usr/bin")],
            ..row(
                "relative PATH elements are not searched",
                argv(&["true"]),
                127,
            )
        },
        Row {
            env: &[("PATH", "/nonexistent:/usr/bin")],
            stdout_lines: &["PATH=/nonexistent:/usr/bin"],
            ..row("a PATH found along its elements", argv(&["env"]), 0)
        },
        Row {
            env: &[("PATH", "/src")],
            stdout: Some("ran\n"),
            ..row("a script found along PATH", argv(&["run.sh"]), 0)
        },
        row("missing command", argv(&["no-such-command-xyz"]), 127),
        row("missing command by path", argv(&["/src/no-such"]), 127),
        Row {
            workdir: "/no/such/dir",
            stderr_has: Some("no such file or directory"),
            ..row("missing working directory", argv(&["true"]), 126)
        },
        Row {
            workdir: "/src/data.txt",
            stderr_has: Some("not a directory"),
            ..row("working directory is a file", argv(&["true"]), 126)
        },
        Row {
            workdir: "/etc/passwd",
            stderr_has: Some("not a directory"),
            ..row(
                "working directory is a file of the image",
                argv(&["true"]),
                126,
            )
        },
        Row {
            workdir: "/etc/passwd/below",
            stderr_has: Some("not a directory"),
            ..row(
                "working directory below a file of the image",
                argv(&["true"]),
                126,
            )
        },
        Row {
            stdout: Some("/src/deep\n"),
            workdir: "/src/deep",
            ..row("working directory is used", argv(&["pwd"]), 0)
        },
        Row {
            stderr_has: Some("argument list too long"),
            ..row("argv over the kernel's argument space", big_argv(33), 126)
        },
        row(
            "argv just within the kernel's argument space",
            big_argv(32),
            0,
        ),
        Row {
            env: &[("EMPTY", ""), ("SPACED", "a b=c"), ("_U", "x")],
            stdout_lines: &["EMPTY=", "SPACED=a b=c", "_U=x"],
            ..row(
                "environment: empty value, spaces and '='",
                argv(&["env"]),
                0,
            )
        },
        Row {
            stdout_lines: &["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/checkfu"],
            env_keys: Some(&["HOME", "HOSTNAME", "PATH"]),
            ..row(
                "environment a command starts from: its keys and PATH",
                argv(&["env"]),
                0,
            )
        },
        Row {
            stdout_lines: &["PATH=/usr/local/bin:/usr/bin:/bin"],
            env_keys: Some(&["HOME", "HOSTNAME", "PATH"]),
            ..row("env by its path in /usr/bin", argv(&["/usr/bin/env"]), 0)
        },
        Row {
            stdout_lines: &["HOSTNAME=other", "PATH=/x"],
            env: &[("HOSTNAME", "other"), ("PATH", "/x")],
            env_keys: Some(&["HOME", "HOSTNAME", "PATH"]),
            ..row(
                "the request's environment overrides the base",
                argv(&["/usr/bin/env"]),
                0,
            )
        },
        Row {
            stdout: Some(
                "bin\ndev\netc\ngit\nhome\nmnt\nproc\nroot\nsrc\nsys\ntmp\nusr\nworkspace\n",
            ),
            ..row("the image's top level", argv(&["ls", "/"]), 0)
        },
        Row {
            stdout: Some("checkfu\n"),
            ..row("the image's /home", argv(&["ls", "/home"]), 0)
        },
        Row {
            stdout: Some(
                "root:x:0:0:root:/root:/bin/sh\n\
checkfu:x:1000:1000:checkfu:/home/checkfu:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n\
root:x:0:\ncheckfu:x:1000:\nnogroup:x:65534:\n",
            ),
            ..row(
                "the image's users and groups",
                argv(&["cat", "/etc/passwd", "/etc/group"]),
                0,
            )
        },
        row(
            "signal exit: TERM",
            argv(&["sh", "-c", "kill -TERM 0"]),
            143,
        ),
        row(
            "signal exit: KILL",
            argv(&["sh", "-c", "kill -KILL 0"]),
            137,
        ),
        row("signal exit: HUP", argv(&["sh", "-c", "kill -HUP 0"]), 129),
        row(
            "exit status passes through",
            argv(&["sh", "-c", "exit 3"]),
            3,
        ),
    ]
}

/// A writeFile edge case sent to the provider directly, in the state
/// `active` says, with the error every provider must give (`None`: the
/// write succeeds). Errors compare as their wire JSON without `message`.
struct WriteRow {
    name: &'static str,
    active: bool,
    path: &'static str,
    kind: Option<WriteKind>,
    content: &'static [u8],
    mode: Option<u32>,
    error: Option<serde_json::Value>,
}

fn write_table() -> Vec<WriteRow> {
    let root = |path: &'static str| {
        serde_json::json!({
            "_tag": "SandboxOperationFailed",
            "operation": "write_file",
            "reason": "invalid_request",
            "field": "path",
            "expected": "a normalized file path below its root",
            "actual": path,
        })
    };
    // Write scope narrows at activation (spec "Paths, mounts"): a mount
    // path is provisioning-only, read-only or not (decision 005).
    let late = serde_json::json!({
        "_tag": "SandboxLifecycleConflict",
        "operation": "write_file",
        "expected": "provisioning",
        "actual": "active",
    });
    let invalid = |field: &str, expected: &str, actual: &str| {
        serde_json::json!({
            "_tag": "SandboxOperationFailed",
            "operation": "write_file",
            "reason": "invalid_request",
            "field": field,
            "expected": expected,
            "actual": actual,
        })
    };
    let not_regular = serde_json::json!({
        "_tag": "SandboxOperationFailed",
        "operation": "write_file",
        "reason": "not_regular_file",
    });
    let file = |name, active, path, error| WriteRow {
        name,
        active,
        path,
        kind: None,
        content: b"late",
        mode: None,
        error,
    };
    let dir = |name, active, path, mode, error| WriteRow {
        name,
        active,
        path,
        kind: Some(WriteKind::Directory),
        content: b"",
        mode,
        error,
    };
    vec![
        dir(
            "a directory with its bits",
            false,
            "/src/made",
            Some(0o700),
            None,
        ),
        dir(
            "a directory where a directory is (kept)",
            false,
            "/src/deep",
            None,
            None,
        ),
        dir(
            "a directory where a file is",
            false,
            "/src/data.txt",
            None,
            Some(not_regular.clone()),
        ),
        file(
            "a file where a directory is",
            false,
            "/src/empty",
            Some(not_regular),
        ),
        WriteRow {
            content: b"abc",
            ..dir(
                "a directory with content",
                false,
                "/src/full",
                None,
                Some(invalid(
                    "content_base64",
                    "empty content for kind directory",
                    "3 bytes",
                )),
            )
        },
        dir(
            "a directory with bits over 0o777",
            false,
            "/src/sticky",
            Some(0o1777),
            Some(invalid(
                "mode",
                "permission bits of at most 0o777",
                "0o1777",
            )),
        ),
        dir(
            "a directory in the output tree once active",
            true,
            "/mnt/session/outputs/sub",
            None,
            None,
        ),
        file(
            "writeFile at a mount's root path",
            false,
            "/git",
            Some(root("/git")),
        ),
        file(
            "writeFile at the output tree's root path",
            false,
            "/mnt/session/outputs",
            Some(root("/mnt/session/outputs")),
        ),
        file(
            "writeFile into the output tree once active",
            true,
            "/mnt/session/outputs/late.txt",
            None,
        ),
        file(
            "late writeFile into a read-only mount",
            true,
            "/git/late.txt",
            Some(late.clone()),
        ),
        file(
            "late writeFile into a read-write mount",
            true,
            "/src/late.txt",
            Some(late),
        ),
    ]
}

/// Runs the rows of `write_table` whose state is `active`.
async fn run_write_rows(
    name: &str,
    target: &Target,
    id: &str,
    active: bool,
    failures: &mut Vec<String>,
) {
    for row in write_table().into_iter().filter(|r| r.active == active) {
        let outcome = target
            .provider
            .write_file(WriteFileRequest {
                instance_id: id.to_owned(),
                path: row.path.into(),
                content_base64: Bytes(row.content.to_vec()),
                mode: row.mode,
                kind: row.kind,
            })
            .await;
        let got = match outcome {
            Ok(()) => None,
            Err(e) => {
                let mut v = serde_json::to_value(&e).expect("errors serialize");
                v.as_object_mut().expect("an object").remove("message");
                Some(v)
            }
        };
        if got != row.error {
            failures.push(format!(
                "{name}: {}: got {got:?}, expected {:?}",
                row.name, row.error
            ));
        }
    }
}

/// The `HOSTNAME` a command starts with is the name `hostname` prints
/// in the same instance (each provider names its instances its own way).
async fn hostname_is_the_instances(adapter: &Adapter, id: &str) -> Result<(), String> {
    let run = |argv: &[&str]| SandboxCommand {
        executable: argv[0].into(),
        arguments: argv[1..].iter().map(|a| a.to_string()).collect(),
        working_directory: "/".into(),
        environment: BTreeMap::new(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    };
    let mut out = Vec::new();
    for argv in [&["env"][..], &["hostname"][..]] {
        let r = adapter
            .execute(id, run(argv))
            .await
            .map_err(|e| format!("{argv:?}: {e}"))?;
        if r.exit != ExitCause::ExitCode(0) {
            return Err(format!("{argv:?} exited {:?}", r.exit));
        }
        out.push(String::from_utf8_lossy(&r.stdout_base64.0).into_owned());
    }
    let printed = out[1].trim_end_matches('\n');
    let named = out[0].lines().find_map(|l| l.strip_prefix("HOSTNAME="));
    if printed.is_empty() || named != Some(printed) {
        return Err(format!("HOSTNAME {named:?}, hostname prints {printed:?}"));
    }
    Ok(())
}

async fn run_table(name: &str, target: &Target, folder: &Path, repo: &Path, head: &str) {
    let adapter = &target.adapter;
    let request = SandboxProvisionRequest {
        provider: name.into(),
        placement: adapter.envelope().placement,
        workspace_id: "ws-1".into(),
        session_id: "session-1".into(),
        run_id: "run-1".into(),
        attempt_id: "attempt-1".into(),
        lease_id: "lease-1".into(),
        lease_epoch: 1,
        target: Tier::Container,
        profile: SandboxProfile {
            profile_id: "profile-1".into(),
            profile_version: 1,
            profile_digest: Digest::from_sha256_bytes([7; 32]),
            retention: RetentionMode::EphemeralZdr,
            network_policy: NetworkPolicy::None,
            max_duration_seconds: 600,
            resources: target.resources.clone(),
            packages: Vec::new(),
        },
        platform: target.platform,
        root_image: target.root_image.clone(),
        mounts: vec![
            SandboxMount {
                path: "/src".into(),
                access: MountAccess::ReadWrite,
            },
            SandboxMount {
                path: "/git".into(),
                access: MountAccess::ReadOnly,
            },
        ],
        expires_at: target.expires_at,
    };
    let instance = adapter.provision(request).await.expect("provision");
    let id = instance.instance_id.clone();
    let none = |_| {};
    let staged = stage_folder(adapter, &id, folder, "/src", &none)
        .await
        .expect("stage folder");
    let modes: BTreeMap<&str, u32> = staged
        .iter()
        .map(|f| (f.path.to_str().expect("UTF-8 test names"), f.mode))
        .collect();
    assert_eq!(modes["/src/run.sh"], 0o755, "{name}");
    assert_eq!(modes["/src/deep/er/tool.sh"], 0o700, "{name}");
    stage_git(adapter, &id, repo, head, "", "/git", &none)
        .await
        .expect("stage git");
    let mut failures = Vec::new();
    run_write_rows(name, target, &id, false, &mut failures).await;
    // An activation rolled back through its handoff (its caller could not
    // take the instance) leaves it `provisioning` on every provider, and
    // it activates again (on the Linux provider the layer's second mount
    // needs overlayfs's `volatile` work tree cleared, decision 051).
    let first = target
        .provider
        .activate(ActivateRequest {
            instance_id: id.clone(),
        })
        .await
        .expect("activate to roll back");
    first
        .rollback
        .rollback()
        .await
        .unwrap_or_else(|e| panic!("{name}: rolling the activation back: {e}"));
    adapter
        .activate(&id)
        .await
        .unwrap_or_else(|e| panic!("{name}: activate after a rolled-back activation: {e}"));
    run_write_rows(name, target, &id, true, &mut failures).await;
    for row in table() {
        let command = SandboxCommand {
            executable: row.argv[0].clone(),
            arguments: row.argv[1..].to_vec(),
            working_directory: row.workdir.into(),
            environment: row
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            stdin_base64: None,
            timeout_seconds: 60,
            output_limit_bytes: 1 << 20,
        };
        let result = match adapter.execute(&id, command).await {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name}: {}: execute failed: {e}", row.name));
                continue;
            }
        };
        let stdout = String::from_utf8_lossy(&result.stdout_base64.0).into_owned();
        let stderr = String::from_utf8_lossy(&result.stderr_base64.0).into_owned();
        let shown = format!("stdout {stdout:?} stderr {stderr:?}");
        if result.exit != ExitCause::ExitCode(row.exit) {
            failures.push(format!(
                "{name}: {}: exit {:?}, expected {} ({shown})",
                row.name, result.exit, row.exit
            ));
        }
        if let Some(want) = row.stdout {
            if stdout != want {
                failures.push(format!(
                    "{name}: {}: stdout {stdout:?}, expected {want:?}",
                    row.name
                ));
            }
        }
        for line in row.stdout_lines {
            if !stdout.lines().any(|l| l == *line) {
                failures.push(format!("{name}: {}: no line {line:?} in {shown}", row.name));
            }
        }
        if let Some(want) = row.stderr_has {
            if !stderr.to_lowercase().contains(want) {
                failures.push(format!(
                    "{name}: {}: stderr lacks {want:?} ({shown})",
                    row.name
                ));
            }
        }
        if let Some(keys) = row.env_keys {
            let got: Vec<&str> = stdout
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if got != keys {
                failures.push(format!(
                    "{name}: {}: environment keys {got:?}, expected {keys:?}",
                    row.name
                ));
            }
        }
        if (row.exit == 126 || row.exit == 127) && stderr.trim().is_empty() {
            failures.push(format!("{name}: {}: no reason on stderr", row.name));
        }
    }
    if let Err(why) = hostname_is_the_instances(adapter, &id).await {
        failures.push(format!("{name}: HOSTNAME: {why}"));
    }
    list_output_modes(name, adapter, &id, &mut failures).await;
    adapter.destroy(&id).await.expect("destroy");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The workload makes `x.sh` 0755 and `secret` 0600 in the output tree;
/// listDir names exactly those bits, and none for `late.txt` (0644,
/// written by a write row).
async fn list_output_modes(name: &str, adapter: &Adapter, id: &str, failures: &mut Vec<String>) {
    let out = |f: &str| format!("{}/{f}", bounds::OUTPUT_PATH);
    let script = format!(
        "touch {x} {s}; chmod 755 {x}; chmod 600 {s}",
        x = out("x.sh"),
        s = out("secret")
    );
    let command = SandboxCommand {
        executable: "sh".into(),
        arguments: vec!["-c".into(), script],
        working_directory: "/".into(),
        environment: BTreeMap::new(),
        stdin_base64: None,
        timeout_seconds: 60,
        output_limit_bytes: 1 << 20,
    };
    match adapter.execute(id, command).await {
        Ok(r) if r.exit == ExitCause::ExitCode(0) => {}
        other => {
            failures.push(format!("{name}: chmod in the output tree: {other:?}"));
            return;
        }
    }
    let listing = match adapter.list_dir(id, bounds::OUTPUT_PATH, 100).await {
        Ok(l) => l,
        Err(e) => {
            failures.push(format!("{name}: listDir of the output tree: {e}"));
            return;
        }
    };
    let got: BTreeMap<String, Option<u32>> = listing
        .entries
        .iter()
        .map(|e| (e.path.display(), e.mode))
        .collect();
    let want: BTreeMap<String, Option<u32>> = [
        (out("late.txt"), None),
        (out("secret"), Some(0o600)),
        (out("x.sh"), Some(0o755)),
    ]
    .into_iter()
    .collect();
    if got != want {
        failures.push(format!("{name}: listDir modes {got:?}, expected {want:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_gives_the_same_outcome_for_each_launch_edge_case() {
    let folder = tempfile::tempdir().unwrap();
    host_folder(folder.path());
    let repo = tempfile::tempdir().unwrap();
    let head = git_repo(repo.path());
    let mut ran = Vec::new();
    for (name, setup) in PROVIDERS {
        let Some(mut target) = setup().await else {
            continue;
        };
        let teardown = target.teardown.take();
        let outcome = tokio::spawn({
            let (folder, repo, head) = (
                folder.path().to_path_buf(),
                repo.path().to_path_buf(),
                head.clone(),
            );
            let name = name.to_string();
            async move { run_table(&name, &target, &folder, &repo, &head).await }
        })
        .await;
        if let Some(t) = teardown {
            t().unwrap_or_else(|e| panic!("{name}: teardown: {e}"));
        }
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
        ran.push(*name);
    }
    eprintln!("launch parity ran on {ran:?}");
    assert!(ran.contains(&"memory"), "the memory oracle always runs");
}
