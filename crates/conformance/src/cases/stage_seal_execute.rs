//! Case `stage-seal-execute`: declared mounts stage, read-only data seals, command output is bounded, outputs read back.

use super::prelude::*;
use checkfu_sandbox_contract::ConflictActual;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
            path: output("copy.txt").into(),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: "/data/input.txt".into(),
            maximum_bytes: 4,
        },
        ReadFilesEntry {
            path: output("abs-escape").into(),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: "/data/input.txt".into(),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: output("note.txt").into(),
            maximum_bytes: 1 << 20,
        },
        ReadFilesEntry {
            path: output("absent.txt").into(),
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
            path: output("copy.txt").into(),
            content_base64: data.clone().into(),
        },
        ReadFileOutcome::TooLarge {
            path: "/data/input.txt".into(),
            size_bytes: data.len() as u64,
        },
        ReadFileOutcome::OutsideRoot {
            path: output("abs-escape").into(),
        },
        ReadFileOutcome::Read {
            path: "/data/input.txt".into(),
            content_base64: data.clone().into(),
        },
        ReadFileOutcome::Read {
            path: output("note.txt").into(),
            content_base64: b"note".to_vec().into(),
        },
        ReadFileOutcome::NotFound {
            path: output("absent.txt").into(),
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
                e.size_bytes == data.len() as u64 && e.sha256 == Some(sha256_digest(&data))
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
    super::active_write::exercise(ctx, RetentionMode::EphemeralZdr).await?;
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
            matches!(
                f.error(),
                SandboxError::SandboxLifecycleConflict {
                    actual: ConflictActual::ProcessAlreadyOpen,
                    ..
                }
            )
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
