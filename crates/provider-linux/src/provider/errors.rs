//! Mapping containment and host failures onto the contract's closed
//! error vocabulary.

pub(super) use checkfu_sandbox_hostfs::errors::{blocking, chain, contained_error, provider_error};
