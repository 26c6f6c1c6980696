//! How `checkfu sandbox run` prints a session's events: the workload's
//! stdout to stdout (through `out`, so a closed pipe is remembered), its
//! stderr and checkfu's own lines to stderr.

use std::io::Write;
use std::sync::Mutex;

use checkfu_sandbox_contract::bounds::MAX_READ_FILE_BYTES;
use checkfu_sandbox_session::{Event, Observer, DEFAULT_OUTPUT_MAX_BYTES, OUTPUT_MAX_BYTES_ENV};

use super::fail::render_failure;

/// Prints events as they come, and remembers the workload's status.
#[derive(Debug, Default)]
pub struct Printer {
    status: Mutex<Option<u8>>,
}

impl Printer {
    /// The workload's status, once it settled ([`Event::Exited`]): a
    /// failure after it (the output copy, the durable snapshot) reports it.
    pub fn workload_status(&self) -> Option<u8> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Flushes stdout before a failure line, so that the workload's output
    /// comes first.
    pub fn flush_stdout(&self) {
        let _ = std::io::stdout().flush();
    }
}

impl Observer for Printer {
    fn event(&self, event: Event<'_>) {
        match event {
            Event::Image(image) => eprintln!("checkfu: image {}", image.as_str()),
            Event::Staging {
                mount_path,
                done,
                total,
            } => eprintln!("checkfu: staging {mount_path}: {done}/{total} files"),
            Event::Output { stdout, stderr } => {
                // A closed stdout is remembered by `out` and settled at exit.
                let _ = super::out::write(stdout);
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(stderr);
                let _ = err.flush();
            }
            Event::Exited { status } => {
                *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
            }
            Event::TimedOut { seconds } => {
                eprintln!("checkfu: the workload timed out after {seconds} s")
            }
            Event::OutputsCopied { dir, report } => {
                for skipped in &report.skipped {
                    eprintln!(
                        "checkfu: --outputs: {} not copied: {} bytes is over the {} MiB bound of one file read",
                        skipped.path,
                        skipped.size_bytes,
                        MAX_READ_FILE_BYTES / (1024 * 1024)
                    );
                }
                for c in &report.changed {
                    let verdict = if c.copied { "" } else { "; not copied" };
                    eprintln!("checkfu: --outputs: {}: {}{verdict}", c.path, c.what);
                }
                if let Some(why) = &report.deadline_passed {
                    eprintln!("checkfu: --outputs: {why}");
                }
                for over in &report.over_budget {
                    eprintln!(
                        "checkfu: --outputs: {} not copied: it needs {} host bytes, {} are left of \
the output copy's {} (${OUTPUT_MAX_BYTES_ENV}, {} by default, and never the last 1 GiB of free space)",
                        over.path,
                        over.needs_bytes,
                        over.left_bytes,
                        report.budget_bytes,
                        DEFAULT_OUTPUT_MAX_BYTES,
                    );
                }
                for (path, why) in &report.unwritten {
                    eprintln!(
                        "checkfu: --outputs {}: {path} not copied: {why}",
                        dir.display()
                    );
                }
            }
            Event::Snapshot(snapshot) => eprintln!(
                "checkfu: snapshot {} (expires {})",
                snapshot.snapshot_id, snapshot.expires_at
            ),
            Event::Cancelled { instance_id } => match instance_id {
                Some(id) => eprintln!("checkfu: interrupted; destroying instance {id}"),
                None => eprintln!("checkfu: interrupted"),
            },
            Event::Unsettled { seconds } => eprintln!(
                "checkfu: provider calls still running after {seconds} s; `checkfu sandbox cleanup` reclaims what they leave"
            ),
            Event::DestroyFailed {
                instance_id,
                failure: Some(f),
                ..
            } => eprintln!("checkfu: destroy {instance_id}: {}", render_failure(f)),
            Event::DestroyFailed {
                instance_id,
                failure: None,
                seconds,
            } => eprintln!(
                "checkfu: destroy {instance_id}: did not settle within {seconds} s; `checkfu sandbox cleanup` reclaims it after its expiry"
            ),
        }
    }
}
