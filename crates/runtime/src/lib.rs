//! The Runner side of the sandbox seam: the only way the rest of the system
//! talks to a provider, and the party that trusts none of them.
//!
//! [`SandboxRuntime`] selects exactly one [`Adapter`] for a Run's
//! [`Requirements`] (DESIGN D12). Every call on an adapter is admitted
//! before the provider sees it — lifecycle state (D6), path admission
//! (D8), bounds (D9), the network policy re-check (D11) — and every result
//! is checked after it returns: identity (D7), bounds, the closed outcome
//! unions. Allocating members go through the handoff (D5): a refused or
//! abandoned value is unwound by its own rollback, at most once, bounded at
//! 30 seconds.
//!
//! Errors are [`SandboxFailure`](checkfu_sandbox_contract::SandboxFailure):
//! one or more closed errors in order.

mod active_write;
pub mod adapter;
pub mod admission;
pub mod ceiling;
mod checks;
pub mod drivers;
mod extensions;
pub mod git;
mod handoff;
pub mod probe;
pub mod process;
pub mod runtime;
pub mod select;
pub mod staging;

pub use adapter::{Adapter, RecordState, ENDED_RECORDS_KEPT, SNAPSHOT_DEADLINES_KEPT};
pub use ceiling::{Ceiling, Cut, Enrollment};
pub use process::{Process, ProcessHandle};
pub use runtime::SandboxRuntime;
pub use select::Requirements;
