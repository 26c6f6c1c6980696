//! Mapping containment and host failures onto the contract's closed
//! error vocabulary.

pub(super) use checkfu_sandbox_hostfs::errors::{blocking, chain, provider_error};
