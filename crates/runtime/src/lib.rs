//! Runtime (being built).
