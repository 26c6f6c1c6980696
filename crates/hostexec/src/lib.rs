//! Starting a command inside a running Linux workload from the host,
//! shared by the Linux provider (its instances) and the Docker provider
//! (a local daemon's containers, decision 045):
//!
//! * [`command`]: the workload a command enters ([`command::Target`]:
//!   namespaces, root, cgroups, [`Credentials`], seccomp filters) and the
//!   `tokio::process::Command` that enters it ([`command::prepare`]), the
//!   mapping of a failed spawn onto launch failures;
//! * `enter` (private): the code between `fork` and `exec`: one fork of
//!   the provider, then `clone(CLONE_VM)` supervisors and a
//!   `clone(CLONE_VM | CLONE_VFORK)` command in a PID namespace of its own
//!   nested in the workload's (decision 042), confined as the target says;
//! * `program` (private): the command's own `execve` and `PATH` lookup,
//!   no `execvp` shell fallback (decision 017);
//! * [`zygote`]: commands started by the workload's own pid 1 (the Linux
//!   provider's instance init), which already stands in the workload's
//!   namespaces, root and cgroups but the memory and pids groups
//!   (decisions 046, 049); [`running`]: a started
//!   command either way;
//! * [`bounded`]: execute's run: output counted per stream, timeout and
//!   overflow kill the command's whole PID namespace;
//! * [`process`]: openProcess over a spawned command;
//! * [`seccomp`]: classic-BPF filters, installed in the command and read
//!   from a running process (`PTRACE_SECCOMP_GET_FILTER`);
//! * [`sys`]: async-signal-safe helpers for code between fork and exec.
//!
//! **Invariant:** the only `unsafe` of the host-side providers' command
//! path lives here (`enter`, `program`, `seccomp`, `sys`, and the
//! `pre_exec` registration in [`command`]); a child between fork and exec
//! only makes system calls on data prepared before the fork.

pub mod bounded;
pub mod command;
mod enter;
pub mod process;
mod program;
pub mod running;
pub mod seccomp;
pub mod sys;
pub mod zygote;

pub use command::Credentials;
