//! Case `pause-pinning`: a pinned snapshot survives orphan cleanup until its own expiry.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
