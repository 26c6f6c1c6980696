//! Shared support for the CLI's end-to-end tests: the binary, output
//! helpers, and the Docker gate, from `checkfu-test-support` bound to this
//! crate's `checkfu` binary.
//!
//! Docker tests are gated explicitly: when no daemon answers they print a
//! `SKIP` line and return, except under `CI=true`, where an unreachable
//! daemon fails the test. Each Docker test gets its own scope
//! (`CHECKFU_SCOPE`) and state directory (`CHECKFU_STATE_DIR`), removes
//! what it created and checks that no container or image of its scope is
//! left.

#![allow(dead_code, unused_imports)] // each test binary uses part of this module

use std::path::Path;
use std::process::Command;

pub mod providers;
pub mod tree;

pub use checkfu_test_support::cli::{
    assert_one_line_failure, code, describe, failure_lines, git_repo, output, pattern,
    scope_objects, stderr, stdout, write, DockerEnv, Watched,
};

/// The `checkfu` binary under test, with tracing off.
pub fn checkfu() -> Command {
    checkfu_test_support::cli::checkfu(Path::new(env!("CARGO_BIN_EXE_checkfu")))
}

/// The Docker environment of test `name`, or `None` after a `SKIP` line
/// when no daemon answers (a failure under `CI=true`).
pub fn docker(name: &str) -> Option<DockerEnv> {
    checkfu_test_support::cli::docker(Path::new(env!("CARGO_BIN_EXE_checkfu")), name)
}

/// The objects a `checkfu sandbox cleanup` listed on stdout after `verb`
/// (`removed` or `would remove`): `instance <id>`, `snapshot <id>`,
/// `container <id> (...)`, `network <name>`, ...
pub fn swept_objects(o: &std::process::Output, verb: &str) -> std::collections::BTreeSet<String> {
    stdout(o)
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{verb} ")))
        .map(str::to_owned)
        .collect()
}

/// The sum of the counts a `checkfu sandbox cleanup` printed on stderr
/// as `checkfu: <verb> ... <N> <what>(s)` (`what`: `instance`,
/// `snapshot`, `support object`), over every line that says so.
pub fn swept_count(o: &std::process::Output, verb: &str, what: &str) -> usize {
    let needle = format!(" {what}(s)");
    stderr(o)
        .lines()
        .filter(|l| l.starts_with(&format!("checkfu: {verb} ")))
        .filter_map(|l| {
            let before = &l[..l.find(&needle)?];
            before.rsplit([' ', '(']).next()?.parse::<usize>().ok()
        })
        .sum()
}
