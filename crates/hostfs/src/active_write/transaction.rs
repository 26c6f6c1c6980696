//! One delivery of a transaction: refusals, an earlier delivery's journal,
//! staging, the dispatch marker, the pause, publication or rollback, and
//! the cleanup forward (steps 1–7 of the module documentation).

use std::path::Path;

use checkfu_sandbox_contract::active_write::batch_digest;
use checkfu_sandbox_contract::*;

use super::journal::{self, Dirs, Journal, JournalState, PauseToken, JOURNAL_REVISION};
use super::publish::{self, Target};
use super::recovery::recover_journal;
use super::{
    blocking, failed, owning_mount, ActiveWriteHost, ActiveWriteInstance, ActiveWriteStep, Flight,
};
use crate::store::{owner_of, Home};

fn refuse_other_batch(journal: &Journal, digest: &str) -> Result<(), SandboxError> {
    if journal.batch_digest == digest {
        Ok(())
    } else {
        Err(SandboxError::invalid_request(
            super::OP,
            "transaction_id",
            format!("a redelivery of batch {}", journal.batch_digest),
            format!("another batch {digest}"),
        ))
    }
}

/// Records the token (or takes over a predecessor's), then pauses.
/// `Ok(false)`: a pre-existing pause without a token, left alone.
async fn pause<H: ActiveWriteHost + ?Sized>(
    host: &H,
    id: &str,
    dirs: &Dirs,
    holder: &str,
) -> Result<bool, String> {
    let paused = host.workload_paused(id).await?.unwrap_or(false);
    let inherited = journal::read_token(dirs)?;
    if inherited.is_none() && paused {
        return Ok(false);
    }
    let token = PauseToken {
        holder: holder.to_owned(),
        inherited_from: inherited.map(|t| t.holder),
    };
    let d = dirs.clone();
    blocking(move || journal::write_token(&d, &token))
        .await
        .map_err(|e| e.to_string())??;
    if !paused {
        host.pause_workload(id)
            .await
            .map_err(|e| format!("pausing the workload: {e}"))?;
    }
    Ok(true)
}

/// Resumes the workload if it is paused, and only once that settled,
/// clears the token.
pub(super) async fn unpause<H: ActiveWriteHost + ?Sized>(
    host: &H,
    id: &str,
    dirs: &Dirs,
) -> Result<(), String> {
    if host.workload_paused(id).await? == Some(true) {
        host.unpause_workload(id)
            .await
            .map_err(|e| format!("unpausing the workload: {e}"))?;
    }
    let d = dirs.clone();
    blocking(move || journal::clear_token(&d))
        .await
        .map_err(|e| e.to_string())?
}

/// Settles an open or dispatched journal `rolled_back` with `reason`
/// before anything moved: the bodies go, the outcome stays.
async fn settle_unmoved(
    dir: &Path,
    j: &Journal,
    reason: String,
) -> Result<ActiveWriteOutcome, SandboxError> {
    let outcome = ActiveWriteOutcome::RolledBack {
        transaction_id: j.transaction_id.clone(),
        reason,
    };
    let (d, mut jj) = (dir.to_path_buf(), j.clone());
    jj.state = JournalState::Settled;
    jj.outcome = Some(outcome.clone());
    blocking(move || -> Result<(), String> {
        journal::remove_tree(&journal::staged(&d))?;
        journal::remove_tree(&journal::rollback(&d))?;
        journal::write(&d, &jj)
    })
    .await?
    .map_err(failed)?;
    Ok(outcome)
}

/// Steps 6 and 7, or the rollback; the token is released either way.
async fn publish<H: ActiveWriteHost + ?Sized>(
    host: &H,
    rec: &ActiveWriteInstance,
    dirs: &Dirs,
    dir: &Path,
    mut j: Journal,
    ours: bool,
) -> Result<ActiveWriteOutcome, SandboxError> {
    let id = rec.instance_id.clone();
    let root = host.layout().mount_dir(&id, j.mount_index);
    let owner = owner_of(&rec.request, Home::Mount(j.mount_index));
    let targets = j
        .paths
        .iter()
        .map(|p| Target::new(p, &j.mount_path))
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let (r, d) = (root.clone(), dir.to_path_buf());
    let (result, j_back, targets) = blocking(move || {
        let mut j = j;
        let existed = match publish::existed(&r, &targets, owner) {
            Ok(e) => e,
            Err(reason) => return (Err(reason), j, targets),
        };
        j.existed = Some(existed.clone());
        if let Err(e) = journal::write(&d, &j) {
            return (Err(e), j, targets);
        }
        for k in 0..targets.len() {
            if let Err(reason) = publish::publish_one(&r, &d, &targets, &existed, k) {
                return (Err(reason), j, targets);
            }
            if k == 0 {
                return (Ok(true), j, targets);
            }
        }
        (Ok(false), j, targets)
    })
    .await?;
    j = j_back;
    // The first move is done: the crash point, then the rest.
    let result = match result {
        Ok(true) => {
            host.reached(ActiveWriteStep::Dispatched);
            let (r, d) = (root.clone(), dir.to_path_buf());
            let existed = j.existed.clone().unwrap_or_default();
            blocking(move || {
                (1..targets.len())
                    .try_for_each(|k| publish::publish_one(&r, &d, &targets, &existed, k))
            })
            .await?
        }
        Ok(false) => Ok(()),
        Err(reason) => Err(reason),
    };
    let outcome = match result {
        Ok(()) => {
            let outcome = ActiveWriteOutcome::Committed {
                transaction_id: j.transaction_id.clone(),
                mount_path: j.mount_path.clone(),
                published: j.paths.clone(),
            };
            j.state = JournalState::Committed;
            j.outcome = Some(outcome.clone());
            let (d, jj) = (dir.to_path_buf(), j.clone());
            blocking(move || journal::write(&d, &jj))
                .await?
                .map_err(failed)?;
            host.reached(ActiveWriteStep::Committed);
            outcome
        }
        Err(reason) => {
            let (r, d, jj) = (root.clone(), dir.to_path_buf(), j.clone());
            blocking(move || -> Result<(), String> {
                let targets = jj
                    .paths
                    .iter()
                    .map(|p| Target::new(p, &jj.mount_path))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(existed) = &jj.existed {
                    publish::roll_back(&r, &d, &targets, existed)?;
                }
                Ok(())
            })
            .await?
            .map_err(failed)?;
            let outcome = ActiveWriteOutcome::RolledBack {
                transaction_id: j.transaction_id.clone(),
                reason,
            };
            j.outcome = Some(outcome.clone());
            outcome
        }
    };
    // Cleanup forward: evidence, settled, resume, token.
    let d = dir.to_path_buf();
    blocking(move || -> Result<(), String> {
        journal::remove_tree(&journal::staged(&d))?;
        journal::remove_tree(&journal::rollback(&d))?;
        j.state = JournalState::Settled;
        journal::write(&d, &j)
    })
    .await?
    .map_err(failed)?;
    if ours {
        unpause(host, &id, dirs).await.map_err(failed)?;
    }
    Ok(outcome)
}

/// One delivery of `transaction` to the provider behind `host` (the
/// module documentation lists its steps).
///
/// # Errors
///
/// Before the marker: `SandboxInstanceNotFound`, `SandboxLifecycleConflict`
/// (not `active`), `SandboxCapabilityUnavailable{active_mount_write}`
/// (`ephemeral_zdr`), `SandboxOperationFailed{begin_active_write}` naming
/// the refused path or the other batch of a reused `transaction_id`, or a
/// delivery of the same transaction already under way in this process.
/// After the marker a failure to publish is a `rolled_back` outcome; an
/// error then means the journal could not be settled (recovery finishes
/// it).
///
/// # Cancel safety
///
/// Not cancel safe past the marker: a dropped call leaves a dispatched
/// journal (and possibly a paused workload) that [`super::recover`] or a
/// redelivery settles. Callers run it to completion (the runtime does).
pub async fn begin<H: ActiveWriteHost + ?Sized>(
    host: &H,
    transaction: ActiveWriteTransaction,
) -> Result<ActiveWriteOutcome, SandboxError> {
    let request = transaction.request().clone();
    let rec = host.instance(&request.instance_id)?;
    if rec.state != InstanceState::Active {
        return Err(SandboxError::conflict(super::OP, "active", rec.state));
    }
    if rec.request.profile.retention == RetentionMode::EphemeralZdr {
        return Err(SandboxError::unavailable(
            Requirement::ActiveMountWrite,
            format!(
                "the {} provider's active-write journal keeps file bodies in its state \
                 directory on durable host storage; ephemeral_zdr transactions are refused",
                host.provider_name()
            ),
        ));
    }
    let mount_index = owning_mount(&request, &rec.request.mounts)?;
    let mount_path = rec.request.mounts[mount_index].path.clone();
    let digest = batch_digest(&request);
    let id = rec.instance_id.clone();
    let dirs = Dirs::new(host.journal_root(&id));
    let dir = dirs.transaction(&request.transaction_id);
    let Some(_flight) = Flight::take(&dir) else {
        return Err(failed(format!(
            "transaction {} is already being delivered",
            request.transaction_id
        )));
    };

    // A journal of this transaction from an earlier delivery.
    let (d, dg, root) = (
        dir.clone(),
        digest.clone(),
        host.layout().mount_dir(&id, mount_index),
    );
    let earlier = blocking(
        move || -> Result<Result<Option<ActiveWriteOutcome>, SandboxError>, String> {
            let Some(j) = journal::read(&d)? else {
                return Ok(Ok(None));
            };
            if let Err(e) = refuse_other_batch(&j, &dg) {
                return Ok(Err(e));
            }
            match j.state {
                JournalState::Open => {
                    // Its caller stopped observing before the marker: restage.
                    journal::remove_tree(&d)?;
                    Ok(Ok(None))
                }
                _ => {
                    let settled = match recover_journal(&root, &d, j.clone())? {
                        Some(s) => s,
                        None => j,
                    };
                    Ok(Ok(settled.outcome))
                }
            }
        },
    )
    .await?
    .map_err(failed)??;
    if let Some(outcome) = earlier {
        if journal::read_token(&dirs)
            .map_err(failed)?
            .is_some_and(|t| t.holder == request.transaction_id)
        {
            unpause(host, &id, &dirs).await.map_err(failed)?;
        }
        return Ok(outcome);
    }

    // Open: stage every body, then rename the journal into place.
    let j = Journal {
        journal_revision: JOURNAL_REVISION,
        transaction_id: request.transaction_id.clone(),
        batch_digest: digest,
        state: JournalState::Open,
        mount_index,
        mount_path,
        paths: request.files.iter().map(|f| f.path.clone()).collect(),
        existed: None,
        outcome: None,
    };
    let owner = owner_of(&rec.request, Home::Mount(mount_index));
    let (d, root_dir, jj) = (dir.clone(), dirs.root.clone(), j.clone());
    blocking(move || stage(&root_dir, &d, &jj, &request.files, owner))
        .await?
        .map_err(failed)?;
    host.reached(ActiveWriteStep::Staged);

    if let Err(e) = transaction.mark_dispatched().await {
        return settle_unmoved(
            &dir,
            &j,
            format!("the caller aborted the open transaction: {e}"),
        )
        .await;
    }
    host.reached(ActiveWriteStep::Marked);

    let mut j = j;
    j.state = JournalState::Dispatched;
    let (d, jj) = (dir.clone(), j.clone());
    blocking(move || journal::write(&d, &jj))
        .await?
        .map_err(failed)?;
    let ours = match pause(host, &id, &dirs, &j.transaction_id).await {
        Ok(ours) => ours,
        Err(reason) => {
            // The pause is ambiguous: nothing moved; settle rolled back
            // and release whatever token was recorded.
            let outcome = settle_unmoved(&dir, &j, reason).await?;
            unpause(host, &id, &dirs).await.map_err(failed)?;
            return Ok(outcome);
        }
    };
    publish(host, &rec, &dirs, &dir, j, ours).await
}

/// Writes the open journal: bodies and record in a temporary directory,
/// renamed into place.
fn stage(
    root: &Path,
    dir: &Path,
    j: &Journal,
    files: &[ActiveWriteFile],
    owner: Option<u32>,
) -> Result<(), String> {
    use std::io::Write as _;
    std::fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    let tmp = root.join(format!(
        "{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("tx"),
        std::process::id()
    ));
    journal::remove_tree(&tmp)?;
    let io = |e: std::io::Error| format!("staging in {}: {e}", tmp.display());
    std::fs::create_dir_all(journal::staged(&tmp)).map_err(io)?;
    std::fs::create_dir_all(journal::rollback(&tmp)).map_err(io)?;
    for (k, f) in files.iter().enumerate() {
        let path = journal::staged(&tmp).join(k.to_string());
        let mut file = std::fs::File::create(&path).map_err(io)?;
        file.write_all(f.content_base64.as_slice()).map_err(io)?;
        if let Some(uid) = owner {
            std::os::unix::fs::fchown(&file, Some(uid), Some(uid)).map_err(io)?;
        }
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    journal::sync_dir(&journal::staged(&tmp)).map_err(io)?;
    journal::write(&tmp, j)?;
    std::fs::rename(&tmp, dir)
        .map_err(|e| format!("opening the journal {}: {e}", dir.display()))?;
    journal::sync_dir(root).map_err(|e| e.to_string())
}
