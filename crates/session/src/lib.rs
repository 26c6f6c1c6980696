//! One sandbox session, from selection to release, through the runtime.
//!
//! [`RunPlan`] is what a session needs, checked before anything is
//! provisioned ([`RunPlan::check`]); [`run`] selects the provider's
//! adapter, pins the image, provisions, stages the mounts (host folders or
//! Git revisions, copied through writeFile), activates, runs the workload
//! (execute, or openProcess with the one-shot driver when a prompt is
//! given), copies the output tree out ([`outputs::copy_outputs`]), and
//! releases (a durable run settles a snapshot) and destroys. Progress is
//! reported as [`Event`]s to an [`Observer`]; the caller prints them.
//!
//! Cancellation is a [`CancellationToken`](tokio_util::sync::CancellationToken):
//! once it fires the flow is dropped, provider calls in flight are let
//! settle (their handoffs are rolled back by the runtime, decision 009)
//! and the instance is destroyed before [`run`] returns
//! [`SessionError::Cancelled`].
//!
//! A durable run's outcome carries a [`Checkpoint`] (the settled snapshot
//! and what resuming it needs); [`RunPlan::resume`] runs the workload in a
//! fresh instance resumed from one instead of a provisioned one, and a
//! [`CheckpointStore`] keeps them across processes.
//!
//! Every provider call goes through the runtime's `Adapter`; this crate
//! never calls a provider member itself.

pub mod checkpoints;
mod error;
pub mod host_write;
pub mod outputs;
mod plan;
mod session;

pub use checkpoints::{Checkpoint, CheckpointStore, CHECKPOINT_REVISION};
pub use error::SessionError;
pub use host_write::{output_ceiling_bytes, DEFAULT_OUTPUT_MAX_BYTES, OUTPUT_MAX_BYTES_ENV};
pub use outputs::{Changed, CopyReport, OverBudget, Skipped};
pub use plan::{MountPlan, MountSource, RunPlan};
pub use session::{
    exit_status, host_platform, profile, run, signal_number, snapshot_deadline, Event, Observer,
    RunOutcome, DEFAULT_PIDS, EXIT_TIMED_OUT, EXPIRY_SLACK_SECONDS, PROGRESS_FROM_FILES,
    SNAPSHOT_MIN_SECONDS, SNAPSHOT_RETENTION_SECONDS,
};
