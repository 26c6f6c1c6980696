//! Case `durable-round-trip`: files survive snapshot, release and resume.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
    super::active_write::exercise(ctx, RetentionMode::Durable).await?;
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
