//! Conformance targets for the first-party providers.

pub mod docker;
pub mod memory;
