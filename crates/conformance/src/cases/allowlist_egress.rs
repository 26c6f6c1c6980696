//! Case `allowlist-egress`: only the declared outbound hosts are reachable.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
