//! Request and result types of the eighteen members (spec "The operations";
//! DESIGN D1, D3). Field names are the spec's, snake_case; byte content is
//! [`Bytes`](crate::Bytes) in `*_base64` fields; every struct refuses unknown fields.
//!
//! One module per group of members; every type is re-exported here.

mod execute;
mod files;
mod lifecycle;
mod process;
mod provision;

pub use execute::*;
pub use files::*;
pub use lifecycle::*;
pub use process::*;
pub use provision::*;
