//! [`MemoryProvider`]: the eighteen members over per-instance in-memory
//! trees, a simulated network and a virtual clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::bounds::{
    CONTROL_ROOT, MAX_FILE_BYTES, MAX_OUTPUT_LIMIT_BYTES, OUTPUT_PATH,
};
use checkfu_sandbox_contract::provider::op;
use checkfu_sandbox_contract::*;
use sha2::{Digest as _, Sha256};
use tokio_util::compat::TokioAsyncReadCompatExt;

use crate::fault::{Fault, IdentityField};
use crate::fs::{is_within, split, Fs, FsNode, ReadRefusal, SpecialKind, WalkError};
use crate::image::base_environment;
use crate::probe::{step_jobs, Abort, Exec, NetView, Sink};
use crate::process::{
    cat_redirect_target, ignored_signals, spawn_child, Appender, CatSource, ChildPipes, Control,
    Plan, ProcessShared, PIPE_CAPACITY_BYTES,
};

mod active_write;
mod command;
mod faults;
mod handle;
mod jobs;
mod members;
mod required;
mod rollback;

use self::faults::corrupt_instance;
use self::rollback::{MemoryRollback, RollbackScope, Target};

/// The provider id every instance and snapshot of the oracle carries.
pub const PROVIDER_ID: &str = "memory";

/// The oracle's `provider_revision`; instances echo it in `materialization`.
pub const PROVIDER_REVISION: &str = "memory-oracle/1";

/// The oracle's `materialization_revision`; instances echo it in
/// `materialization`.
pub const MATERIALIZATION_REVISION: &str = "memory-materialization/1";

/// The repository a bare image ID `sha256:<hex>` pins to
/// (`checkfu-fixture@sha256:<hex>`): the fixture's, as the Docker provider
/// names the fixture image's ID.
pub const IMAGE_ID_REPOSITORY: &str = "checkfu-fixture";

/// Internal safety cap on one buffered execute stream, in bytes (64 MiB),
/// applied even if a caller passes an `output_limit_bytes` over the bound.
const SINK_SAFETY_CAP_BYTES: u64 = 4 * MAX_OUTPUT_LIMIT_BYTES;

/// Where simulated package materialization records each package:
/// `<root>/<manager>/<name>` holding the version.
pub const PACKAGE_RECORD_ROOT: &str = "/var/lib/checkfu/packages";

#[derive(Debug)]
struct InstanceRecord {
    request: SandboxProvisionRequest,
    state: InstanceState,
    created_at: Timestamp,
    fs: Fs,
    listeners: BTreeMap<u16, Vec<u8>>,
    processes: Vec<Arc<ProcessShared>>,
    /// beginActiveWrite journals, settled outcomes and the pause state.
    active_writes: active_write::ActiveWrites,
}

impl InstanceRecord {
    fn kill_processes(&self) {
        for p in &self.processes {
            p.kill(ControlSignal::Sigkill);
        }
    }
}

#[derive(Debug)]
struct SnapshotRecord {
    snapshot: SandboxSnapshot,
    fs: Fs,
}

#[derive(Debug, Default)]
struct State {
    next_instance: u64,
    next_snapshot: u64,
    instances: BTreeMap<String, InstanceRecord>,
    snapshots: BTreeMap<String, SnapshotRecord>,
    external: BTreeMap<(String, u16), Vec<u8>>,
}

impl State {
    fn instance_id(&mut self) -> String {
        self.next_instance += 1;
        format!("mem-inst-{:06}", self.next_instance)
    }

    fn snapshot_id(&mut self) -> String {
        self.next_snapshot += 1;
        format!("mem-snap-{:06}", self.next_snapshot)
    }

    fn destroy_instance(&mut self, id: &str) {
        if let Some(record) = self.instances.remove(id) {
            record.kill_processes();
        }
    }

    fn instance(&mut self, id: &str) -> Result<&mut InstanceRecord, SandboxError> {
        find(&mut self.instances, id)
    }
}

fn find<'a>(
    instances: &'a mut BTreeMap<String, InstanceRecord>,
    id: &str,
) -> Result<&'a mut InstanceRecord, SandboxError> {
    instances
        .get_mut(id)
        .ok_or_else(|| SandboxError::SandboxInstanceNotFound {
            instance_id: id.to_string(),
        })
}

#[derive(Debug)]
pub(crate) struct Inner {
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    faults: BTreeSet<Fault>,
    /// Simulates a beginActiveWrite journal on durable host storage.
    durable_journal: bool,
    /// Shared (weakly) with openProcess children that write into the tree.
    state: Arc<Mutex<State>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Moves virtual time: the manual clock when there is one, otherwise a
    /// real (tokio) sleep.
    async fn spend(&self, millis: u64) {
        if millis == 0 {
            return;
        }
        match &self.manual {
            Some(clock) => clock.advance_millis(millis),
            None => tokio::time::sleep(Duration::from_millis(millis)).await,
        }
    }
}

/// Builds a [`MemoryProvider`]: clock and faults.
///
/// # Examples
/// ```
/// use checkfu_sandbox_contract::{ManualClock, Timestamp};
/// use checkfu_sandbox_memory::{Fault, MemoryProvider};
///
/// let clock = ManualClock::new(Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap());
/// let provider = MemoryProvider::builder()
///     .manual_clock(clock)
///     .fault(Fault::SealIgnored)
///     .build();
/// assert_eq!(provider.faults_configured(), vec![Fault::SealIgnored]);
/// ```
#[derive(Debug, Default)]
pub struct MemoryProviderBuilder {
    clock: Option<Arc<dyn Clock>>,
    manual: Option<ManualClock>,
    faults: BTreeSet<Fault>,
    durable_journal: bool,
}

impl MemoryProviderBuilder {
    /// Uses a manual clock: reads it for every timestamp and advances it for
    /// `sleep` and timeouts (deterministic, no real waiting).
    pub fn manual_clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(Arc::new(clock.clone()));
        self.manual = Some(clock);
        self
    }

    /// Uses any clock; `sleep` and timeouts then wait in (tokio) real time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self.manual = None;
        self
    }

    /// Adds one fault.
    pub fn fault(mut self, fault: Fault) -> Self {
        self.faults.insert(fault);
        self
    }

    /// Adds faults.
    pub fn faults(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.faults.extend(faults);
        self
    }

    /// Simulates a beginActiveWrite journal that keeps file bodies on
    /// durable host storage: `ephemeral_zdr` transactions are then refused
    /// `SandboxCapabilityUnavailable{active_mount_write}` before any body is
    /// staged. Default: the journal is in memory only.
    pub fn durable_journal(mut self, durable: bool) -> Self {
        self.durable_journal = durable;
        self
    }

    /// The provider. Without a clock it uses the system clock.
    pub fn build(self) -> MemoryProvider {
        MemoryProvider {
            inner: Arc::new(Inner {
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                manual: self.manual,
                faults: self.faults,
                durable_journal: self.durable_journal,
                state: Arc::new(Mutex::new(State::default())),
            }),
        }
    }
}

/// The deterministic in-memory reference provider (DESIGN D17), provider id
/// [`PROVIDER_ID`].
///
/// Cloning is cheap and shares the provider. Every optional member is
/// present. Ids are counters (`mem-inst-000001`, `mem-snap-000001`), time is
/// the injected clock, and maps iterate in key order, so the same inputs
/// give the same bytes.
///
/// The provider does not validate identity, path admission or lifecycle
/// state for the runtime; it only refuses what its own safety needs
/// (unknown ids, a command on an instance that is not running, writes into
/// a sealed mount, snapshots of ZDR instances).
#[derive(Debug, Clone)]
pub struct MemoryProvider {
    inner: Arc<Inner>,
}

fn read_refusal(
    operation: Operation,
    refusal: ReadRefusal,
    path: impl std::fmt::Display,
) -> SandboxError {
    let (reason, what) = match refusal {
        ReadRefusal::OutsideRoot => (FailureReason::OutsideRoot, "resolves outside the root"),
        ReadRefusal::NotFound => (FailureReason::NotFound, "does not exist"),
        ReadRefusal::NotRegular => (FailureReason::NotRegularFile, "is not a regular file"),
    };
    SandboxError::failed(operation, reason, format!("{path} {what}"))
}
