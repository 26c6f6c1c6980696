//! Case `checkpoint-clone`: a clone lands in an independent target-Session snapshot.

use super::prelude::*;

/// Runs the case.
pub(super) async fn run(ctx: &Ctx) -> Step<()> {
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
