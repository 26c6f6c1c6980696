//! Recovery: dispatched journals rolled back from their evidence,
//! committed ones finished forward, open ones left to their callers,
//! inherited pause tokens taken over and released.

use std::path::Path;

use checkfu_sandbox_contract::*;

use super::journal::{self, Dirs, Journal, JournalState, PauseToken};
use super::publish::{self, Target};
use super::transaction::unpause;
use super::{blocking, failed, ActiveWriteHost, ActiveWriteInstance, ActiveWriteRecovery, Flight};

/// Rolls a dispatched journal back or finishes a committed one; the
/// journal is settled afterwards. Open and settled journals are left
/// (`Ok(None)`).
pub(super) fn recover_journal(
    mount_root: &Path,
    dir: &Path,
    mut j: Journal,
) -> Result<Option<Journal>, String> {
    match j.state {
        JournalState::Open | JournalState::Settled => return Ok(None),
        JournalState::Dispatched => {
            let targets = j
                .paths
                .iter()
                .map(|p| Target::new(p, &j.mount_path))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(existed) = &j.existed {
                publish::roll_back(mount_root, dir, &targets, existed)?;
            }
            j.outcome = Some(ActiveWriteOutcome::RolledBack {
                transaction_id: j.transaction_id.clone(),
                reason: "rolled back from its evidence after an interrupted dispatch".into(),
            });
        }
        JournalState::Committed => {}
    }
    journal::remove_tree(&journal::staged(dir))?;
    journal::remove_tree(&journal::rollback(dir))?;
    j.state = JournalState::Settled;
    journal::write(dir, &j)?;
    Ok(Some(j))
}

/// Recovers every transaction of one instance that no call of this
/// process is working on, then any pause token.
async fn recover_instance<H: ActiveWriteHost + ?Sized>(
    host: &H,
    rec: &ActiveWriteInstance,
    report: &mut ActiveWriteRecovery,
) -> Result<(), SandboxError> {
    let id = rec.instance_id.clone();
    let dirs = Dirs::new(host.journal_root(&id));
    let d = dirs.clone();
    let layout = host.layout().clone();
    let rec2 = rec.clone();
    let done = blocking(move || -> Result<Vec<Journal>, String> {
        let mut out = Vec::new();
        for dir in journal::transactions(&d)? {
            if Flight::busy(&dir) {
                continue;
            }
            let Some(j) = journal::read(&dir)? else {
                continue;
            };
            if rec2.request.mounts.get(j.mount_index).is_none() {
                return Err(format!(
                    "journal {} names no mount {}",
                    dir.display(),
                    j.mount_index
                ));
            }
            let root = layout.mount_dir(&rec2.instance_id, j.mount_index);
            let before = j.state;
            if let Some(settled) = recover_journal(&root, &dir, j)? {
                out.push(Journal {
                    state: before,
                    ..settled
                });
            }
        }
        Ok(out)
    })
    .await?
    .map_err(failed)?;
    for j in done {
        let entry = (id.clone(), j.transaction_id.clone());
        if j.state == JournalState::Dispatched {
            report.rolled_back.push(entry);
        } else {
            report.finished.push(entry);
        }
    }
    if let Some(token) = journal::read_token(&dirs).map_err(failed)? {
        // Transfer the inherited token before clearing the predecessor's.
        let d = dirs.clone();
        let taken = PauseToken {
            holder: "recovery".into(),
            inherited_from: Some(token.holder),
        };
        blocking(move || journal::write_token(&d, &taken))
            .await?
            .map_err(failed)?;
        unpause(host, &id, &dirs).await.map_err(failed)?;
        report.unpaused.push(id);
    }
    Ok(())
}

/// Recovery of every instance of the provider behind `host` (the
/// instances of its state directory that [`ActiveWriteHost::instance`]
/// finds): dispatched journals rolled back from their evidence, committed
/// ones finished forward, open ones left to their callers, inherited pause
/// tokens taken over and released.
///
/// # Errors
///
/// `SandboxOperationFailed{begin_active_write, provider_error}` naming
/// what could not be recovered (the rest is still attempted first).
///
/// # Cancel safety
///
/// Each step is durable before the next, so a dropped call leaves work a
/// later call (or a redelivery) finishes.
pub async fn recover<H: ActiveWriteHost + ?Sized>(
    host: &H,
) -> Result<ActiveWriteRecovery, SandboxError> {
    let instances = host.layout().instances();
    let ids = blocking(move || -> Vec<String> {
        // The provider-owned state directory.
        #[allow(clippy::disallowed_methods)]
        let entries = match std::fs::read_dir(&instances) {
            Ok(e) => e,
            Err(_) => return Vec::new(),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        ids.sort();
        ids
    })
    .await?;
    let mut report = ActiveWriteRecovery::default();
    let mut errors = Vec::new();
    for id in ids {
        let Ok(rec) = host.instance(&id) else {
            continue;
        };
        if let Err(e) = recover_instance(host, &rec, &mut report).await {
            errors.push(format!("{id}: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(report)
    } else {
        Err(failed(format!(
            "active-write recovery: {}",
            errors.join("; ")
        )))
    }
}
