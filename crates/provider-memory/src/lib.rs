//! The memory oracle: a deterministic in-memory sandbox provider with every
//! member, every capability token and a registry of named faults (DESIGN
//! D17; spec "Sandbox provider contract").
//!
//! It is the reference the runtime and the conformance cases are proven
//! against, and the CLI's embedded default. Everything is simulated:
//!
//! - **Filesystem**: one tree per instance with directories, regular files,
//!   symlinks and special files ([`FsNode`], [`SpecialKind`]), starting
//!   from the fixture image's layout (`/bin` with an applet link per
//!   built-in, `/usr/bin/env`, `/etc/passwd`, `/etc/group`, `/home/checkfu`,
//!   `/root`, `/tmp`, `/proc`, `/sys`, `/dev/null`, `/dev/zero`); commands
//!   start from the fixture's environment (`PATH=/usr/local/bin:/usr/bin:/bin`,
//!   `HOME=/home/checkfu`, `HOSTNAME=`[`INSTANCE_HOSTNAME`]). Read-only
//!   mounts are sealed at activation (workload writes fail with `Read-only
//!   file system`, writeFile with reason `read_only`). `/mnt/session/outputs`
//!   and `/workspace/.checkfu` always exist.
//! - **Contained reads** (readFile, readFiles, listDir, listProjectDir)
//!   resolve one component at a time from `allowed_root` and refuse every
//!   escape with reason `outside_root`: absolute links (even ones naming a
//!   path inside the root, as `openat2(RESOLVE_BENEATH)` does), relative
//!   links or `..` that climb above the root, link loops (more than 40
//!   hops), and a root that is itself reached through a link. Links that
//!   stay inside the root are followed. **Dangling links**: containment is
//!   decided before existence, so a dangling link that points outside the
//!   root is `outside_root`, while one that stays inside is `not_found`.
//! - **Commands**: the probe vocabulary of DESIGN D15 plus `ln -s`,
//!   `mkdir -p`, `rm`, `mkfifo`, `echo`, `tee`, `pwd`, `printf`, `dd`,
//!   `chmod`, `setsid` (see execute), and `sh -c` over a small POSIX shell
//!   subset: lists with `;` `&&` `||` `&`, `while` loops, redirections,
//!   quoting, `$VAR` and `$(...)`; anything else answers `sh: syntax not
//!   supported by the memory oracle` with exit status 2. A file may have a
//!   **hole** (`dd ... seek=24G` stores nothing and lists 24 GiB). A
//!   **background job** (`cmd &`) that outlives its command is kept with
//!   the instance and advanced one loop iteration each time a member
//!   observes the instance (execute, readFile, readFiles, listDir,
//!   listProjectDir), so a workload can leave a file growing under the
//!   output copy, deterministically. **Time
//!   is virtual**: with a [`ManualClock`](checkfu_sandbox_contract::ManualClock)
//!   `sleep N` advances the clock by N seconds without waiting; past
//!   `timeout_seconds` the command settles `timed_out` with the clock moved by
//!   exactly `timeout_seconds`. With any other clock the provider waits in
//!   tokio time instead.
//! - **Network**: named listeners ([`MemoryProvider::add_listener`],
//!   [`MemoryProvider::add_instance_listener`]) reached by `nc -w S HOST
//!   PORT`. Loopback listeners of the same instance are always reachable;
//!   external ones only under an allowlist naming that exact (host, port);
//!   never under `none`.
//! - **openProcess**: real `futures_io` streams over bounded in-memory
//!   pipes (see [`PIPE_CAPACITY_BYTES`]); in openProcess, `sleep N` waits N
//!   seconds of tokio time and does not move the injected clock.
//! - **beginActiveWrite**: a real journal (open, dispatched, committed),
//!   the dispatch marker between open and dispatched, pause tokens, and
//!   settled outcomes for redelivery. The journal is in memory only, so ZDR
//!   instances are accepted, unless [`MemoryProviderBuilder::durable_journal`]
//!   simulates one on durable host storage (then they are refused).
//!
//! Ids are counters (`mem-inst-000001`, `mem-snap-000001`): the same inputs
//! give the same bytes.
//!
//! # API map
//!
//! - Construction: [`MemoryProvider::new`] (manual clock),
//!   [`MemoryProvider::with_system_clock`], [`MemoryProvider::builder`]
//!   ([`MemoryProviderBuilder::manual_clock`], `clock`, `fault`, `faults`),
//!   [`MemoryProvider::with_faults`].
//! - Faults: [`Fault`] (`all`, `name`, `rule`, `from_name`), [`IdentityField`],
//!   [`faults`] for the CLI. The two exit-cause faults act on the wire form
//!   only: [`MemoryProvider::command_result_wire`],
//!   [`MemoryProvider::execute_wire`].
//! - Network: [`MemoryProvider::add_listener`], `remove_listener`, `dial`,
//!   [`MemoryProvider::add_instance_listener`], `remove_instance_listener`.
//! - Inspection (leak checks, test set-up): [`MemoryProvider::live_instances`],
//!   `live_snapshots`, `instance_state`, `plant`, `node`, `snapshot_node`.
//! - The members: [`checkfu_sandbox_contract::SandboxProvider`] and, through
//!   its accessors, every optional member trait.
//!
//! # Rollbacks
//!
//! Each handoff's rollback captures, at allocation time, the id it
//! allocated: provision and resume remove their instance, activate returns
//! the instance to `provisioning` (unsealed, its processes ended), snapshot,
//! cloneSnapshot and a durable release remove their snapshot, a ZDR release
//! has nothing to undo. Every rollback is idempotent.

// The contract's closed `SandboxError` (128 bytes) is the error of every
// member; helpers return it unboxed so it flows into the trait methods as is.
#![allow(clippy::result_large_err)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod fault;
mod fs;
mod image;
mod probe;
mod process;
mod provider;
mod script;

pub use fault::{faults, ActiveWriteFault, Fault, IdentityField};
pub use fs::{FsNode, SpecialKind, MAX_LINK_HOPS};
pub use image::INSTANCE_HOSTNAME;
pub use process::PIPE_CAPACITY_BYTES;
pub use provider::{
    MemoryProvider, MemoryProviderBuilder, IMAGE_ID_REPOSITORY, MATERIALIZATION_REVISION,
    PACKAGE_RECORD_ROOT, PROVIDER_ID, PROVIDER_REVISION,
};
