//! The oracle's beginActiveWrite journal (spec "beginActiveWrite has an
//! explicit ownership handoff"): the marker's place, caller-owned open
//! journals, pause tokens and the durable-journal ZDR refusal.

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::{FsNode, MemoryProvider};
use common::*;

fn tx(id: &str, tx: &str, files: &[(&str, &[u8])]) -> ActiveWriteRequest {
    ActiveWriteRequest {
        instance_id: id.into(),
        transaction_id: tx.into(),
        files: files
            .iter()
            .map(|(p, b)| ActiveWriteFile {
                path: (*p).into(),
                content_base64: Bytes(b.to_vec()),
            })
            .collect(),
    }
}

/// What the oracle showed at the marker: the file, the journals and the
/// pause state.
type AtMarker = (Option<FsNode>, Vec<String>, Option<bool>);

/// Records what the oracle showed at the marker.
struct Observe {
    p: MemoryProvider,
    id: String,
    seen: Mutex<Option<AtMarker>>,
    abort: bool,
}

#[async_trait]
impl DispatchMarker for Observe {
    async fn dispatch(&self, _t: &str) -> Result<(), SandboxError> {
        *self.seen.lock().unwrap() = Some((
            self.p.node(&self.id, "/data/rw/a"),
            self.p.open_journals(&self.id).unwrap(),
            self.p.workload_paused(&self.id),
        ));
        if self.abort {
            Err(SandboxError::failed(
                Operation::Member(Member::BeginActiveWrite),
                FailureReason::InvalidRequest,
                "abort",
            ))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn the_marker_comes_while_the_journal_is_open_and_nothing_is_published() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    let marker = Arc::new(Observe {
        p: p.clone(),
        id: id.clone(),
        seen: Mutex::new(None),
        abort: false,
    });
    let out = p
        .begin_active_write()
        .unwrap()
        .begin_active_write(ActiveWriteTransaction::new(
            tx(&id, "t1", &[("/data/rw/a", b"new")]),
            marker.clone(),
        ))
        .await
        .unwrap();
    assert!(matches!(out, ActiveWriteOutcome::Committed { .. }));
    let (file, journals, paused) = marker.seen.lock().unwrap().clone().unwrap();
    assert_eq!(file, None, "published before the marker");
    assert_eq!(journals, vec!["t1".to_string()]);
    assert_eq!(paused, Some(false), "paused before dispatch");
    assert_eq!(
        p.node(&id, "/data/rw/a"),
        Some(FsNode::File(b"new".to_vec()))
    );
    assert_eq!(p.open_journals(&id), Some(vec![]));
    assert_eq!(p.workload_paused(&id), Some(false));
}

#[tokio::test]
async fn an_abort_at_the_marker_discards_the_journal_and_settles_rolled_back() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    let marker = Arc::new(Observe {
        p: p.clone(),
        id: id.clone(),
        seen: Mutex::new(None),
        abort: true,
    });
    let member = p.begin_active_write().unwrap();
    let req = tx(&id, "t1", &[("/data/rw/a", b"new")]);
    let out = member
        .begin_active_write(ActiveWriteTransaction::new(req.clone(), marker))
        .await
        .unwrap();
    assert!(
        matches!(out, ActiveWriteOutcome::RolledBack { .. }),
        "{out:?}"
    );
    assert_eq!(p.node(&id, "/data/rw/a"), None);
    assert_eq!(p.open_journals(&id), Some(vec![]));
    // The settled outcome is the outcome of a redelivery.
    let again = member
        .begin_active_write(ActiveWriteTransaction::proceeding(req))
        .await
        .unwrap();
    assert!(matches!(again, ActiveWriteOutcome::RolledBack { .. }));
}

/// A caller that stops observing before the marker (its future dropped
/// while the marker waits) leaves an open journal; another transaction
/// never rolls it back, and a redelivery of it restages and commits.
#[tokio::test]
async fn another_transactions_open_journal_is_never_rolled_back() {
    struct Never;
    #[async_trait]
    impl DispatchMarker for Never {
        async fn dispatch(&self, _t: &str) -> Result<(), SandboxError> {
            std::future::pending().await
        }
    }
    let (p, _) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    let member = p.begin_active_write().unwrap();
    let first = tx(&id, "t-open", &[("/data/rw/a", b"first")]);
    let abandoned =
        member.begin_active_write(ActiveWriteTransaction::new(first.clone(), Arc::new(Never)));
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), abandoned)
            .await
            .is_err()
    );
    assert_eq!(p.open_journals(&id), Some(vec!["t-open".to_string()]));
    let other = member
        .begin_active_write(ActiveWriteTransaction::proceeding(tx(
            &id,
            "t-other",
            &[("/data/rw/b", b"b")],
        )))
        .await
        .unwrap();
    assert!(matches!(other, ActiveWriteOutcome::Committed { .. }));
    assert_eq!(p.open_journals(&id), Some(vec!["t-open".to_string()]));
    assert_eq!(p.node(&id, "/data/rw/a"), None);
    let redelivered = member
        .begin_active_write(ActiveWriteTransaction::proceeding(first))
        .await
        .unwrap();
    assert!(matches!(redelivered, ActiveWriteOutcome::Committed { .. }));
    assert_eq!(
        p.node(&id, "/data/rw/a"),
        Some(FsNode::File(b"first".to_vec()))
    );
    assert_eq!(p.open_journals(&id), Some(vec![]));
}

#[tokio::test]
async fn a_pre_existing_pause_is_neither_issued_nor_resumed() {
    let (p, _) = provider();
    let id = active(&p, RetentionMode::Durable).await;
    p.pause_workload(&id);
    let out = p
        .begin_active_write()
        .unwrap()
        .begin_active_write(ActiveWriteTransaction::proceeding(tx(
            &id,
            "t",
            &[("/data/rw/a", b"x")],
        )))
        .await
        .unwrap();
    assert!(matches!(out, ActiveWriteOutcome::Committed { .. }));
    assert_eq!(p.workload_paused(&id), Some(true));
    p.unpause_workload(&id);
    assert_eq!(p.workload_paused(&id), Some(false));
}

#[tokio::test]
async fn a_durable_journal_refuses_zdr_before_any_body_and_accepts_durable() {
    let p = MemoryProvider::builder()
        .manual_clock(clock())
        .durable_journal(true)
        .build();
    assert!(p.journal_on_durable_storage());
    let zdr = active(&p, RetentionMode::EphemeralZdr).await;
    let e = p
        .begin_active_write()
        .unwrap()
        .begin_active_write(ActiveWriteTransaction::proceeding(tx(
            &zdr,
            "t",
            &[("/data/rw/a", b"x")],
        )))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            SandboxError::SandboxCapabilityUnavailable {
                requirement: Requirement::ActiveMountWrite,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(p.open_journals(&zdr), Some(vec![]));
    assert_eq!(p.node(&zdr, "/data/rw/a"), None);
    let durable = active(&p, RetentionMode::Durable).await;
    let ok = p
        .begin_active_write()
        .unwrap()
        .begin_active_write(ActiveWriteTransaction::proceeding(tx(
            &durable,
            "t",
            &[("/data/rw/a", b"x")],
        )))
        .await
        .unwrap();
    assert!(matches!(ok, ActiveWriteOutcome::Committed { .. }));
}
