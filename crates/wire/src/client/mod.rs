//! The runner side: [`WireClient`] implements [`SandboxProvider`] and the
//! optional member traits over a connection to a served provider.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::bounds::ROLLBACK_TIMEOUT_SECONDS;
use checkfu_sandbox_contract::excerpt;
use checkfu_sandbox_contract::wire::{decode_value, WIRE_REVISION};
use checkfu_sandbox_contract::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::line::{read_line, LineError};
use crate::process::ClientProcess;
use crate::protocol::*;

mod conn;
mod handle;
mod provider;
mod transport;

pub use self::handle::WireClient;
use self::provider::WireRollback;
use self::transport::reconnect;

/// How a client waits, and the line bound it enforces.
#[derive(Debug, Clone, Copy)]
pub struct WireOptions {
    /// Deadline of an ordinary call (default 120 s). execute waits its own
    /// `timeout_seconds` plus [`EXECUTE_GRACE_SECONDS`] if that is longer;
    /// `sandbox/rollback` waits 30 s plus 5 s.
    pub call_timeout: Duration,
    /// Deadline of `initialize` (default 10 s).
    pub initialize_timeout: Duration,
    /// The longest line accepted (default [`MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            call_timeout: Duration::from_secs(DEFAULT_CALL_TIMEOUT_SECONDS),
            initialize_timeout: Duration::from_secs(INITIALIZE_TIMEOUT_SECONDS),
            max_line_bytes: MAX_LINE_BYTES,
        }
    }
}

/// Why the connection ended, rendered per call into a closed error.
#[derive(Debug, Clone)]
pub(crate) enum Broken {
    /// The provider closed the connection or its process exited.
    Closed(String),
    /// The provider broke the protocol: field, expected, actual.
    Violation(String, String, String),
}

impl Broken {
    pub(crate) fn error(&self, operation: Operation) -> SandboxError {
        match self {
            Broken::Closed(message) => SandboxError::failed(
                operation,
                FailureReason::ProviderError,
                format!("provider connection closed: {message}"),
            ),
            Broken::Violation(field, expected, actual) => {
                SandboxError::protocol(operation, field.clone(), expected.clone(), actual.clone())
            }
        }
    }
}

/// How many cancelled request ids a client remembers so that a late reply
/// to one is not taken for a protocol violation.
const MAX_CANCELLED_REMEMBERED: usize = 4096;

struct Pending {
    operation: Operation,
    allocating: bool,
    reply: oneshot::Sender<Result<Value, RpcError>>,
    on_reply: Option<ReplyHook>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Pending>,
    /// Requests the caller stopped observing: id → allocating; at most
    /// [`MAX_CANCELLED_REMEMBERED`], oldest forgotten first.
    cancelled: BTreeMap<u64, bool>,
    processes: HashMap<String, Arc<ClientProcess>>,
    /// beginActiveWrite calls in flight: transaction id -> the caller's
    /// dispatch marker, asked when the provider sends
    /// `runner/activeWriteDispatched`.
    markers: HashMap<String, Arc<dyn DispatchMarker>>,
    broken: Option<Broken>,
    /// A socket connection was lost with processes open: calls are refused
    /// until the processes are resumed on a new connection.
    reconnecting: bool,
    /// Which transport the reader and writer tasks serve; a stale task's
    /// report is ignored.
    transport: u64,
}

/// Runs in the reader task on a successful reply, before the next line.
type ReplyHook = Box<dyn FnOnce(&Arc<Conn>, &Value) + Send>;

/// Kills every process in the process group `group` leads (0: none).
fn kill_group(group: i32) {
    use rustix::process::{kill_process_group, Pid, Signal};
    if let Some(pid) = Pid::from_raw(group) {
        // ESRCH: the group is already empty.
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

/// How long a spawned provider may take to exit after EOF on its stdin
/// when the runner closes the connection, before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// One connection: a writer queue, the reader task's state.
pub(crate) struct Conn {
    out: Mutex<mpsc::UnboundedSender<Vec<u8>>>,
    state: Mutex<State>,
    next_id: AtomicU64,
    options: WireOptions,
    child: Mutex<Option<tokio::process::Child>>,
    /// The process group a spawned provider leads (its pid; 0 for none
    /// or once killed): every process it started is killed with it, once,
    /// so a recycled group id is never signalled.
    group: std::sync::atomic::AtomicI32,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The socket to reconnect to.
    reconnect: Option<std::path::PathBuf>,
    /// The server's resume window.
    resume_window: Mutex<Duration>,
    closing: std::sync::atomic::AtomicBool,
    /// The provider id of the first initialize (a resumed connection must
    /// name the same).
    provider_id: Mutex<String>,
}
