//! Figure 1: the runtime's overhead over direct calls on the memory oracle.

use std::sync::Arc;

use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::MemoryProvider;
use checkfu_sandbox_runtime::SandboxRuntime;

use crate::catalogue::{FIG_1A, FIG_1B, FIG_1C};
use crate::common::{f, fail, request, true_cmd};
use crate::stats::{time, Row};

/// Figure 1: the runtime's validation against direct calls on the memory
/// oracle.
pub(crate) async fn figure1(reps: usize, rows: &mut Vec<Row>) -> Result<(), String> {
    let clock =
        ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").map_err(fail("clock"))?);
    let memory = MemoryProvider::new(clock.clone());
    let direct: Arc<dyn SandboxProvider> = Arc::new(memory.clone());
    let mut rt = SandboxRuntime::new(Arc::new(clock.clone()));
    rt.register(direct.clone());
    let adapter = rt.adapter("memory").map_err(f)?;
    let image = ImageReference::parse(&format!("bench@sha256:{}", "0".repeat(64)))
        .map_err(fail("image"))?;
    let req = request(
        &adapter,
        &image,
        RetentionMode::EphemeralZdr,
        vec![],
        3600,
        &clock,
    );
    let inst = adapter.provision(req.clone()).await.map_err(f)?;
    adapter.activate(&inst.instance_id).await.map_err(f)?;
    adapter
        .write_file(&inst.instance_id, "/mnt/session/outputs/f", vec![7u8; 1024])
        .await
        .map_err(f)?;
    let id = inst.instance_id.clone();

    let ours = time(reps, || async {
        adapter.execute(&id, true_cmd()).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        direct
            .execute(ExecuteRequest {
                instance_id: id.clone(),
                command: true_cmd(),
            })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: FIG_1A.into(),
        ours,
        baseline: Some(("direct provider call".into(), base)),
    });

    let ours = time(reps, || async {
        adapter
            .read_file(&id, "/mnt/session/outputs/f", 1 << 20)
            .await
            .map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        direct
            .read_file(ReadFileRequest {
                instance_id: id.clone(),
                path: "/mnt/session/outputs/f".into(),
                allowed_root: "/mnt/session/outputs".into(),
                maximum_bytes: 1 << 20,
            })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: FIG_1B.into(),
        ours,
        baseline: Some(("direct provider call".into(), base)),
    });

    let ours = time(reps, || async {
        let i = adapter.provision(req.clone()).await.map_err(f)?;
        adapter.activate(&i.instance_id).await.map_err(f)?;
        adapter.destroy(&i.instance_id).await.map_err(f)
    })
    .await?;
    let base = time(reps, || async {
        let h = direct
            .provision(req.clone())
            .await
            .map_err(|e| e.to_string())?;
        let id = h.value.instance_id.clone();
        direct
            .activate(ActivateRequest {
                instance_id: id.clone(),
            })
            .await
            .map_err(|e| e.to_string())?;
        direct
            .destroy(DestroyRequest { instance_id: id })
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    rows.push(Row {
        figure: FIG_1C.into(),
        ours,
        baseline: Some(("direct provider calls".into(), base)),
    });
    adapter.destroy(&id).await.map_err(f)?;
    Ok(())
}
