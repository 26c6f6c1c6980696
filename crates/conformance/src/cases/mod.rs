//! The nine cases, one module each. Each drives the provider only through
//! the runtime and only with the probe vocabulary (DESIGN D15), and asserts
//! what the spec says the case proves.

mod active_write;
mod allowlist_egress;
mod checkpoint_clone;
mod durable_round_trip;
mod none_egress;
mod orphan_reclaim;
mod pause_pinning;
mod stage_git_project;
mod stage_seal_execute;
mod zdr_release;

/// What every case module uses.
mod prelude {
    pub(super) use std::time::Duration;

    pub(super) use checkfu_sandbox_contract::bounds::OUTPUT_PATH;
    pub(super) use checkfu_sandbox_contract::{
        ControlSignal, ExitCause, MountAccess, NetworkDestination, NetworkPolicy, OutputStream,
        ProcessExit, ProjectEntryKind, ReadFileOutcome, ReadFilesEntry, ReleaseDisposition,
        RetentionMode, SandboxError, SandboxMount, SandboxProcessRequest,
    };
    pub(super) use checkfu_sandbox_runtime::staging::{sha256_digest, stage_git, GitMode};
    pub(super) use futures_util::io::{AsyncReadExt, AsyncWriteExt};

    pub(super) use super::{egress_probe, mount, output, positive_control, text};
    pub(super) use crate::context::{
        cmd, cmd_stdin, ensure, fail, fresh_token, op_failed, step, Ctx, Step,
    };
}

use prelude::*;

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
        "stage-seal-execute" => stage_seal_execute::run(ctx).await,
        "stage-git-project" => stage_git_project::run(ctx).await,
        "checkpoint-clone" => checkpoint_clone::run(ctx).await,
        "allowlist-egress" => allowlist_egress::run(ctx).await,
        "durable-round-trip" => durable_round_trip::run(ctx).await,
        "none-egress" => none_egress::run(ctx).await,
        "zdr-release" => zdr_release::run(ctx).await,
        "orphan-reclaim" => orphan_reclaim::run(ctx).await,
        "pause-pinning" => pause_pinning::run(ctx).await,
        other => Err(fail("select case", format!("unknown case {other}"))),
    }
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
