//! Conformance targets for the first-party providers.

pub mod memory;
