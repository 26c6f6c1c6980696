//! The nine cases. Each drives the provider only through the runtime and
//! only with the probe vocabulary (DESIGN D15), and asserts what the spec
//! says the case proves.

use std::time::Duration;

use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
use checkfu_sandbox_contract::{
    ControlSignal, ExitCause, MountAccess, NetworkDestination, NetworkPolicy, OutputStream,
    ProcessExit, ProjectEntryKind, ReadFileOutcome, ReadFilesEntry, ReleaseDisposition,
    RetentionMode, SandboxError, SandboxMount, SandboxProcessRequest,
};
use checkfu_sandbox_runtime::staging::{sha256_digest, stage_git, GitMode};
use futures_util::io::{AsyncReadExt, AsyncWriteExt};

use crate::context::{cmd, cmd_stdin, ensure, fail, fresh_token, op_failed, step, Ctx, Step};

fn mount(path: &str, access: MountAccess) -> SandboxMount {
    SandboxMount {
        path: path.into(),
        access,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn output(name: &str) -> String {
    format!("{OUTPUT_PATH}/{name}")
}

/// Runs the case with this id.
pub async fn run_case(id: &str, ctx: &Ctx) -> Step<()> {
    match id {
        "stage-seal-execute" => stage_seal_execute(ctx).await,
        "stage-git-project" => stage_git_project(ctx).await,
        "checkpoint-clone" => checkpoint_clone(ctx).await,
        "allowlist-egress" => allowlist_egress(ctx).await,
        "durable-round-trip" => durable_round_trip(ctx).await,
        "none-egress" => none_egress(ctx).await,
        "zdr-release" => zdr_release(ctx).await,
        "orphan-reclaim" => orphan_reclaim(ctx).await,
        "pause-pinning" => pause_pinning(ctx).await,
        other => Err(fail("select case", format!("unknown case {other}"))),
    }
}

async fn stage_seal_execute(ctx: &Ctx) -> Step<()> {
    let data = format!("staged input {}\n", fresh_token("data")).into_bytes();
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let mounts = vec![
        mount("/data", MountAccess::ReadOnly),
        mount("/work", MountAccess::ReadWrite),
    ];
    let req = ctx.request("session-sse", profile, mounts, 3600);
    let inst = ctx.provision("provision", req).await?;
    let id = inst.instance_id.as_str();
    step(
        "stage /data/input.txt",
        ctx.adapter.write_file(id, "/data/input.txt", data.clone()),
    )
    .await?;
    step(
        "stage /work/seed.txt",
        ctx.adapter
            .write_file(id, "/work/seed.txt", b"seed\n".to_vec()),
    )
    .await?;
    step("activate", ctx.adapter.activate(id)).await?;

    let r = ctx
        .run_ok("cat the staged file", id, cmd(&["cat", "/data/input.txt"]))
        .await?;
    ensure(
        r.stdout_base64.as_slice() == data.as_slice(),
        "cat the staged file",
        || {
            format!(
                "expected {:?}, actual {:?}",
                text(&data),
                text(r.stdout_base64.as_slice())
            )
        },
    )?;

    let sealed = ctx
        .run(
            "write into the read-only mount",
            id,
            cmd(&["touch", "/data/sealed-probe"]),
        )
        .await?;
    ensure(
        sealed.exit != ExitCause::ExitCode(0),
        "write into the read-only mount",
        || "expected a non-zero exit from touch in a read-only mount, actual exit code 0".into(),
    )?;
    match ctx.adapter.read_file(id, "/data/sealed-probe", 1024).await {
        Ok(_) => {
            return Err(fail(
                "read-only mount stays sealed",
                "a file created in the read-only mount exists",
            ))
        }
        Err(f) => match f.error() {
            SandboxError::SandboxOperationFailed { reason, .. }
                if reason.as_str() == "not_found" => {}
            _ => {
                return Err(op_failed(
                    "read-only mount stays sealed (expected not_found)",
                    f,
                ))
            }
        },
    }
    match ctx
        .adapter
        .write_file(id, "/data/late.txt", b"late".to_vec())
        .await
    {
        Err(f) if matches!(f.error(), SandboxError::SandboxLifecycleConflict { .. }) => {}
        Err(f) => {
            return Err(op_failed(
                "writeFile into a mount after activation (expected a lifecycle conflict)",
                f,
            ))
        }
        Ok(()) => {
            return Err(fail(
                "writeFile into a mount after activation",
                "accepted after activation",
            ))
        }
    }

    ctx.run_ok(
        "copy into the output tree",
        id,
        cmd(&["cp", "/data/input.txt", &output("copy.txt")]),
    )
    .await?;
    ctx.run_ok(
        "write in the read-write mount",
        id,
        cmd(&["cp", "/work/seed.txt", "/work/seed-copy.txt"]),
    )
    .await?;
    let back = step(
        "read back the output file",
        ctx.adapter.read_file(id, &output("copy.txt"), 1 << 20),
    )
    .await?;
    ensure(back == data, "read back the output file", || {
        format!(
            "expected {} bytes equal to the staged input, actual {:?}",
            data.len(),
            text(&back)
        )
    })?;
    step(
        "writeFile into the output tree",
        ctx.adapter
            .write_file(id, &output("note.txt"), b"note".to_vec()),
    )
    .await?;

    ctx.run_ok(
        "plant an absolute escaping link",
        id,
        cmd(&["ln", "-s", "/data/input.txt", &output("abs-escape")]),
    )
    .await?;
    ctx.run_ok(
        "plant a relative escaping link",
        id,
        cmd(&["ln", "-s", "../../../data/input.txt", &output("rel-escape")]),
    )
    .await?;
    for link in ["abs-escape", "rel-escape"] {
        match ctx.adapter.read_file(id, &output(link), 1 << 20).await {
            Err(f) if matches!(f.error(), SandboxError::SandboxOperationFailed { reason, .. } if reason.as_str() == "outside_root") => {}
            Err(f) => return Err(op_failed("a link out of the output tree is refused (expected outside_root)", f)),
            Ok(bytes) => {
                return Err(fail(
                    "a link out of the output tree is refused",
                    format!("{link}: expected outside_root, actual {} bytes read from outside the allowed root", bytes.len()),
                ))
            }
        }
    }

    let batch = vec![
        ReadFilesEntry {
            path: output("copy.txt"),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: "/data/input.txt".into(),
            maximum_bytes: 4,
        },
        ReadFilesEntry {
            path: output("abs-escape"),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: "/data/input.txt".into(),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: output("note.txt"),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: output("absent.txt"),
            maximum_bytes: 16,
        },
    ];
    let outcomes = step(
        "readFiles across two roots",
        ctx.adapter.read_files(id, batch),
    )
    .await?;
    let expected = [
        ReadFileOutcome::Read {
            path: output("copy.txt"),
            content_base64: data.clone().into(),
        },
        ReadFileOutcome::TooLarge {
            path: "/data/input.txt".into(),
            size_bytes: data.len() as u64,
        },
        ReadFileOutcome::OutsideRoot {
            path: output("abs-escape"),
        },
        ReadFileOutcome::Read {
            path: "/data/input.txt".into(),
            content_base64: data.clone().into(),
        },
        ReadFileOutcome::Read {
            path: output("note.txt"),
            content_base64: b"note".to_vec().into(),
        },
        ReadFileOutcome::NotFound {
            path: output("absent.txt"),
        },
    ];
    ensure(outcomes == expected, "readFiles across two roots", || {
        format!("expected {expected:?}, actual {outcomes:?}")
    })?;

    let limit = 1024u64;
    let mut at_limit = cmd(&["head", "-c", "1024", "/dev/zero"]);
    at_limit.output_limit_bytes = limit;
    let r = ctx
        .run_ok("output exactly at the limit", id, at_limit)
        .await?;
    ensure(
        r.stdout_base64.len() as u64 == limit,
        "output exactly at the limit",
        || format!("expected {limit} bytes, actual {}", r.stdout_base64.len()),
    )?;
    let mut over = cmd(&["head", "-c", "4096", "/dev/zero"]);
    over.output_limit_bytes = limit;
    match ctx.adapter.execute(id, over).await {
        Err(f)
            if *f.error()
                == SandboxError::SandboxOutputLimitExceeded {
                    stream: OutputStream::Stdout,
                    limit_bytes: limit,
                } => {}
        Err(f) => {
            return Err(op_failed(
                "output over the limit (expected SandboxOutputLimitExceeded{stdout, 1024})",
                f,
            ))
        }
        Ok(r) => {
            return Err(fail(
                "output over the limit",
                format!(
                    "expected SandboxOutputLimitExceeded, actual a settlement {:?} with {} bytes",
                    r.exit,
                    r.stdout_base64.len()
                ),
            ))
        }
    }
    let r = ctx
        .run("exit status", id, cmd(&["sh", "-c", "exit 7"]))
        .await?;
    ensure(r.exit == ExitCause::ExitCode(7), "exit status", || {
        format!("expected exit code 7, actual {:?}", r.exit)
    })?;
    let r = ctx
        .run_ok(
            "stdin delivered and closed",
            id,
            cmd_stdin(&["cat"], b"from stdin"),
        )
        .await?;
    ensure(
        r.stdout_base64.as_slice() == b"from stdin",
        "stdin delivered and closed",
        || {
            format!(
                "expected \"from stdin\", actual {:?}",
                text(r.stdout_base64.as_slice())
            )
        },
    )?;

    if ctx.adapter.envelope().list_dir {
        let listing = step(
            "listDir of the output tree",
            ctx.adapter.list_dir(id, OUTPUT_PATH, 1000),
        )
        .await?;
        let copy = listing
            .entries
            .iter()
            .find(|e| e.path == output("copy.txt"));
        ensure(
            copy.is_some_and(|e| {
                e.size_bytes == data.len() as u64 && e.sha256 == sha256_digest(&data)
            }),
            "listDir of the output tree",
            || {
                format!(
                    "expected {} with size {} and its SHA-256, actual {:?}",
                    output("copy.txt"),
                    data.len(),
                    listing.entries
                )
            },
        )?;
    }
    if ctx.adapter.list_project_dir_offered() {
        ctx.run_ok(
            "plant a symlink",
            id,
            cmd(&["ln", "-s", "copy.txt", &output("link")]),
        )
        .await?;
        ctx.run_ok("plant a fifo", id, cmd(&["mkfifo", &output("pipe")]))
            .await?;
        let listing = step(
            "listProjectDir names special files",
            ctx.adapter.list_project_dir(id, OUTPUT_PATH, 1000),
        )
        .await?;
        let kind_of = |p: &str| {
            listing
                .entries
                .iter()
                .find(|e| e.path == p)
                .map(|e| e.kind.clone())
        };
        ensure(
            matches!(
                kind_of(&output("link")),
                Some(ProjectEntryKind::Symlink { .. })
            ) && kind_of(&output("pipe")) == Some(ProjectEntryKind::Fifo)
                && matches!(
                    kind_of(&output("copy.txt")),
                    Some(ProjectEntryKind::Regular { .. })
                ),
            "listProjectDir names special files",
            || {
                format!(
                    "expected copy.txt regular, link symlink, pipe fifo; actual {:?}",
                    listing.entries
                )
            },
        )?;
    }
    if ctx.adapter.open_process_offered() {
        open_process_round_trip(ctx, id).await?;
    }
    let disposition = step("release (ephemeral_zdr)", ctx.adapter.release(id, None)).await?;
    ensure(
        disposition == ReleaseDisposition::Destroyed,
        "release (ephemeral_zdr)",
        || format!("expected destroyed, actual {disposition:?}"),
    )?;
    Ok(())
}

/// openProcess, when offered: `cat` echoes a prompt after a half-close and
/// exits 0; a second process while one is live is refused.
async fn open_process_round_trip(ctx: &Ctx, id: &str) -> Step<()> {
    const STEP: &str = "openProcess cat round trip";
    let request = SandboxProcessRequest {
        instance_id: id.to_owned(),
        executable: "cat".into(),
        arguments: Vec::new(),
        working_directory: "/".into(),
        environment: Default::default(),
    };
    let mut process = step(STEP, ctx.adapter.open_process(request.clone())).await?;
    let second = ctx.adapter.open_process(request).await;
    let refused = match &second {
        Err(f) => {
            matches!(f.error(), SandboxError::SandboxLifecycleConflict { actual, .. } if actual == "process_already_open")
        }
        Ok(p) => {
            let _ = p.handle.destroy().await;
            false
        }
    };
    if !refused {
        let _ = process.handle.destroy().await;
        return Err(fail(
            "second openProcess while one is live",
            format!(
                "expected SandboxLifecycleConflict{{open_process, process_already_open}}, actual {}",
                match &second {
                    Ok(_) => "a second live process".to_owned(),
                    Err(f) => f.to_string(),
                }
            ),
        ));
    }
    let prompt = format!("prompt {}\n", fresh_token("prompt")).into_bytes();
    let io = async {
        process.input.write_all(&prompt).await?;
        process.input.close().await?;
        let mut out = Vec::new();
        process.output.read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let out = match tokio::time::timeout(Duration::from_secs(20), io).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            let _ = process.handle.destroy().await;
            return Err(fail(STEP, format!("stream error: {e}")));
        }
        Err(_) => {
            let _ = process.handle.destroy().await;
            return Err(fail(STEP, "no end of output within 20 s after closing input: the half-close was not delivered"));
        }
    };
    let exit = tokio::time::timeout(Duration::from_secs(20), process.handle.wait()).await;
    let again = tokio::time::timeout(Duration::from_secs(5), process.handle.wait()).await;
    let _ = process.handle.signal(ControlSignal::Sigterm).await;
    let destroyed = process.handle.destroy().await;
    ensure(out == prompt, STEP, || {
        format!("expected the prompt back, actual {:?}", text(&out))
    })?;
    match (exit, again) {
        (Ok(Ok(ProcessExit::ExitCode(0))), Ok(Ok(ProcessExit::ExitCode(0)))) => {}
        (first, second) => {
            return Err(fail(
                STEP,
                format!("expected exit code 0 twice, actual {first:?} then {second:?}"),
            ))
        }
    }
    destroyed.map_err(|e| op_failed("destroy the process", e.into()))?;
    Ok(())
}

async fn stage_git_project(ctx: &Ctx) -> Step<()> {
    let dir = crate::scratch::ScratchDir::new("git-project")
        .map_err(|e| fail("create a Git repository", e.to_string()))?;
    let content = format!("fn main() {{ /* {} */ }}\n", fresh_token("git")).into_bytes();
    let commit = crate::git::commit_files(
        dir.path(),
        &[
            ("src/main.rs", &content),
            ("README", b"project\n"),
            ("run.sh", b"#!/bin/sh\nexit 0\n"),
        ],
    )
    .map_err(|e| fail("create a Git repository", e.to_string()))?;
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let req = ctx.request(
        "session-git",
        profile,
        vec![mount("/project", MountAccess::ReadOnly)],
        3600,
    );
    let inst = ctx.provision("provision", req).await?;
    let id = inst.instance_id.as_str();
    let staged = step(
        "stage the commit's tree",
        stage_git(
            &ctx.adapter,
            id,
            dir.path(),
            &commit,
            "",
            "/project",
            &|_| {},
        ),
    )
    .await?;
    let main = staged.iter().find(|f| f.path == "/project/src/main.rs");
    let script = staged.iter().find(|f| f.path == "/project/run.sh");
    ensure(
        main.is_some_and(|f| {
            f.sha256 == sha256_digest(&content) && f.git_mode == Some(GitMode::Regular)
        }) && script.is_some_and(|f| f.git_mode == Some(GitMode::Executable))
            && staged.len() == 3,
        "stage the commit's tree",
        || {
            format!("expected /project/src/main.rs (100644, the blob's digest), /project/README and /project/run.sh (100755), actual {staged:?}")
        },
    )?;
    step("activate", ctx.adapter.activate(id)).await?;
    let r = ctx
        .run_ok(
            "sha256sum the staged blob",
            id,
            cmd(&["sha256sum", "/project/src/main.rs"]),
        )
        .await?;
    let printed = text(r.stdout_base64.as_slice());
    let want = sha256_digest(&content);
    ensure(
        printed.split_whitespace().next() == Some(want.hex()),
        "sha256sum the staged blob",
        || format!("expected {} , actual {printed:?}", want.hex()),
    )?;
    let env = ctx
        .run_ok("no credential in the environment", id, cmd(&["env"]))
        .await?;
    let env_text = text(env.stdout_base64.as_slice()).to_ascii_uppercase();
    for marker in [
        "GIT_",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "CREDENTIAL",
        "CHECKFU_",
        "SSH_AUTH",
    ] {
        ensure(
            !env_text.contains(marker),
            "no credential in the environment",
            || format!("expected no variable mentioning {marker}, actual environment {env_text:?}"),
        )?;
    }
    let r = ctx
        .run(
            "the repository is not in the sandbox",
            id,
            cmd(&["ls", "/project/.git"]),
        )
        .await?;
    ensure(
        r.exit != ExitCause::ExitCode(0),
        "the repository is not in the sandbox",
        || "expected /project/.git to be absent: only blobs are staged".into(),
    )?;
    step("release", ctx.adapter.release(id, None)).await?;
    Ok(())
}

async fn checkpoint_clone(ctx: &Ctx) -> Step<()> {
    let profile = ctx.profile(RetentionMode::Durable, NetworkPolicy::None);
    let req = ctx.request(
        "session-source",
        profile.clone(),
        vec![mount("/work", MountAccess::ReadWrite)],
        3600,
    );
    let inst = ctx.provision("provision", req).await?;
    let id = inst.instance_id.as_str();
    step("activate", ctx.adapter.activate(id)).await?;
    let state = format!("checkpoint {}\n", fresh_token("clone")).into_bytes();
    step(
        "write state",
        ctx.adapter
            .write_file(id, &output("state.txt"), state.clone()),
    )
    .await?;
    ctx.run_ok(
        "write in the read-write mount",
        id,
        cmd(&["cp", &output("state.txt"), "/work/state.txt"]),
    )
    .await?;
    let source = ctx.snapshot("snapshot", id, ctx.at(3600)).await?;
    let clone = step(
        "clone into another Session",
        ctx.adapter.clone_snapshot(&source, "session-fork"),
    )
    .await?;
    ctx.track_snapshot(&clone.snapshot_id);
    ensure(
        clone.session_id == "session-fork"
            && clone.snapshot_id != source.snapshot_id
            && clone.expires_at == source.expires_at,
        "clone into another Session",
        || format!("expected a new id in session-fork with the source's expiry, actual {clone:?}"),
    )?;
    step("destroy the source instance", ctx.adapter.destroy(id)).await?;
    step(
        "destroy the source snapshot",
        ctx.adapter.destroy_snapshot(&source.snapshot_id),
    )
    .await?;
    let fork_req = ctx.request(
        "session-fork",
        profile,
        vec![mount("/work", MountAccess::ReadWrite)],
        3600,
    );
    let fork = step(
        "resume the clone without its source",
        ctx.adapter.resume(fork_req, clone.clone()),
    )
    .await?;
    ctx.track_instance(&fork.instance_id);
    let back = step(
        "read state from the clone",
        ctx.adapter
            .read_file(&fork.instance_id, &output("state.txt"), 1 << 20),
    )
    .await?;
    ensure(back == state, "read state from the clone", || {
        format!("expected {:?}, actual {:?}", text(&state), text(&back))
    })?;
    let work = step(
        "read the mount from the clone",
        ctx.adapter
            .read_file(&fork.instance_id, "/work/state.txt", 1 << 20),
    )
    .await?;
    ensure(work == state, "read the mount from the clone", || {
        format!("expected {:?}, actual {:?}", text(&state), text(&work))
    })?;
    Ok(())
}

async fn egress_probe(
    ctx: &Ctx,
    id: &str,
    name: &str,
    host: &str,
    port: u16,
) -> Step<(ExitCause, Vec<u8>)> {
    let mut c = cmd(&["nc", "-w", "3", host, &port.to_string()]);
    c.timeout_seconds = 30;
    let r = ctx.run(name, id, c).await?;
    Ok((r.exit, r.stdout_base64.0))
}

async fn positive_control(ctx: &Ctx, listener: &crate::target::Listener) -> Step<()> {
    let got = ctx
        .target
        .control_probe(listener)
        .await
        .map_err(|m| fail("positive control", m.to_string()))?;
    ensure(got == listener.token.as_bytes(), "positive control", || {
        format!(
            "expected the listener's token from the control vantage point, actual {:?}",
            text(&got)
        )
    })
}

async fn allowlist_egress(ctx: &Ctx) -> Step<()> {
    let allowed = ctx.listener("start the allowed listener").await?;
    let denied = ctx.listener("start the other listener").await?;
    positive_control(ctx, &allowed).await?;
    positive_control(ctx, &denied).await?;
    let policy = NetworkPolicy::Allowlist {
        destinations: vec![NetworkDestination {
            host: allowed.host.clone(),
            port: allowed.port,
        }],
    };
    let profile = ctx.profile(RetentionMode::EphemeralZdr, policy);
    let inst = ctx
        .provision(
            "provision",
            ctx.request("session-allow", profile, vec![], 3600),
        )
        .await?;
    let id = inst.instance_id.as_str();
    step("activate", ctx.adapter.activate(id)).await?;
    let (exit, out) = egress_probe(
        ctx,
        id,
        "reach the allowed host",
        &allowed.host,
        allowed.port,
    )
    .await?;
    ensure(
        exit == ExitCause::ExitCode(0) && out == allowed.token.as_bytes(),
        "reach the allowed host",
        || {
            format!(
                "expected exit 0 and the token, actual {exit:?} and {:?}",
                text(&out)
            )
        },
    )?;
    let (exit, out) =
        egress_probe(ctx, id, "other host unreachable", &denied.host, denied.port).await?;
    ensure(
        !text(&out).contains(&denied.token),
        "other host unreachable",
        || {
            format!("expected no token from a host outside the allowlist, actual exit {exit:?} with the token")
        },
    )?;
    step("release", ctx.adapter.release(id, None)).await?;
    Ok(())
}

async fn none_egress(ctx: &Ctx) -> Step<()> {
    let listener = ctx.listener("start a listener").await?;
    positive_control(ctx, &listener).await?;
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let inst = ctx
        .provision(
            "provision",
            ctx.request("session-none", profile, vec![], 3600),
        )
        .await?;
    let id = inst.instance_id.as_str();
    step("activate", ctx.adapter.activate(id)).await?;
    let (exit, out) =
        egress_probe(ctx, id, "outbound denied", &listener.host, listener.port).await?;
    ensure(
        !text(&out).contains(&listener.token) && exit != ExitCause::ExitCode(0),
        "outbound denied",
        || {
            format!(
                "expected a failed dial without the token, actual exit {exit:?} and {:?}",
                text(&out)
            )
        },
    )?;
    step("release", ctx.adapter.release(id, None)).await?;
    Ok(())
}

async fn durable_round_trip(ctx: &Ctx) -> Step<()> {
    let profile = ctx.profile(RetentionMode::Durable, NetworkPolicy::None);
    let mounts = vec![mount("/work", MountAccess::ReadWrite)];
    let inst = ctx
        .provision(
            "provision",
            ctx.request("session-durable", profile.clone(), mounts.clone(), 3600),
        )
        .await?;
    let id = inst.instance_id.as_str();
    let seed = format!("seed {}\n", fresh_token("durable")).into_bytes();
    step(
        "stage /work/seed.txt",
        ctx.adapter.write_file(id, "/work/seed.txt", seed.clone()),
    )
    .await?;
    step("activate", ctx.adapter.activate(id)).await?;
    ctx.run_ok(
        "workload writes in the mount",
        id,
        cmd(&["cp", "/work/seed.txt", "/work/copy.txt"]),
    )
    .await?;
    let out = b"durable output\n".to_vec();
    step(
        "write the output tree",
        ctx.adapter
            .write_file(id, &output("result.txt"), out.clone()),
    )
    .await?;
    let disposition = step(
        "release (durable)",
        ctx.adapter.release(id, Some(ctx.at(3600))),
    )
    .await?;
    let snapshot = match disposition {
        ReleaseDisposition::Released { snapshot } => snapshot,
        ReleaseDisposition::Destroyed => {
            return Err(fail(
                "release (durable)",
                "expected released with a snapshot, actual destroyed",
            ))
        }
    };
    ctx.track_snapshot(&snapshot.snapshot_id);
    let resumed = step(
        "resume",
        ctx.adapter.resume(
            ctx.request("session-durable", profile, mounts, 3600),
            snapshot,
        ),
    )
    .await?;
    ctx.track_instance(&resumed.instance_id);
    for (path, want) in [
        ("/work/seed.txt", &seed),
        ("/work/copy.txt", &seed),
        (&output("result.txt")[..], &out),
    ] {
        let got = step(
            "read after resume",
            ctx.adapter.read_file(&resumed.instance_id, path, 1 << 20),
        )
        .await?;
        ensure(got == *want, "read after resume", || {
            format!("{path}: expected {:?}, actual {:?}", text(want), text(&got))
        })?;
    }
    Ok(())
}

async fn zdr_release(ctx: &Ctx) -> Step<()> {
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let inst = ctx
        .provision(
            "provision",
            ctx.request(
                "session-zdr",
                profile,
                vec![mount("/work", MountAccess::ReadWrite)],
                3600,
            ),
        )
        .await?;
    let id = inst.instance_id.as_str();
    step(
        "stage a file",
        ctx.adapter
            .write_file(id, "/work/private.txt", b"private".to_vec()),
    )
    .await?;
    step("activate", ctx.adapter.activate(id)).await?;
    step(
        "write the output tree",
        ctx.adapter
            .write_file(id, &output("private.txt"), b"private".to_vec()),
    )
    .await?;
    match ctx.adapter.snapshot(id, ctx.at(3600)).await {
        Err(f) if matches!(f.error(), SandboxError::SandboxSnapshotForbidden { .. }) => {}
        Err(f) => {
            return Err(op_failed(
                "snapshot on ZDR (expected SandboxSnapshotForbidden)",
                f,
            ))
        }
        Ok(s) => {
            ctx.track_snapshot(&s.snapshot_id);
            return Err(fail(
                "snapshot on ZDR",
                "a snapshot was taken of a ZDR instance",
            ));
        }
    }
    let disposition = step("release", ctx.adapter.release(id, None)).await?;
    ensure(
        disposition == ReleaseDisposition::Destroyed,
        "release",
        || format!("expected destroyed, actual {disposition:?}"),
    )?;
    let live = ctx
        .target
        .live_objects()
        .await
        .map_err(|m| fail("no state after release", m.to_string()))?;
    ensure(
        !live.instances.contains(id),
        "no state after release",
        || format!("instance {id} still exists at the provider"),
    )?;
    Ok(())
}

async fn orphan_reclaim(ctx: &Ctx) -> Step<()> {
    let profile = ctx.profile(RetentionMode::EphemeralZdr, NetworkPolicy::None);
    let short = ctx
        .provision(
            "provision a short-lived instance",
            ctx.request("session-orphan", profile.clone(), vec![], 60),
        )
        .await?;
    step("activate", ctx.adapter.activate(&short.instance_id)).await?;
    let long = ctx
        .provision(
            "provision a long-lived instance",
            ctx.request("session-orphan", profile.clone(), vec![], 3600),
        )
        .await?;
    let probe = step(
        "a refused handoff is unwound by its rollback",
        ctx.adapter
            .probe_rollback(ctx.request("session-orphan", profile, vec![], 3600)),
    )
    .await?;
    ctx.track_instance(&probe.instance_id);
    let live = ctx
        .target
        .live_objects()
        .await
        .map_err(|m| fail("rollback left nothing", m.to_string()))?;
    ensure(
        !live.instances.contains(&probe.instance_id),
        "rollback left nothing",
        || {
            format!(
                "instance {} still exists after its rollback ran twice",
                probe.instance_id
            )
        },
    )?;

    let mut fresh = checkfu_sandbox_runtime::SandboxRuntime::new(ctx.clock.clone());
    fresh.register(ctx.target.reopen());
    let adapter = fresh
        .adapter(ctx.adapter.provider_id())
        .map_err(|f| op_failed("a restarted Runner's adapter", f))?;
    let swept = step(
        "sweep from a fresh provider",
        adapter.cleanup(ctx.at(120), ctx.at(-1), Vec::new()),
    )
    .await?;
    ensure(
        swept.instances.contains(&short.instance_id)
            && !swept.instances.contains(&long.instance_id),
        "sweep from a fresh provider",
        || {
            format!(
                "expected {} swept and {} kept, actual {:?}",
                short.instance_id, long.instance_id, swept.instances
            )
        },
    )?;
    let live = ctx
        .target
        .live_objects()
        .await
        .map_err(|m| fail("expired instance gone", m.to_string()))?;
    ensure(
        !live.instances.contains(&short.instance_id) && live.instances.contains(&long.instance_id),
        "expired instance gone",
        || {
            format!(
                "expected only {} left of the two, actual {:?}",
                long.instance_id, live.instances
            )
        },
    )?;
    Ok(())
}

async fn pause_pinning(ctx: &Ctx) -> Step<()> {
    let profile = ctx.profile(RetentionMode::Durable, NetworkPolicy::None);
    let inst = ctx
        .provision(
            "provision",
            ctx.request("session-pause", profile, vec![], 3600),
        )
        .await?;
    let id = inst.instance_id.as_str();
    step("activate", ctx.adapter.activate(id)).await?;
    let pinned = ctx.snapshot("snapshot (to pin)", id, ctx.at(600)).await?;
    let loose = ctx.snapshot("snapshot (unpinned)", id, ctx.at(600)).await?;
    let first = step(
        "sweep before expiry",
        ctx.adapter
            .cleanup(ctx.at(300), ctx.at(300), vec![pinned.snapshot_id.clone()]),
    )
    .await?;
    ensure(
        first.snapshots.contains(&loose.snapshot_id)
            && !first.snapshots.contains(&pinned.snapshot_id),
        "sweep before expiry",
        || {
            format!(
                "expected {} swept and pinned {} kept, actual {:?}",
                loose.snapshot_id, pinned.snapshot_id, first.snapshots
            )
        },
    )?;
    let live = ctx
        .target
        .live_objects()
        .await
        .map_err(|m| fail("pin survives", m.to_string()))?;
    ensure(
        live.snapshots.contains(&pinned.snapshot_id),
        "pin survives",
        || format!("pinned {} is gone", pinned.snapshot_id),
    )?;
    let second = step(
        "sweep after expiry",
        ctx.adapter
            .cleanup(ctx.at(700), ctx.at(300), vec![pinned.snapshot_id.clone()]),
    )
    .await?;
    ensure(
        second.snapshots.contains(&pinned.snapshot_id),
        "sweep after expiry",
        || {
            format!(
                "expected pinned {} swept at its own expiry, actual {:?}",
                pinned.snapshot_id, second.snapshots
            )
        },
    )?;
    let live = ctx
        .target
        .live_objects()
        .await
        .map_err(|m| fail("expiry beats the pin", m.to_string()))?;
    ensure(
        !live.snapshots.contains(&pinned.snapshot_id),
        "expiry beats the pin",
        || format!("pinned {} still exists past its expiry", pinned.snapshot_id),
    )?;
    Ok(())
}
