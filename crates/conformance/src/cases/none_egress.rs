//! Case `none-egress`: outbound traffic is denied for a none-network profile.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
