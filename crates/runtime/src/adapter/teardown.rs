//! Teardown: destroy (serialized with the lifecycle calls in flight),
//! destroySnapshot and cleanup.

use super::*;

impl Adapter {
    /// destroy: idempotent teardown, in any state, passed through even for
    /// an id the runtime does not hold (a lost response).
    ///
    /// Serialized with the other lifecycle calls on a held instance: a
    /// destroy waits for an activate, snapshot, release or
    /// beginActiveWrite in flight (and its rollback) to settle, then holds
    /// the instance itself, so those calls are refused while it runs. It
    /// waits rather than refuses because teardown must always be possible;
    /// a caller bounds the wait as it bounds the destroy.
    ///
    /// # Errors
    /// The provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: dropped while waiting for a call
    /// in flight, nothing was claimed; dropped during the provider's destroy,
    /// that call is dropped half-way, the in-flight marker is released and the
    /// record keeps its state. destroy is idempotent, so a repeat finishes the
    /// teardown.
    pub async fn destroy(&self, instance_id: &str) -> Res<()> {
        let _mark = self.claim_for_destroy(instance_id).await;
        self.provider()
            .destroy(DestroyRequest {
                instance_id: instance_id.to_owned(),
            })
            .await
            .map_err(|e| self.admit_error(op::DESTROY, e))?;
        self.set_state(instance_id, RecordState::Destroyed);
        Ok(())
    }

    /// Waits until no serialized call is in flight on a held instance,
    /// then marks the destroy in flight; `None` for an instance the
    /// runtime does not hold live (passed through unserialized).
    async fn claim_for_destroy(&self, instance_id: &str) -> Option<Arc<InFlight>> {
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let mut book = self.records();
                let rec = book.live.get_mut(instance_id)?;
                if rec.in_flight.is_none() {
                    rec.in_flight = Some(Member::Destroy);
                    drop(book);
                    return Some(Arc::new(InFlight {
                        shared: self.shared.clone(),
                        claim: Claim::Instance(instance_id.to_owned()),
                    }));
                }
            }
            idle.await;
        }
    }

    /// destroySnapshot: idempotent teardown of one snapshot.
    ///
    /// # Errors
    /// The provider's error.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: the provider's destroySnapshot is
    /// dropped with the future and may stop half-way; it is idempotent, so a
    /// repeat finishes it.
    pub async fn destroy_snapshot(&self, snapshot_id: &str) -> Res<()> {
        self.provider()
            .destroy_snapshot(DestroySnapshotRequest {
                snapshot_id: snapshot_id.to_owned(),
            })
            .await
            .map_err(|e| self.admit_error(op::DESTROY_SNAPSHOT, e))?;
        self.records().snapshot_deadlines.remove(snapshot_id);
        Ok(())
    }

    /// cleanup: sweep orphans before `orphaned_before`; pinned snapshots are
    /// exempt from the cutoff but never from their own expiry.
    ///
    /// # Errors
    /// `invalid_request` for `orphaned_before` after `now` or more than
    /// 1,024 pins; the provider's error; `SandboxProtocolInvalid{cleanup}`
    /// for a repeated id.
    ///
    /// # Cancel safety
    /// Not cancel-safe, and safe to repeat: the provider's sweep is dropped
    /// with the future and may have removed some orphans and not others; the
    /// next cleanup removes the rest.
    pub async fn cleanup(
        &self,
        now: Timestamp,
        orphaned_before: Timestamp,
        pinned_snapshots: Vec<String>,
    ) -> Res<CleanupResult> {
        let request = admit_cleanup(now, orphaned_before, pinned_snapshots)?;
        let pins: HashSet<String> = request.pinned_snapshots.iter().cloned().collect();
        let result = self
            .provider()
            .cleanup(request)
            .await
            .map_err(|e| self.admit_error(op::CLEANUP, e))?;
        for (field, ids) in [
            ("instances", &result.instances),
            ("snapshots", &result.snapshots),
        ] {
            if let Some(dup) = first_repeat(ids.iter().map(String::as_str)) {
                return Err(SandboxError::protocol(
                    op::CLEANUP,
                    field,
                    "each id once",
                    format!("{dup} repeated"),
                )
                .into());
            }
        }
        let mut book = self.records();
        for id in result.snapshots.iter().filter(|id| pins.contains(*id)) {
            if let Some(expires_at) = book.snapshot_deadlines.get(id).filter(|t| **t > now) {
                return Err(SandboxError::protocol(
                    op::CLEANUP,
                    "snapshots",
                    format!("the pinned snapshot {id} kept until its expires_at {expires_at}"),
                    format!("{id} swept at {now}"),
                )
                .into());
            }
        }
        for id in &result.snapshots {
            book.snapshot_deadlines.remove(id);
        }
        book.snapshot_deadlines.retain(|_, t| *t > now);
        for id in &result.instances {
            book.set_state(id, RecordState::Destroyed);
        }
        drop(book);
        Ok(result)
    }
}
