//! Figure 8: the wire seam's overhead on the memory oracle.

use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::{Adapter, SandboxRuntime};

use crate::catalogue::{FIG_8A, FIG_8A_DIFF, FIG_8B};
use crate::common::{f, fail, request, true_cmd};
use crate::stats::{time, Row, Stat, Unit};

/// A runtime adapter over `provider`, with one active instance.
pub(crate) async fn active(
    provider: Arc<dyn SandboxProvider>,
) -> Result<(SandboxRuntime, Adapter, String), String> {
    let clock = Arc::new(SystemClock);
    let mut rt = SandboxRuntime::new(clock.clone());
    let id = provider.provider_id().to_owned();
    rt.register(provider);
    let adapter = rt.adapter(&id).map_err(f)?;
    let image = ImageReference::parse(&format!("bench@sha256:{}", "0".repeat(64)))
        .map_err(fail("image"))?;
    let req = request(
        &adapter,
        &image,
        RetentionMode::EphemeralZdr,
        vec![],
        3600,
        clock.as_ref(),
    );
    let inst = adapter.provision(req).await.map_err(f)?;
    adapter.activate(&inst.instance_id).await.map_err(f)?;
    Ok((rt, adapter, inst.instance_id))
}

/// Reads a process's stdout to its end and waits for its exit; the bytes read.
pub(crate) async fn drain(adapter: &Adapter, id: &str, bytes: u64) -> Result<u64, String> {
    use futures_util::AsyncReadExt;
    let mut p = adapter
        .open_process(SandboxProcessRequest {
            instance_id: id.into(),
            executable: "head".into(),
            arguments: vec!["-c".into(), bytes.to_string(), "/dev/zero".into()],
            working_directory: "/".into(),
            environment: Default::default(),
        })
        .await
        .map_err(f)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = p.output.read(&mut buf).await.map_err(fail("stdout"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    p.handle.wait().await.map_err(|e| e.to_string())?;
    if total != bytes {
        return Err(format!(
            "openProcess stdout: expected {bytes} bytes, actual {total}"
        ));
    }
    Ok(total)
}

/// Figure 8: the wire seam's cost on the memory oracle, served by this
/// binary over stdio, against the same oracle in process; both through
/// the runtime.
pub(crate) async fn figure8(reps: usize, rows: &mut Vec<Row>) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(fail("current_exe"))?;
    let mut command = tokio::process::Command::new(exe);
    command.arg("--serve-memory");
    let client = checkfu_sandbox_wire::WireClient::spawn(
        command,
        checkfu_sandbox_wire::WireOptions::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let (_wrt, wire, wire_id) = active(Arc::new(client.clone())).await?;
    let (_lrt, local, local_id) = active(Arc::new(MemoryProvider::with_system_clock())).await?;
    let ours = time(reps, || async {
        wire.execute(&wire_id, true_cmd()).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        local.execute(&local_id, true_cmd()).await.map_err(f)
    })
    .await?;
    rows.push(Row {
        figure: FIG_8A.into(),
        ours,
        baseline: Some(("in-process provider".into(), base)),
    });
    rows.push(Row {
        figure: FIG_8A_DIFF.into(),
        ours: Stat {
            median: ours.median - base.median,
            p10: ours.p10 - base.p10,
            p90: ours.p90 - base.p90,
            n: ours.n,
            unit: Unit::Seconds,
        },
        baseline: None,
    });
    const BYTES: u64 = 64 << 20;
    let stream_reps = (reps / 100).clamp(3, 10);
    let ours = time(stream_reps, || drain(&wire, &wire_id, BYTES)).await?;
    let base = time(stream_reps, || drain(&local, &local_id, BYTES)).await?;
    let mib_s = |s: &Stat| BYTES as f64 / (1 << 20) as f64 / s.median;
    eprintln!(
        "figure 8b: openProcess stdout {:.0} MiB/s over the wire, {:.0} MiB/s in process",
        mib_s(&ours),
        mib_s(&base)
    );
    rows.push(Row {
        figure: FIG_8B.into(),
        ours,
        baseline: Some(("in-process provider".into(), base)),
    });
    wire.destroy(&wire_id).await.map_err(f)?;
    local.destroy(&local_id).await.map_err(f)?;
    client.close().await;
    Ok(())
}
