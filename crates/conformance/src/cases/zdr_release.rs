//! Case `zdr-release`: ZDR snapshots are forbidden and release destroys all state.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
