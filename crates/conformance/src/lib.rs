//! Conformance (being built).
