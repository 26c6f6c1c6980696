//! Memory oracle (being built).
