//! Shared support for the workspace's tests. A dev-dependency only
//! (`publish = false`); nothing in a shipped crate depends on it.
//!
//! - [`gate`]: the daemon gate (feature `docker`). A test that needs a Docker daemon runs when
//!   one answers; when none does it prints a `SKIP` line and returns, except
//!   under `CI=true`, where an unreachable daemon is a failure, not a skip.
//!   The same skip-or-fail rule serves other host gates (root, cgroups).
//! - `docker` (feature `docker`): the Docker test-environment sweep: a provider scope's
//!   objects destroyed and checked gone, and objects labelled for one test
//!   removed and checked gone, both also when the test panics.
//! - [`hooked`]: a test double made from any provider plus hooks
//!   ([`hooked::Hooked`]): every member delegated to an inner provider
//!   (the memory oracle), every call recorded, and hooks that mutate a
//!   returned value, fail or gate an operation, hide an optional member,
//!   steer rollbacks and process controls, or override the envelope.
//! - [`cli`]: builders and readers for end-to-end runs of the `checkfu`
//!   binary, and (feature `docker`) a Docker scope of its own for each
//!   such test.

pub mod cli;
#[cfg(feature = "docker")]
pub mod docker;
pub mod fds;
pub mod gate;
pub mod hooked;
