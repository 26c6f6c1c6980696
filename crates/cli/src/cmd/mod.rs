//! One module per `checkfu sandbox` subcommand.

pub mod schema;
