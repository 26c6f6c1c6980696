//! The wire seam: sandbox providers in other processes and languages.
//!
//! JSON-RPC 2.0, one message per line, over a child's stdin/stdout or a
//! Unix socket (spec "From adapter to qualified provider", "Allocation
//! handoff", "openProcess"; the protocol is written down in
//! `author-kit/PROTOCOL.md`, the choices in the wire decision record).
//!
//! - [`WireClient`] is a [`checkfu_sandbox_contract::SandboxProvider`] (and
//!   every optional member the server declares) over a connection; results
//!   are decoded with the contract's strict decoder, and the runtime checks
//!   them as it checks any provider.
//! - [`serve_connection`], [`serve_stdio`] and [`serve_unix`] serve any
//!   provider, with optional [`ConformanceHooks`].
//! - With the `conformance` feature, [`conformance::WireTarget`] runs the
//!   conformance suite over the wire and [`conformance::TargetHooks`]
//!   serves a target's hooks.
//!
//! Bounds: a line is at most [`protocol::MAX_LINE_BYTES`]; stdin credit
//! [`protocol::STDIN_CREDIT_BYTES`]; replay window
//! [`protocol::REPLAY_WINDOW_BYTES`] per stream; a socket connection lost
//! with processes open is resumed within [`protocol::RESUME_WINDOW_MS`];
//! call deadlines [`protocol::DEFAULT_CALL_TIMEOUT_SECONDS`].

pub mod client;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod line;
mod process;
pub mod protocol;
pub mod server;

pub use client::{WireClient, WireOptions};
pub use protocol::message_schemas;
pub use server::{serve_connection, serve_stdio, serve_unix, ConformanceHooks, ServeError, Served};
