//! The sandbox-provider contract: the types of the eighteen members, the
//! closed error vocabulary, the bounds, the capability envelope and its
//! cross-field rules, the provider traits, pure identity checks, and the
//! strict wire codec (revision [`wire::WIRE_REVISION`]).
//!
//! This crate depends on no async runtime and on no provider. Providers
//! depend on it to implement [`SandboxProvider`]; the runtime depends on it
//! to call them and to check everything they return.
//!
//! The behaviour is the spec page "Sandbox provider contract"; the decisions
//! that fill its gaps are in `docs/decisions/` and DESIGN D1–D18. The wire
//! form is specified in [`wire`].

pub mod active_write;
pub mod bounds;
pub mod bytes;
pub mod capabilities;
pub mod clock;
pub mod conformance;
pub mod digest;
pub mod envelope;
pub mod error;
pub mod identity;
pub mod mismatch;
pub mod operation;
pub mod path;
pub mod provider;
pub mod results;
pub mod sweep;
pub mod timestamp;
pub mod types;
pub mod validate;
pub mod wire;

pub use bytes::Bytes;
pub use capabilities::*;
pub use clock::{Clock, ManualClock, SystemClock};
pub use digest::{Digest, DigestError, ImageReference};
pub use envelope::{EnvelopeRule, EnvelopeViolation};
pub use error::{
    FailureReason, OutputStream, Requirement, SandboxError, SandboxFailure, UnmetAdapter,
};
pub use mismatch::{excerpt, show, Mismatch};
pub use operation::{ConflictActual, Member, Operation, ProcessStep, UnknownOperation, WireType};
pub use path::SandboxPath;
pub use provider::*;
pub use sweep::{CleanupInventory, SweepCandidate};
pub use timestamp::{Timestamp, TimestampError};
pub use types::*;
