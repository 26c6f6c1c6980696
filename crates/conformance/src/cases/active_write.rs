//! beginActiveWrite's ownership handoff, checked inside the cases that
//! hold an active instance with a read-write mount (stage-seal-execute on
//! `ephemeral_zdr`, durable-round-trip on `durable`) when the envelope
//! declares `active_mount_write` (spec "beginActiveWrite has an explicit
//! ownership handoff"; decision `027-active-write-journal`).
//!
//! On its own instance (mounts `/aw` and a nested, separately owned `/aw/deep`,
//! both read-write) it checks: a batch commits into the deepest owning
//! mount with every file new; a redelivery of the same batch gets the same
//! outcome and publishes nothing again; a caller that aborts at the
//! dispatch marker gets `rolled_back` with every file old; a batch that
//! fails mid-publication leaves every file old; a pre-existing pause
//! survives a transaction; the workload runs afterwards. On a ZDR instance
//! a provider whose journal is durable must refuse before accepting a body.

use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::{
    ActiveWriteFile, ActiveWriteOutcome, ActiveWriteRequest, DispatchMarker, Requirement,
    SandboxFailure,
};

use super::prelude::*;

const DEEP: &str = "/aw/deep";

fn deep(name: &str) -> String {
    format!("{DEEP}/{name}")
}

fn batch(id: &str, tx: &str, files: &[(String, &[u8])]) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.to_owned(),
        transaction_id: tx.to_owned(),
        files: files
            .iter()
            .map(|(p, b)| ActiveWriteFile {
                path: p.clone(),
                content_base64: b.to_vec().into(),
            })
            .collect(),
    }
}

/// A caller that aborts at the dispatch marker.
struct Abort;

#[async_trait]
impl DispatchMarker for Abort {
    async fn dispatch(&self, _transaction_id: &str) -> Result<(), SandboxError> {
        Err(SandboxError::failed(
            op::BEGIN_ACTIVE_WRITE,
            checkfu_sandbox_contract::FailureReason::InvalidRequest,
            "the conformance caller aborts the open transaction",
        ))
    }
}

/// The files' contents now (`None`: absent).
async fn contents(ctx: &Ctx, id: &str, paths: &[String]) -> Step<Vec<Option<Vec<u8>>>> {
    let mut out = Vec::new();
    for p in paths {
        match ctx.adapter.read_file(id, p, 1 << 20).await {
            Ok(b) => out.push(Some(b)),
            Err(f) => match f.error() {
                SandboxError::SandboxOperationFailed { reason, .. }
                    if reason.as_str() == "not_found" =>
                {
                    out.push(None)
                }
                _ => return Err(op_failed(&format!("read {p}"), f)),
            },
        }
    }
    Ok(out)
}

fn show(v: &[Option<Vec<u8>>]) -> String {
    let parts: Vec<String> = v
        .iter()
        .map(|c| match c {
            Some(b) => format!("{:?}", text(b)),
            None => "absent".into(),
        })
        .collect();
    parts.join(", ")
}

async fn expect_files(
    ctx: &Ctx,
    id: &str,
    name: &str,
    paths: &[String],
    want: &[Option<&[u8]>],
) -> Step<()> {
    let got = contents(ctx, id, paths).await?;
    let want: Vec<Option<Vec<u8>>> = want.iter().map(|w| w.map(<[u8]>::to_vec)).collect();
    ensure(got == want, name, || {
        format!("{paths:?}: expected {}, actual {}", show(&want), show(&got))
    })
}

fn zdr_refusal(f: &SandboxFailure) -> bool {
    matches!(
        f.error(),
        SandboxError::SandboxCapabilityUnavailable {
            requirement: Requirement::ActiveMountWrite,
            ..
        }
    )
}

/// Runs the beginActiveWrite checks on a fresh instance with `retention`;
/// nothing when the envelope does not declare `active_mount_write`.
pub(super) async fn exercise(ctx: &Ctx, retention: RetentionMode) -> Step<()> {
    if !ctx.adapter.envelope().active_mount_write {
        return Ok(());
    }
    let profile = ctx.profile(retention, NetworkPolicy::None);
    let mounts = vec![
        mount("/aw", MountAccess::ReadWrite),
        mount(DEEP, MountAccess::ReadWrite),
    ];
    let inst = ctx
        .provision(
            "active write: provision",
            ctx.request("session-active-write", profile, mounts, 3600),
        )
        .await?;
    let id = inst.instance_id.as_str();
    let (a, b) = (deep("a.txt"), deep("b.txt"));
    step(
        "active write: stage a.txt",
        ctx.adapter.write_file(id, &a, b"old a\n".to_vec()),
    )
    .await?;
    step(
        "active write: stage b.txt",
        ctx.adapter.write_file(id, &b, b"old b\n".to_vec()),
    )
    .await?;
    step("active write: activate", ctx.adapter.activate(id)).await?;
    let ab = [a.clone(), b.clone()];
    let token = fresh_token("tx");

    // One batch, all new, into the deepest owning mount.
    let tx1 = format!("tx-commit-{token}");
    let first = batch(
        id,
        &tx1,
        &[(a.clone(), b"new a\n"), (b.clone(), b"new b\n")],
    );
    const COMMIT: &str = "active write: commit a batch";
    let outcome = match ctx.adapter.begin_active_write(first.clone()).await {
        Err(f) if retention == RetentionMode::EphemeralZdr && zdr_refusal(&f) => {
            // A durable journal refuses ZDR before accepting a body.
            expect_files(
                ctx,
                id,
                "active write: a refused ZDR transaction publishes nothing",
                &ab,
                &[Some(b"old a\n"), Some(b"old b\n")],
            )
            .await?;
            return destroy(ctx, id).await;
        }
        Err(f) => return Err(op_failed(COMMIT, f)),
        Ok(o) => o,
    };
    ensure(
        !(retention == RetentionMode::EphemeralZdr && ctx.target.active_write_journal_durable()),
        "active write: ephemeral_zdr with a durable journal",
        || {
            format!("expected SandboxCapabilityUnavailable{{active_mount_write}} before any body, actual {}", outcome.kind())
        },
    )?;
    ensure(
        matches!(outcome, ActiveWriteOutcome::Committed { .. }),
        COMMIT,
        || format!("expected committed, actual {outcome:?}"),
    )?;
    expect_files(ctx, id, COMMIT, &ab, &[Some(b"new a\n"), Some(b"new b\n")]).await?;

    // Redelivery: the same outcome, nothing published again.
    ctx.run_ok(
        "active write: the workload edits a.txt",
        id,
        cmd(&["cp", &b, &a]),
    )
    .await?;
    const REDELIVER: &str = "active write: redeliver the committed batch";
    let again = step(REDELIVER, ctx.adapter.begin_active_write(first)).await?;
    ensure(again == outcome, REDELIVER, || {
        format!("expected {outcome:?}, actual {again:?}")
    })?;
    expect_files(
        ctx,
        id,
        REDELIVER,
        &ab,
        &[Some(b"new b\n"), Some(b"new b\n")],
    )
    .await?;

    // A caller that aborts at the marker: rolled back, all old.
    const ABORT: &str = "active write: the caller aborts at the dispatch marker";
    let aborted = step(
        ABORT,
        ctx.adapter.begin_active_write_with(
            batch(
                id,
                &format!("tx-abort-{token}"),
                &[(a.clone(), b"aborted a\n"), (b.clone(), b"aborted b\n")],
            ),
            Arc::new(Abort),
        ),
    )
    .await?;
    ensure(
        matches!(aborted, ActiveWriteOutcome::RolledBack { .. }),
        ABORT,
        || format!("expected rolled_back, actual {aborted:?}"),
    )?;
    expect_files(ctx, id, ABORT, &ab, &[Some(b"new b\n"), Some(b"new b\n")]).await?;

    // A batch that cannot be published whole: every file stays old.
    const PARTIAL: &str = "active write: a batch failing mid-publication";
    let c = deep("c.txt");
    let failing = batch(
        id,
        &format!("tx-fail-{token}"),
        &[
            (c.clone(), b"c\n"),
            (b.clone(), b"b again\n"),
            (format!("{a}/under-a-file"), b"x\n"),
        ],
    );
    match ctx.adapter.begin_active_write(failing).await {
        Ok(ActiveWriteOutcome::RolledBack { .. }) => {}
        Ok(other) => {
            return Err(fail(
                PARTIAL,
                format!("expected rolled_back (a parent is a file), actual {other:?}"),
            ))
        }
        Err(f) if !matches!(f.error(), SandboxError::SandboxProtocolInvalid { .. }) => {}
        Err(f) => return Err(op_failed(PARTIAL, f)),
    }
    expect_files(
        ctx,
        id,
        PARTIAL,
        &[a.clone(), b.clone(), c.clone()],
        &[Some(b"new b\n"), Some(b"new b\n"), None],
    )
    .await?;

    // A pre-existing pause is not the provider's to resume.
    if let Some(paused) = ctx.target.pause_workload(id).await {
        const PAUSE: &str = "active write: a pre-existing pause survives the transaction";
        paused.map_err(|e| fail(PAUSE, e.to_string()))?;
        let d = deep("d.txt");
        let result = ctx
            .adapter
            .begin_active_write(batch(
                id,
                &format!("tx-paused-{token}"),
                &[(d.clone(), b"d\n")],
            ))
            .await;
        let still = ctx.target.workload_paused(id).await;
        let unpaused = ctx.target.unpause_workload(id).await;
        let outcome = result.map_err(|f| op_failed(PAUSE, f))?;
        ensure(
            matches!(outcome, ActiveWriteOutcome::Committed { .. }),
            PAUSE,
            || format!("expected committed, actual {outcome:?}"),
        )?;
        match still {
            Some(Ok(true)) | None => {}
            Some(Ok(false)) => {
                return Err(fail(
                    PAUSE,
                    "expected the workload still paused, actual resumed by the provider",
                ))
            }
            Some(Err(e)) => return Err(fail(PAUSE, e.to_string())),
        }
        if let Some(Err(e)) = unpaused {
            return Err(fail(PAUSE, e.to_string()));
        }
        expect_files(ctx, id, PAUSE, &[d], &[Some(b"d\n")]).await?;
    }

    // The workload runs again and sees the published files.
    let r = ctx
        .run_ok(
            "active write: the workload runs after the transactions",
            id,
            cmd(&["cat", &b]),
        )
        .await?;
    ensure(
        r.stdout_base64.as_slice() == b"new b\n",
        "active write: the workload sees the batch",
        || {
            format!(
                "expected \"new b\\n\", actual {:?}",
                text(r.stdout_base64.as_slice())
            )
        },
    )?;
    destroy(ctx, id).await
}

async fn destroy(ctx: &Ctx, id: &str) -> Step<()> {
    step("active write: destroy", ctx.adapter.destroy(id)).await
}
