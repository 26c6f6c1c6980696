//! Conformance boundary types: the capability tokens, the nine cases' ids
//! and token requirements, and the evidence document a suite run produces
//! (its JSON Schema is in the author kit). The cases themselves live in the
//! `checkfu-sandbox-conformance` crate.

pub mod evidence;
pub mod token;
