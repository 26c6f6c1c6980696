//! Case `orphan-reclaim`: expired instances are reclaimed by a fresh provider without a database reset.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
